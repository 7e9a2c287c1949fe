//! `pgharbor --takeover` hands idle transaction-pooling clients over: the
//! old process sends each one's socket and session to the new one, which
//! serves it from its next transaction on, so the client never notices and
//! the old process exits as soon as its last client moved, long before
//! `shutdown_timeout`. Pinned and TLS clients drain on the old process.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::tls::{connect_tls_tcp, tls_toml, Certs};
use common::{
    backend_pid, connect_ok, Backend, DbEntry, PgCluster, Pooler, PoolerOpts, RawConn, Reply,
    Transport, SCRAM_USER, TEST_DB,
};

/// What the old process logs per client it hands over.
const HANDED: &str = "client handed over to the new process";
/// What the new process logs per client it takes.
const TAKEN: &str = "client taken over from the old process";

/// Long enough that an old process which drained instead of handing its
/// clients over would still be running when the test looks.
const LONG_DRAIN: &str = "60s";

async fn show_one(client: &tokio_postgres::Client, name: &str) -> String {
    let row = client
        .query_one(&format!("SHOW {name}"), &[])
        .await
        .unwrap();
    row.get(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_client_moves_with_its_settings_statements_and_cancel_key() {
    let pg = PgCluster::shared();
    let opts = PoolerOpts::transaction(2)
        .shutdown_timeout(LONG_DRAIN)
        .admin_users(&[SCRAM_USER.0]);
    let mut old = Pooler::start(pg, opts);
    let ci = format!(
        "{} options='-c statement_timeout=20000'",
        old.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)
    );
    let client = connect_ok(&ci).await;
    let token = client.cancel_token();
    client
        .batch_execute("SET search_path = handover_a, public")
        .await
        .unwrap();
    let stmt = client.prepare("SELECT $1::int + 1").await.unwrap();
    let got: i32 = client.query_one(&stmt, &[&1]).await.unwrap().get(0);
    assert_eq!(got, 2);
    let path = show_one(&client, "search_path").await;
    assert_eq!(path, "handover_a, public");
    assert_eq!(show_one(&client, "statement_timeout").await, "20s");

    let new = tokio::task::block_in_place(|| old.take_over(&[])).expect("takeover");
    tokio::task::block_in_place(|| old.assert_exits(Duration::from_secs(10)));
    assert!(old.log_text().contains(HANDED), "{}", old.log_text());
    assert!(
        new.wait_for_log(TAKEN, 1, Duration::from_secs(5)),
        "{}",
        new.log_text()
    );

    // The same connection, now served by the new process.
    assert_eq!(show_one(&client, "search_path").await, path);
    assert_eq!(show_one(&client, "statement_timeout").await, "20s");
    let got: i32 = client.query_one(&stmt, &[&41]).await.unwrap().get(0);
    assert_eq!(got, 42, "the prepared statement works on the new process");
    let admin = support::console(&new, Transport::Tcp).await;
    let clients = support::show(&admin, "SHOW CLIENTS").await;
    let row = clients.find(&[("database", TEST_DB), ("user", SCRAM_USER.0)]);
    assert_eq!(clients.get(row, "addr"), Some("unix"), "{clients:#?}");

    // The key it got at login cancels its query on the new process.
    let (client, err) = common::clients::sleep_and_cancel(pg, client, &token, 31).await;
    let db = common::clients::db_err(&err).expect("a server error");
    assert_eq!(db.code, "57014", "{err}");
    assert!(db.message.contains("user request"), "{}", db.message);
    client.batch_execute("SELECT 1").await.unwrap();
    drop(client);
    drop(new);
}

/// pgbench through `pooler` over the Unix socket in the background.
fn spawn_pgbench(pooler: &Pooler, script: &str, seconds: &str) -> Child {
    common::clients::pgbench_cmd(
        &pooler.host(Transport::Unix),
        pooler.port(),
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        TEST_DB,
    )
    .args(["-n", "-c", "8", "-j", "4", "-T", seconds, "-f", script])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("run pgbench")
}

#[test]
fn persistent_pgbench_moves_to_the_new_process_and_fails_nothing() {
    let pg = PgCluster::shared();
    let opts = PoolerOpts::transaction(4).shutdown_timeout(LONG_DRAIN);
    let mut old = Pooler::start(pg, opts);
    let dir = common::util::unique_temp_dir("handover-script");
    let script = dir.join("select.sql");
    std::fs::write(&script, "SELECT 1;\n").expect("write script");
    let mut bench = spawn_pgbench(&old, &script.to_string_lossy(), "12");
    assert!(
        old.wait_for_log("client logged in", 8, Duration::from_secs(20)),
        "{}",
        old.log_text()
    );
    let new = old.take_over(&[]).expect("takeover");
    // Moved, not drained: gone while pgbench still runs.
    old.assert_exits(Duration::from_secs(6));
    assert!(
        bench.try_wait().expect("pgbench status").is_none(),
        "pgbench ended before the old process did; nothing proves the clients moved"
    );
    assert_eq!(
        old.log_text().matches(HANDED).count(),
        8,
        "{}",
        old.log_text()
    );
    assert!(new.wait_for_log(TAKEN, 8, Duration::from_secs(5)));
    if common::wait::wait_child(&mut bench, Duration::from_secs(60)).is_none() {
        let _ = bench.kill();
        panic!("pgbench hung");
    }
    let out = bench.wait_with_output().expect("pgbench output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && stdout.contains("number of failed transactions: 0 ")
            && !stderr.contains("aborted"),
        "{stdout}\n{stderr}\nnew log:\n{}",
        new.log_text()
    );
    drop(new);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_and_pinned_clients_drain_on_the_old_process() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("handover");
    let opts = PoolerOpts::transaction(2)
        .shutdown_timeout(LONG_DRAIN)
        .tls(&tls_toml(Some(&certs), &[("sslmode", "prefer")]));
    let mut old = Pooler::start(pg, opts);
    let tcp = old.conninfo(Transport::Tcp, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let tls = connect_tls_tcp(&format!("{tcp} sslmode=require"), &certs.ca)
        .await
        .expect("TLS login");
    tls.batch_execute("SELECT 1").await.unwrap();
    let unix = old.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let pinned = connect_ok(&unix).await;
    pinned
        .batch_execute(
            "CREATE TEMP TABLE handover_pin (x int); INSERT INTO handover_pin VALUES (7)",
        )
        .await
        .unwrap();
    let new = tokio::task::block_in_place(|| old.take_over(&[])).expect("takeover");
    assert!(
        old.wait_for_log(
            "handing idle transaction-pooling clients",
            1,
            Duration::from_secs(5)
        ),
        "{}",
        old.log_text()
    );
    for i in 0..5i32 {
        let got: i32 = tls.query_one("SELECT $1::int", &[&i]).await.unwrap().get(0);
        assert_eq!(got, i);
        // Its temporary table is on the old process's backend.
        let x: i32 = pinned
            .query_one("SELECT x FROM handover_pin", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(x, 7);
    }
    old.assert_alive();
    assert!(!old.log_text().contains(HANDED), "{}", old.log_text());
    drop(pinned);
    tls.batch_execute("SELECT 1").await.unwrap();
    old.assert_alive();
    drop(tls);
    tokio::task::block_in_place(|| old.assert_exits(Duration::from_secs(10)));
    drop(new);
}

#[test]
fn a_client_the_new_config_would_pool_per_session_gets_a_clear_fatal() {
    let pg = PgCluster::shared();
    let opts = PoolerOpts::transaction(2).shutdown_timeout(LONG_DRAIN);
    let mut old = Pooler::start(pg, opts);
    let mut raw = RawConn::connect(&old.endpoint(Transport::Tcp));
    raw.login(
        &[("user", SCRAM_USER.0), ("database", TEST_DB)],
        Some(SCRAM_USER.1),
    )
    .expect("login");
    assert_eq!(raw.query("SELECT 1").rows.len(), 1);
    let config = std::fs::read_to_string(old.config_path()).expect("read config");
    let session = config.replace("mode = \"transaction\"", "mode = \"session\"");
    assert_ne!(config, session, "no pool mode line in\n{config}");
    std::fs::write(old.config_path(), session).expect("write config");
    let new = old.take_over(&[]).expect("takeover");
    old.assert_exits(Duration::from_secs(10));
    // Idle, it hears why at once from the new process, which then closes.
    let reply = raw.read_msg(Duration::from_secs(10));
    let err = reply.error().unwrap_or_else(|| panic!("{reply:?}"));
    assert_eq!(
        (err.severity.as_str(), err.code.as_str()),
        ("FATAL", "57P01")
    );
    assert!(err.message.contains("session pooling"), "{}", err.message);
    assert_eq!(raw.read_msg(Duration::from_secs(5)), Reply::Closed);
    // New logins get the new mode.
    let mut again = RawConn::connect(&new.endpoint(Transport::Tcp));
    again
        .login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .expect("login to the new process");
    assert_eq!(again.query("SELECT 1").rows.len(), 1);
    drop(new);
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// One frame's body, read plainly (the kernel closes descriptors riding on it).
fn read_frame(s: &mut std::os::unix::net::UnixStream) -> String {
    use std::io::Read;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a frame");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("a frame");
    String::from_utf8_lossy(&body).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_1_successor_gets_the_sockets_and_the_clients_drain() {
    use std::io::Write;
    let pg = PgCluster::shared();
    let opts = PoolerOpts::transaction(2).shutdown_timeout(LONG_DRAIN);
    let mut old = Pooler::start(pg, opts);
    let ci = old.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let client = connect_ok(&ci).await;
    client.batch_execute("SELECT 1").await.unwrap();
    let path = old
        .socket_dir()
        .join(format!(".s.PGSQL.{}.takeover", old.port()));
    let mut s = std::os::unix::net::UnixStream::connect(path).expect("control socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&frame(b"{\"type\":\"hello\",\"version\":1}"))
        .unwrap();
    let offer = read_frame(&mut s);
    assert!(
        offer.contains("\"offer\"") && offer.contains("\"version\":1"),
        "{offer}"
    );
    s.write_all(&frame(b"{\"type\":\"accepting\",\"pid\":1}"))
        .unwrap();
    assert!(read_frame(&mut s).contains("\"draining\""));
    assert!(
        old.wait_for_log("clients drain here", 1, Duration::from_secs(5)),
        "{}",
        old.log_text()
    );
    // A version 1 peer reads no client frames: the client stays.
    client.batch_execute("SELECT 1").await.unwrap();
    old.assert_alive();
    assert!(!old.log_text().contains(HANDED), "{}", old.log_text());
    drop(client);
    tokio::task::block_in_place(|| old.assert_exits(Duration::from_secs(10)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_whose_pool_logs_in_with_its_lent_scram_keys_moves_with_the_key() {
    // The auth file holds the pg_authid secret and the conninfo no
    // password: backends log in with the ClientKey the client's SCRAM
    // login lent. The new process gets that key with the client (checked
    // against its own copy of the secret) and opens its backend with it.
    let pg = PgCluster::shared();
    let secret = pg.scram_secret(SCRAM_USER.0);
    let opts = PoolerOpts::transaction(2)
        .shutdown_timeout(LONG_DRAIN)
        .userlist(&[(SCRAM_USER.0, &secret)])
        .databases(vec![DbEntry::new(TEST_DB, Backend::Tcp).pool_size(2)]);
    let mut old = Pooler::start(pg, opts);
    let ci = old.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let client = connect_ok(&ci).await;
    let before: i32 = backend_pid(&client).await;
    let new = tokio::task::block_in_place(|| old.take_over(&[])).expect("takeover");
    tokio::task::block_in_place(|| old.assert_exits(Duration::from_secs(10)));
    assert!(old.log_text().contains(HANDED), "{}", old.log_text());
    // The old process's backends are gone with it: this query runs on a
    // backend the new process opened with the lent key.
    let after: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap_or_else(|e| panic!("{e}; new log:\n{}", new.log_text()))
        .get(0);
    assert_ne!(before, after, "a backend of the new process");
    assert!(
        !new.log_text().contains("does not match"),
        "{}",
        new.log_text()
    );
    drop(client);
    drop(new);
}
