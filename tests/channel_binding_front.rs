//! SCRAM-SHA-256-PLUS toward clients (issue 16 item 5): libpq's
//! `channel_binding` against pgharbor behaves as against PostgreSQL 15
//! itself. psql runs the same conninfo tails against both (the shared
//! cluster has TLS and `host all all 127.0.0.1/32 scram-sha-256`); a raw
//! client sends both the same hostile SASL messages and must get the same
//! errors; tokio-postgres (a second client implementation) binds too; and
//! SCRAM passthrough still logs the backend in after a -PLUS login.

mod common;

use std::time::Duration;

use common::clients::psql_cmd;
use common::tls::{connect_tls_tcp, psql_conninfo, tls_toml, Certs, PsqlRun};
use common::wire::{cstrings, message, request_packet, ErrorFields, TlsVerify, SSL_REQUEST_CODE};
use common::{
    Backend, DbEntry, Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Reply, SCRAM_USER, TEST_DB,
    TRUST_USER,
};

const WAIT: Duration = Duration::from_secs(10);
/// AuthenticationSASL's request code.
const AUTH_SASL: i32 = 10;
/// AuthenticationSASLContinue's request code.
const AUTH_SASL_CONTINUE: i32 = 11;

fn tls_opts(certs: &Certs) -> PoolerOpts {
    PoolerOpts::default().tls(&tls_toml(Some(certs), &[("sslmode", "prefer")]))
}

/// `host=127.0.0.1 port=.. user=.. dbname=harbor_test` plus `tail`.
fn conninfo(port: u16, user: &str, tail: &str) -> String {
    format!("host=127.0.0.1 port={port} user={user} dbname={TEST_DB} {tail}")
}

/// One psql run against PostgreSQL and one through pgharbor.
fn both(pg: &PgCluster, pooler: &Pooler, user: &str, pw: &str, tail: &str) -> [PsqlRun; 2] {
    [pg.port(), pooler.port()].map(|port| psql_conninfo(&conninfo(port, user, tail), Some(pw)))
}

#[test]
fn psql_channel_binding_as_against_postgresql() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("cbind-psql");
    let pooler = Pooler::start(pg, tls_opts(&certs));
    let (user, pw) = SCRAM_USER;
    // require can only succeed through a verified -PLUS exchange (libpq
    // checks that the server's signature covered the binding); prefer picks
    // -PLUS when offered; disable sends `n` and no binding.
    for tail in [
        "sslmode=require channel_binding=require",
        "sslmode=require channel_binding=prefer",
        "sslmode=require channel_binding=disable",
    ] {
        let [direct, through] = both(pg, &pooler, user, pw, tail);
        assert!(direct.uses_tls(), "direct, {tail}: {}", direct.stderr);
        assert!(
            through.uses_tls(),
            "pgharbor, {tail}: {}\n{}",
            through.stderr,
            pooler.log_text()
        );
    }
    // In plain text -PLUS is not offered: prefer logs in (libpq would
    // refuse a -PLUS offer without TLS), require is refused by libpq itself
    // before any password crosses.
    let [direct, through] = both(
        pg,
        &pooler,
        user,
        pw,
        "sslmode=disable channel_binding=prefer",
    );
    assert!(
        direct.ok && through.ok,
        "{}\n{}",
        direct.stderr,
        through.stderr
    );
    let [direct, through] = both(
        pg,
        &pooler,
        user,
        pw,
        "sslmode=disable channel_binding=require",
    );
    for (who, run) in [("direct", &direct), ("pgharbor", &through)] {
        assert!(
            !run.ok,
            "{who}: plain text with channel_binding=require logged in"
        );
        assert!(
            run.stderr
                .contains("channel binding required, but SSL not in use"),
            "{who}: {}",
            run.stderr
        );
    }
    // A wrong password and an unknown user over -PLUS: the same 28P01.
    let tail = "sslmode=require channel_binding=require";
    for (user, pw) in [(SCRAM_USER.0, "wrong"), ("nobody_here", "x")] {
        let [direct, through] = both(pg, &pooler, user, pw, tail);
        let want = format!("password authentication failed for user \"{user}\"");
        for run in [&direct, &through] {
            assert!(!run.ok && run.stderr.contains(&want), "{}", run.stderr);
        }
    }
}

