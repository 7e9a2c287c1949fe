//! `pgharbor import-pgbouncer` end to end, on the shape of the PgBouncer
//! config the comparison harness runs (pgbench/harbor_bench/targets.py's
//! `bouncer_config`): the translation passes `pgharbor check`, and a
//! pgharbor started from it serves what that PgBouncer served, with its
//! pool mode, pool size, auth file and TLS certificate.

mod common;
mod service_support;

use std::process::Command;

use common::clients::psql;
use common::pki::Pki;
use common::util::free_port;
use common::{backend_pid, connect_ok, PgCluster, Pooler, SCRAM_USER, TEST_DB};
use service_support::{Running, Setup};

/// The harness's PgBouncer ini, for this cluster and these files.
fn harness_ini(pg: &PgCluster, setup: &Setup, pki: &Pki) -> String {
    let dir = setup.dir.display();
    format!(
        "[databases]\n{TEST_DB} = host={sock} port={pg_port} dbname={TEST_DB}\n\n\
         [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n\
         unix_socket_dir = {dir}/sock\nauth_type = scram-sha-256\n\
         auth_file = {dir}/userlist.txt\npool_mode = transaction\n\
         default_pool_size = 1\nmax_client_conn = 50\n\
         pidfile = {dir}/pgbouncer.pid\nlog_connections = 0\nlog_disconnections = 0\n\
         client_tls_sslmode = prefer\nclient_tls_cert_file = {crt}\n\
         client_tls_key_file = {key}\nserver_tls_sslmode = disable\n",
        sock = pg.socket_dir().display(),
        pg_port = pg.port(),
        port = setup.port,
        crt = pki.path("server.crt"),
        key = pki.path("server.key"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_harness_pgbouncer_config_imports_and_serves_the_same() {
    let pg = PgCluster::shared();
    let setup = Setup::new(pg, free_port(), "");
    let pki = Pki::generate();
    std::fs::write(
        setup.dir.join("userlist.txt"),
        format!("\"{}\" \"{}\"\n", SCRAM_USER.0, SCRAM_USER.1),
    )
    .expect("userlist");
    let ini = setup.dir.join("pgbouncer.ini");
    std::fs::write(&ini, harness_ini(pg, &setup, &pki)).expect("ini");
    let toml = setup.dir.join("imported.toml");

    let out = Command::new(Pooler::binary())
        .arg("import-pgbouncer")
        .arg(&ini)
        .arg("--output")
        .arg(&toml)
        .output()
        .expect("run import-pgbouncer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Only what pgharbor takes elsewhere is reported as not imported.
    let not_imported: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("not imported"))
        .collect();
    assert_eq!(not_imported.len(), 3, "{stderr}");
    assert!(not_imported
        .iter()
        .any(|l| l.contains("pidfile") && l.contains("--pidfile")));
    assert!(not_imported.iter().any(|l| l.contains("log_connections")));
    assert!(not_imported
        .iter()
        .any(|l| l.contains("log_disconnections")));

    let check = Command::new(Pooler::binary())
        .args(["check", "--config"])
        .arg(&toml)
        .output()
        .expect("run check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let mut cmd = Command::new(Pooler::binary());
    cmd.arg("--config").arg(&toml);
    setup.output_to_log(&mut cmd);
    let _running = Running::spawn(&setup, cmd);
    let sock = format!(
        "host={} port={} user={} password={} dbname={TEST_DB}",
        setup.dir.join("sock").display(),
        setup.port,
        SCRAM_USER.0,
        SCRAM_USER.1
    );
    assert!(
        common::wait::wait_until(std::time::Duration::from_secs(10), || setup
            .socket()
            .exists()),
        "{}",
        setup.log_text()
    );
    // Transaction pooling with one backend: two clients hold connections
    // at once and both are served, as PgBouncer served them.
    let a = connect_ok(&sock).await;
    let b = connect_ok(&sock).await;
    for c in [&a, &b] {
        let row = c.query_one("SELECT 1", &[]).await.expect("query");
        assert_eq!(row.get::<_, i32>(0), 1);
    }
    let pid_a: i32 = backend_pid(&a).await;
    let pid_b: i32 = backend_pid(&b).await;
    assert_eq!(pid_a, pid_b, "default_pool_size = 1 was not carried over");

    // TLS over TCP with PgBouncer's certificate (psql fails if not offered).
    let tcp = format!(
        "host=127.0.0.1 port={} user={} dbname={TEST_DB} sslmode=require",
        setup.port, SCRAM_USER.0
    );
    let out = psql(&tcp, Some(SCRAM_USER.1), "SELECT 1");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        setup.log_text()
    );
}
