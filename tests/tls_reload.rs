//! SIGHUP re-reads the certificate, key and TLS policies: new handshakes use
//! the new certificate while established TLS sessions go on; a reload that
//! names a missing or mismatched file keeps the old TLS serving and logs an
//! error.

mod common;

use std::path::Path;

use common::tls::{connect_tls_tcp, psql_conninfo, tls_toml, Certs, PsqlRun};
use common::{PgCluster, Pooler, PoolerOpts, SCRAM_USER, TEST_DB};

const RELOADED: &str = "configuration reloaded";
const RELOAD_FAILED: &str = "reload failed";

/// psql over TCP with verify-full against `ca` (host name localhost).
fn psql_verify_full(pooler: &Pooler, ca: &Path) -> PsqlRun {
    psql_conninfo(
        &format!(
            "host=localhost hostaddr=127.0.0.1 port={} user={} dbname={TEST_DB} \
             sslmode=verify-full sslrootcert={} connect_timeout=10",
            pooler.port(),
            SCRAM_USER.0,
            ca.display()
        ),
        Some(SCRAM_USER.1),
    )
}

fn assert_tls_with(pooler: &Pooler, ca: &Path, what: &str) {
    let run = psql_verify_full(pooler, ca);
    assert!(
        run.uses_tls(),
        "{what}: verify-full with {} failed: {}{}\n{}",
        ca.display(),
        run.stdout,
        run.stderr,
        pooler.log_text()
    );
}

fn assert_rejected_by(pooler: &Pooler, ca: &Path, what: &str) {
    let run = psql_verify_full(pooler, ca);
    assert!(
        !run.ok && run.stderr.contains("certificate verify failed"),
        "{what}: verify-full with {} should fail: {}{}",
        ca.display(),
        run.stdout,
        run.stderr
    );
}

/// Replaces `dst` with a copy of `src` in one rename, mode 0600.
fn install(src: &Path, dst: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = dst.with_extension("tmp");
    std::fs::copy(src, &tmp).expect("copy");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::rename(&tmp, dst).expect("rename");
}

/// Rewrites the `key = ...` line of the pooler's config and sends SIGHUP;
/// waits until the log reports the `n`th success or failure (`marker`).
fn reload_with(pooler: &Pooler, key: &str, value: &str, marker: &str, n: usize) {
    let path = pooler.config_path();
    let text = std::fs::read_to_string(path).expect("read config");
    let prefix = format!("{key} = ");
    let mut found = false;
    let edited: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with(&prefix) {
                found = true;
                format!("{key} = \"{value}\"")
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(found, "no {key} line in\n{text}");
    std::fs::write(path, edited.join("\n") + "\n").expect("write config");
    pooler.sighup_until(marker, n);
}

#[test]
fn sighup_swaps_the_certificate_and_survives_broken_files() {
    let pg = PgCluster::shared();
    let a = Certs::generate("reload-a");
    let b = Certs::generate("reload-b");
    // The files the config names; the test swaps their contents.
    let live = Certs::generate("reload-live");
    install(&a.cert, &live.cert);
    install(&a.key, &live.key);

    let mut pooler = Pooler::start(
        pg,
        PoolerOpts::default().tls(&tls_toml(Some(&live), &[("sslmode", "prefer")])),
    );
    assert_tls_with(&pooler, &a.ca, "certificate A");
    assert_rejected_by(&pooler, &b.ca, "certificate A");

    let rt = tokio::runtime::Runtime::new().unwrap();
    // A TLS session (verify-full against CA A) that lives through the reloads.
    let session = rt.block_on(async {
        connect_tls_tcp(
            &format!(
                "host=localhost hostaddr=127.0.0.1 port={} user={} password={} dbname={TEST_DB} \
                 sslmode=require",
                pooler.port(),
                SCRAM_USER.0,
                SCRAM_USER.1
            ),
            &a.ca,
        )
        .await
        .unwrap_or_else(|e| panic!("TLS session with certificate A: {e:?}"))
    });
    let still_usable = |what: &str| {
        rt.block_on(async {
            let row = session
                .query_one("SELECT 'still here'::text", &[])
                .await
                .unwrap_or_else(|e| panic!("{what}: the established session broke: {e:?}"));
            assert_eq!(row.get::<_, String>(0), "still here");
        })
    };

    // Certificate B in place of A, then SIGHUP.
    install(&b.cert, &live.cert);
    install(&b.key, &live.key);
    pooler.sighup_until(RELOADED, 1);
    assert_tls_with(&pooler, &b.ca, "after reloading certificate B");
    assert_rejected_by(&pooler, &a.ca, "after reloading certificate B");
    still_usable("after reloading certificate B");

    // A key file that does not exist: the reload fails, B keeps serving.
    reload_with(
        &pooler,
        "key_file",
        "/nonexistent/pgharbor-test/server.key",
        RELOAD_FAILED,
        1,
    );
    let log = pooler.log_text();
    let line = log.lines().rfind(|l| l.contains(RELOAD_FAILED)).unwrap();
    assert!(
        line.contains("ERROR") && line.contains("tls.key_file"),
        "the failed reload's log line does not name tls.key_file: {line}"
    );
    assert_tls_with(&pooler, &b.ca, "after a reload with a missing key file");
    still_usable("after a reload with a missing key file");

    // A key that does not match the certificate: refused the same way.
    reload_with(
        &pooler,
        "key_file",
        &a.key.display().to_string(),
        RELOAD_FAILED,
        2,
    );
    assert_tls_with(&pooler, &b.ca, "after a reload with a mismatched key");

    // Back to a good key and a stricter policy: the policy changes too.
    reload_with(
        &pooler,
        "key_file",
        &live.key.display().to_string(),
        RELOADED,
        2,
    );
    reload_with(&pooler, "sslmode", "require", RELOADED, 3);
    let plain = psql_conninfo(
        &format!(
            "host=127.0.0.1 port={} user={} dbname={TEST_DB} sslmode=disable",
            pooler.port(),
            SCRAM_USER.0
        ),
        Some(SCRAM_USER.1),
    );
    assert!(
        !plain.ok && plain.stderr.contains("FATAL:  SSL required"),
        "plain client after reloading sslmode=require: {}{}",
        plain.stdout,
        plain.stderr
    );
    assert_tls_with(&pooler, &b.ca, "after reloading sslmode=require");
    still_usable("at the end");
    pooler.assert_alive();
}