#[test]
fn require_refuses_a_login_that_was_not_channel_bound() {
    // trust over TLS: no SCRAM at all, so libpq must refuse the
    // AuthenticationOk, as it does against PostgreSQL's trust line.
    let pg = PgCluster::shared();
    let certs = Certs::generate("cbind-trust");
    let pooler = Pooler::start(pg, tls_opts(&certs).auth("trust"));
    let tail = "sslmode=require channel_binding=require";
    let [direct, through] = both(pg, &pooler, TRUST_USER, "x", tail);
    for (who, run) in [("direct", &direct), ("pgharbor", &through)] {
        assert!(!run.ok, "{who}: trust passed channel_binding=require");
        assert!(
            run.stderr.contains(
                "channel binding required, but server authenticated client without channel binding"
            ),
            "{who}: {}",
            run.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn scram_passthrough_after_a_plus_login() {
    // The auth file holds only pg_authid's secret and the backend (over
    // TCP, scram-sha-256) gets no password: the client's -PLUS proof is
    // what logs it in.
    let pg = PgCluster::shared();
    let certs = Certs::generate("cbind-pass");
    let secret = pg.scram_secret(SCRAM_USER.0);
    let opts = tls_opts(&certs)
        .userlist(&[(SCRAM_USER.0, &secret)])
        .databases(vec![DbEntry::new(TEST_DB, Backend::Tcp)]);
    let pooler = Pooler::start(pg, opts);
    let tail = "sslmode=require channel_binding=require";
    let out = psql_cmd(
        &conninfo(pooler.port(), SCRAM_USER.0, tail),
        Some(SCRAM_USER.1),
    )
    .env("HOME", "/nonexistent")
    .args([
        "-At",
        "-c",
        "SELECT current_user, inet_client_addr() IS NOT NULL",
    ])
    .output()
    .expect("run psql");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.trim(),
        format!("{}|t", SCRAM_USER.0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        pooler.log_text()
    );

    // tokio-postgres binds with its own code (postgres-openssl's hash of
    // the certificate it verified).
    let info = format!(
        "{} password={}",
        conninfo(pooler.port(), SCRAM_USER.0, tail),
        SCRAM_USER.1
    );
    let client = connect_tls_tcp(&info, &certs.ca)
        .await
        .unwrap_or_else(|e| panic!("tokio-postgres, {tail}: {e:?}\n{}", pooler.log_text()));
    let row = client
        .query_one("SELECT current_user::text", &[])
        .await
        .expect("query");
    assert_eq!(row.get::<_, String>(0), SCRAM_USER.0);
}

/// Replaces `dst` with a copy of `src` in one rename, mode 0600.
fn install(src: &std::path::Path, dst: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = dst.with_extension("tmp");
    std::fs::copy(src, &tmp).expect("copy");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::rename(&tmp, dst).expect("rename");
}

#[test]
fn the_binding_follows_a_certificate_reloaded_on_sighup() {
    // The hash is taken per login from the session's own certificate, so a
    // login after SIGHUP binds to the new one (verify-ca proves which).
    let pg = PgCluster::shared();
    let a = Certs::generate("cbind-reload-a");
    let b = Certs::generate("cbind-reload-b");
    let live = Certs::generate("cbind-reload-live");
    install(&a.cert, &live.cert);
    install(&a.key, &live.key);
    let pooler = Pooler::start(pg, tls_opts(&live));
    let login = |ca: &Certs| {
        let tail = format!(
            "sslmode=verify-ca sslrootcert={} channel_binding=require",
            ca.ca.display()
        );
        psql_conninfo(
            &conninfo(pooler.port(), SCRAM_USER.0, &tail),
            Some(SCRAM_USER.1),
        )
    };
    let run = login(&a);
    assert!(run.uses_tls(), "certificate A: {}", run.stderr);
    install(&b.cert, &live.cert);
    install(&b.key, &live.key);
    pooler.signal(libc::SIGHUP);
    assert!(
        pooler.wait_for_log("configuration reloaded", 1, WAIT),
        "{}",
        pooler.log_text()
    );
    let run = login(&b);
    assert!(
        run.uses_tls(),
        "certificate B: {}\n{}",
        run.stderr,
        pooler.log_text()
    );
}

/// A raw client at `port` that asked for TLS when `tls`, sent the startup
/// packet for [`SCRAM_USER`] and read AuthenticationSASL; returns it and
/// the mechanisms offered.
fn sasl_start(port: u16, tls: bool) -> (RawConn, Vec<String>) {
    let mut c = RawConn::connect(&Endpoint::Tcp(port));
    if tls {
        c.send(&request_packet(SSL_REQUEST_CODE))
            .expect("send SSLRequest");
        assert_eq!(c.read_request_answer(WAIT), Reply::Byte(b'S'));
        c.start_tls(&TlsVerify::None).expect("TLS handshake");
    }
    c.send_startup(&[("user", SCRAM_USER.0), ("database", TEST_DB)])
        .expect("send startup");
    match c.read_msg(WAIT) {
        Reply::Msg(b'R', body) if body[..4] == AUTH_SASL.to_be_bytes() => {
            let offered = cstrings(&body[4..]);
            (c, offered)
        }
        other => panic!("expected AuthenticationSASL, got {}", other.summary()),
    }
}

/// SASLInitialResponse (or SASLResponse when `mechanism` is None).
fn sasl_message(mechanism: Option<&str>, data: &str) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(m) = mechanism {
        body.extend_from_slice(m.as_bytes());
        body.push(0);
        body.extend_from_slice(&(data.len() as i32).to_be_bytes());
    }
    body.extend_from_slice(data.as_bytes());
    message(b'p', &body)
}

/// What the server answered a hostile SASL sequence with: severity,
/// SQLSTATE and the message with its DETAIL, or the summary of a non-error.
fn outcome(port: u16, tls: bool, mechanism: &str, first: &str, bad_c: Option<&str>) -> String {
    let (mut c, _) = sasl_start(port, tls);
    c.send(&sasl_message(Some(mechanism), first)).expect("send");
    let mut reply = c.read_msg(WAIT);
    if let Some(cbind) = bad_c {
        let Reply::Msg(b'R', body) = &reply else {
            panic!("expected SASLContinue, got {}", reply.summary());
        };
        assert_eq!(body[..4], AUTH_SASL_CONTINUE.to_be_bytes());
        let server_first = String::from_utf8_lossy(&body[4..]).into_owned();
        let nonce = server_first.split(',').next().unwrap_or("");
        let proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let last = format!("c={cbind},{nonce},{proof}");
        c.send(&sasl_message(None, &last)).expect("send");
        reply = c.read_msg(WAIT);
    }
    match reply.error() {
        Some(ErrorFields {
            severity,
            code,
            message,
            fields,
        }) => {
            // pgharbor folds a "malformed SCRAM message" DETAIL into the
            // message; the SQLSTATE and the first words must agree.
            let head = message.split(" (").next().unwrap_or("").to_string();
            let detail = fields.get(&'D').cloned().unwrap_or_default();
            let detail = if head == "malformed SCRAM message" {
                String::new()
            } else {
                detail
            };
            format!("{severity} {code} {head} | {detail}")
        }
        None => reply.summary(),
    }
}

#[test]
fn hostile_sasl_messages_get_postgresqls_errors() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("cbind-raw");
    let pooler = Pooler::start(pg, tls_opts(&certs));
    for tls in [true, false] {
        let want: &[&str] = if tls {
            &["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]
        } else {
            &["SCRAM-SHA-256"]
        };
        for port in [pg.port(), pooler.port()] {
            assert_eq!(sasl_start(port, tls).1, want, "port {port}, TLS {tls}");
        }
    }
    let plus = "SCRAM-SHA-256-PLUS";
    let plain = "SCRAM-SHA-256";
    let bound = "p=tls-server-end-point,,n=,r=abcdef";
    let cases: &[(bool, &str, &str, Option<&str>)] = &[
        // The downgrade: `y` where -PLUS was offered.
        (true, plain, "y,,n=,r=abcdef", None),
        (true, plain, bound, None),
        (true, plus, "n,,n=,r=abcdef", None),
        (true, plus, "y,,n=,r=abcdef", None),
        (true, plus, "p=tls-unique,,n=,r=abcdef", None),
        // c= without our certificate's hash.
        (true, plus, bound, Some("biws")),
        (true, plus, bound, Some("cD10bHMtc2VydmVyLWVuZC1wb2ludCws")),
        (true, "SCRAM-SHA-1", "n,,n=,r=abcdef", None),
        // -PLUS was never offered in plain text.
        (false, plus, bound, None),
        (false, plain, bound, None),
        (false, plain, "y,,n=,r=abcdef", Some("eSws")),
    ];
    for (tls, mechanism, first, c) in cases {
        let direct = outcome(pg.port(), *tls, mechanism, first, *c);
        let through = outcome(pooler.port(), *tls, mechanism, first, *c);
        assert!(
            direct.starts_with("FATAL"),
            "{mechanism} {first} {c:?}: {direct}"
        );
        assert_eq!(through, direct, "TLS {tls}, {mechanism}, {first}, c={c:?}");
    }
}
