//! SCRAM-SHA-256-PLUS toward clients (issue 16 item 5): libpq's
//! `channel_binding` against pgharbor behaves as against PostgreSQL 15
//! itself. psql runs the same conninfo tails against both (the shared
//! cluster has TLS and `host all all 127.0.0.1/32 scram-sha-256`);
//! tokio-postgres (a second client implementation) binds too; SCRAM
//! passthrough still logs the backend in after a -PLUS login; and a
//! certificate reloaded on SIGHUP is the one bound to. Attacks are in
//! `channel_binding_attacks.rs`.

mod common;

use std::time::Duration;

use common::clients::psql_cmd;
use common::tls::{connect_tls_tcp, psql_conninfo, tls_toml, Certs, PsqlRun};
use common::{Backend, DbEntry, PgCluster, Pooler, PoolerOpts, SCRAM_USER, TEST_DB, TRUST_USER};

const WAIT: Duration = Duration::from_secs(10);

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
