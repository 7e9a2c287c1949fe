//! Client certificates toward pgharbor (issue 16 item 3): `tls.ca_file`
//! with its CRL (a file and a rehashed directory), the front-end policies
//! `verify-ca` / `verify-full` (with and without `tls.client_cert_map`),
//! the hba `cert` method (with and without `map=`) and `clientcert=` on a
//! password method. Each client presents a certificate signed by the
//! test CA, one by another CA, a revoked one, or none; the outcome is read
//! from the client side: `SELECT current_user`, PostgreSQL's exact FATAL,
//! or a failed handshake. psql (libpq's sslcert/sslkey) and tokio-postgres
//! with OpenSSL (for the SQLSTATEs) over TCP, tokio-postgres over the Unix
//! socket, where libpq never uses TLS. Also the config refusals without
//! `tls.ca_file`, and SIGHUP with a new CA file or a broken CRL.

mod common;

#[path = "client_cert_support/mod.rs"]
mod support;

use std::path::PathBuf;

use common::pki::MAPPED_CN;
use common::tls::tls_toml;
use common::{PgCluster, Pooler, PoolerOpts, SCRAM_USER, TRUST_USER};
use support::{
    auth_files, cert_failed, matrix, needs_cert, psql_login, psql_matches, socket_matches,
    socket_outcome, tcp_outcome, AuthFiles, Setup, Want,
};

#[test]
fn each_setting_admits_the_test_ca_certificate_only() {
    let pg = PgCluster::shared();
    let s = Setup::new();
    let scram = SCRAM_USER.0;
    let trust_pass = Some("trust_pass");
    // (what, [tls] keys, hba file, user, password)
    let settings: Vec<(&str, String, AuthFiles, &str, Option<&str>)> = vec![
        (
            "sslmode=verify-ca",
            s.tls(&[("sslmode", "verify-ca")]),
            AuthFiles::none(),
            TRUST_USER,
            None,
        ),
        (
            "sslmode=verify-full",
            s.tls(&[("sslmode", "verify-full")]),
            AuthFiles::none(),
            TRUST_USER,
            None,
        ),
        (
            "hba cert",
            s.tls(&[]),
            auth_files(Some("hostssl all all 127.0.0.1/32 cert\n"), None),
            TRUST_USER,
            None,
        ),
        (
            "hba scram-sha-256 clientcert=verify-ca",
            s.tls(&[]),
            auth_files(
                Some("hostssl all all 127.0.0.1/32 scram-sha-256 clientcert=verify-ca\n"),
                None,
            ),
            TRUST_USER,
            trust_pass,
        ),
    ];
    for (what, tls, auth, user, password) in settings {
        let opts = PoolerOpts::default()
            .auth("trust")
            .tls(&tls)
            .auth_toml(&auth.toml);
        let p = Pooler::start(pg, opts);
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        for (cert, want) in matrix(Want::User(TRUST_USER)) {
            let got = rt.block_on(tcp_outcome(&p, &s.pki, cert, user, password));
            assert!(
                socket_matches(&got, &want),
                "{what}, cert {cert:?}, tokio-postgres: want {want:?}, got {got:?}"
            );
            let got = psql_login(&p, &s.pki, cert, user, password);
            assert!(
                psql_matches(&got, &want),
                "{what}, cert {cert:?}: want {want:?}, got {got:?}"
            );
        }
        // The test CA's certificate for another user is not enough where
        // the CN is checked.
        if what != "hba scram-sha-256 clientcert=verify-ca" {
            let got = psql_login(&p, &s.pki, Some("scram"), TRUST_USER, None);
            let want = match what {
                "sslmode=verify-ca" => Want::User(TRUST_USER),
                _ => cert_failed(TRUST_USER),
            };
            assert!(
                psql_matches(&got, &want),
                "{what}, CN {scram}: want {want:?}, got {got:?}"
            );
        }
        let log = p.log_text();
        assert!(
            log.contains("client certificate verification failed"),
            "{what}: {log}"
        );
        assert!(!log.contains("trust_pass"), "{what}: a secret in the log");
    }
}

#[test]
fn verify_full_maps_the_cn_only_through_a_configured_map() {
    let pg = PgCluster::shared();
    let s = Setup::new();
    let ident = "certmap /^(.*)@example\\.com$ \\1\n";
    let cases = [
        (
            "policy, no map",
            s.tls(&[("sslmode", "verify-full")]),
            auth_files(None, None),
            false,
        ),
        (
            "policy, client_cert_map",
            s.tls(&[("sslmode", "verify-full"), ("client_cert_map", "certmap")]),
            auth_files(None, Some(ident)),
            true,
        ),
        (
            "hba cert, no map",
            s.tls(&[]),
            auth_files(Some("hostssl all all 127.0.0.1/32 cert\n"), Some(ident)),
            false,
        ),
        (
            "hba cert map=certmap",
            s.tls(&[]),
            auth_files(
                Some("hostssl all all 127.0.0.1/32 cert map=certmap\n"),
                Some(ident),
            ),
            true,
        ),
    ];
    for (what, tls, auth, mapped) in cases {
        let p = Pooler::start(
            pg,
            PoolerOpts::default()
                .auth("trust")
                .tls(&tls)
                .auth_toml(&auth.toml),
        );
        let got = psql_login(&p, &s.pki, Some("mapped"), TRUST_USER, None);
        let want = if mapped {
            Want::User(TRUST_USER)
        } else {
            cert_failed(TRUST_USER)
        };
        assert!(
            psql_matches(&got, &want),
            "{what} ({MAPPED_CN}): want {want:?}, got {got:?}"
        );
        // With a map, the CN is not a user name of its own.
        if mapped {
            let got = psql_login(&p, &s.pki, Some("trust"), TRUST_USER, None);
            assert!(
                psql_matches(&got, &cert_failed(TRUST_USER)),
                "{what}: CN trust_user: {got:?}"
            );
        }
        if !mapped {
            assert!(
                p.log_text().contains(MAPPED_CN),
                "{what}: the refused CN is logged"
            );
        }
    }
}

#[test]
fn clientcert_verify_full_on_scram_checks_the_cn_after_the_password() {
    let pg = PgCluster::shared();
    let s = Setup::new();
    let (user, password) = SCRAM_USER;
    let auth = auth_files(
        Some("hostssl all all 127.0.0.1/32 scram-sha-256 clientcert=verify-full\n"),
        None,
    );
    let p = Pooler::start(
        pg,
        PoolerOpts::default().tls(&s.tls(&[])).auth_toml(&auth.toml),
    );
    let ok = psql_login(&p, &s.pki, Some("scram"), user, Some(password));
    assert_eq!(ok, Ok(user.to_string()));
    // Right password, wrong CN: PostgreSQL's auth_failed for the method.
    let got = psql_login(&p, &s.pki, Some("trust"), user, Some(password));
    let want = Want::Fatal(
        "28P01",
        format!("password authentication failed for user \"{user}\""),
    );
    assert!(psql_matches(&got, &want), "{got:?}");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let got = rt.block_on(tcp_outcome(&p, &s.pki, Some("trust"), user, Some(password)));
    assert!(socket_matches(&got, &want), "tokio-postgres: {got:?}");
    // A wrong password is refused by the password first, the same way.
    let got = rt.block_on(tcp_outcome(&p, &s.pki, Some("scram"), user, Some("wrong")));
    assert!(socket_matches(&got, &want), "wrong password: {got:?}");
    let got = psql_login(&p, &s.pki, None, user, Some(password));
    assert!(psql_matches(&got, &needs_cert()), "{got:?}");
    let log = p.log_text();
    assert!(
        log.contains("cn=trust_user"),
        "the mismatching CN is logged: {log}"
    );
    assert!(!log.contains(password), "a secret in the log");
}

#[test]
fn the_crl_works_as_a_rehashed_directory_too() {
    let pg = PgCluster::shared();
    let s = Setup::new();
    let (ca, crl_dir) = (s.pki.path("ca.crt"), s.pki.path("crldir"));
    let tls = tls_toml(
        Some(&s.server),
        &[
            ("ca_file", ca.as_str()),
            ("crl_dir", crl_dir.as_str()),
            ("sslmode", "verify-ca"),
        ],
    );
    let p = Pooler::start(pg, PoolerOpts::default().auth("trust").tls(&tls));
    for (cert, want) in matrix(Want::User(TRUST_USER)) {
        let got = psql_login(&p, &s.pki, cert, TRUST_USER, None);
        assert!(
            psql_matches(&got, &want),
            "cert {cert:?}: want {want:?}, got {got:?}"
        );
    }
    // Without any CRL the revoked certificate is just a valid one.
    let tls = tls_toml(
        Some(&s.server),
        &[("ca_file", ca.as_str()), ("sslmode", "verify-ca")],
    );
    let p = Pooler::start(pg, PoolerOpts::default().auth("trust").tls(&tls));
    let got = psql_login(&p, &s.pki, Some("revoked"), TRUST_USER, None);
    assert_eq!(got, Ok(TRUST_USER.to_string()));
}

#[test]
fn socketsslmode_verify_modes_over_the_unix_socket() {
    let pg = PgCluster::shared();
    let s = Setup::new();
    for mode in ["verify-ca", "verify-full"] {
        let tls = s.tls(&[("socketsslmode", mode)]);
        let p = Pooler::start(pg, PoolerOpts::default().auth("trust").tls(&tls));
        let socket: PathBuf = p.socket_path();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        for (cert, want) in matrix(Want::User(TRUST_USER)) {
            let got = rt.block_on(socket_outcome(&socket, &s.pki, cert, TRUST_USER));
            assert!(
                socket_matches(&got, &want),
                "{mode}, cert {cert:?}: want {want:?}, got {got:?}"
            );
        }
        let log = p.log_text();
        for reason in [
            "unable to get local issuer certificate",
            "certificate revoked",
        ] {
            assert!(
                log.contains(&format!("reason={reason}")),
                "{mode}: {reason}: {log}"
            );
        }
        let got = rt.block_on(socket_outcome(&socket, &s.pki, Some("scram"), TRUST_USER));
        let want = if mode == "verify-ca" {
            Want::User(TRUST_USER)
        } else {
            cert_failed(TRUST_USER)
        };
        assert!(
            socket_matches(&got, &want),
            "{mode}, CN scram_user: want {want:?}, got {got:?}"
        );
    }
}

#[test]
fn certificate_settings_without_a_ca_file_are_refused_by_check_and_start_up() {
    let pg = PgCluster::shared();
    let s = Setup::new();
    let plain = tls_toml(Some(&s.server), &[]);
    let (crl, not_a_ca) = (s.pki.path("ca.crl"), s.pki.path("ca.cnf"));
    let cases = [
        (
            tls_toml(Some(&s.server), &[("sslmode", "verify-ca")]),
            AuthFiles::none(),
            "tls.sslmode: \"verify-ca\" needs tls.ca_file".to_string(),
        ),
        (
            tls_toml(Some(&s.server), &[("socketsslmode", "verify-full")]),
            AuthFiles::none(),
            "tls.socketsslmode: \"verify-full\" needs tls.ca_file".to_string(),
        ),
        (
            tls_toml(Some(&s.server), &[("crl_file", crl.as_str())]),
            AuthFiles::none(),
            "tls.crl_file: needs tls.ca_file".to_string(),
        ),
        (
            plain.clone(),
            auth_files(Some("local all all trust\nhostssl all all all cert\n"), None),
            "pg_hba.conf:2: client certificates can only be checked if a root certificate store is available (set tls.ca_file)".to_string(),
        ),
        (
            plain,
            auth_files(Some("hostssl all all all scram-sha-256 clientcert=verify-ca\n"), None),
            "pg_hba.conf:1: client certificates can only be checked if a root certificate store is available".to_string(),
        ),
    ];
    for (tls, auth, want) in cases {
        let opts = PoolerOpts::default()
            .auth("trust")
            .tls(&tls)
            .auth_toml(&auth.toml);
        let (code, out) = Pooler::run_check(&Pooler::sample_config(pg, &opts));
        assert_ne!(code, 0, "check accepted it: {out}");
        assert!(out.contains(&want), "check: want {want:?} in:\n{out}");
        match Pooler::try_start(pg, opts) {
            Ok(_) => panic!("start-up accepted {want}"),
            Err(log) => assert!(log.contains(&want), "start-up: want {want:?} in:\n{log}"),
        }
    }
    // A CA file that is not one fails the acceptor, with PostgreSQL's words.
    let bogus = tls_toml(
        Some(&s.server),
        &[("ca_file", not_a_ca.as_str()), ("sslmode", "verify-ca")],
    );
    let opts = PoolerOpts::default().auth("trust").tls(&bogus);
    let (code, out) = Pooler::run_check(&Pooler::sample_config(pg, &opts));
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("tls.ca_file"), "{out}");
}

/// Rewrites the `key = ...` line of the pooler's config, sends SIGHUP and
/// waits for the `n`th `marker` in the log.
fn reload_with(p: &Pooler, key: &str, value: &str, marker: &str, n: usize) {
    let path = p.config_path();
    let text = std::fs::read_to_string(path).expect("read config");
    let prefix = format!("{key} = ");
    let edited: Vec<String> = text
        .lines()
        .map(|l| match l.starts_with(&prefix) {
            true => format!("{key} = \"{value}\""),
            false => l.to_string(),
        })
        .collect();
    assert_ne!(edited.join("\n") + "\n", text, "no {key} line in\n{text}");
    std::fs::write(path, edited.join("\n") + "\n").expect("write config");
    p.signal(libc::SIGHUP);
    assert!(
        p.wait_for_log(marker, n, std::time::Duration::from_secs(10)),
        "no {n}th {marker:?} after SIGHUP:\n{}",
        p.log_text()
    );
}

#[test]
fn sighup_rebuilds_the_client_ca_and_keeps_it_when_the_new_crl_is_broken() {
    let pg = PgCluster::shared();
    let s = Setup::new();
    let p = Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("trust")
            .tls(&s.tls(&[("sslmode", "verify-ca")])),
    );
    let login = |cert| psql_login(&p, &s.pki, Some(cert), TRUST_USER, None);
    assert_eq!(login("trust"), Ok(TRUST_USER.to_string()));
    assert!(psql_matches(
        &login("other"),
        &Want::Handshake("unknown ca")
    ));

    // The other CA (and no CRL of its own: the test CA's CRL does not
    // cover it, so crl_file goes too).
    reload_with(&p, "crl_file", "", "configuration reloaded", 1);
    reload_with(
        &p,
        "ca_file",
        &s.pki.path("other_ca.crt"),
        "configuration reloaded",
        2,
    );
    assert_eq!(login("other"), Ok(TRUST_USER.to_string()));
    assert!(psql_matches(
        &login("trust"),
        &Want::Handshake("unknown ca")
    ));

    // A CRL that cannot be loaded refuses the reload: the acceptor stays.
    reload_with(
        &p,
        "ca_file",
        &s.pki.path("ca.crt"),
        "configuration reloaded",
        3,
    );
    let missing = s.pki.path("missing.crl");
    reload_with(&p, "crl_file", &missing, "reload failed", 1);
    assert!(
        p.log_text()
            .contains("could not load SSL certificate revocation list file"),
        "{}",
        p.log_text()
    );
    assert_eq!(login("trust"), Ok(TRUST_USER.to_string()));
    assert!(psql_matches(
        &login("other"),
        &Want::Handshake("unknown ca")
    ));
}
