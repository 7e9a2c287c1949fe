//! `pgharbor --takeover`: a new process takes the listening sockets over
//! from the running one, which stops accepting and drains. No client may
//! see a refused connection or a failed transaction.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::tls::{connect_tls_tcp, tls_toml, Certs};
use common::{
    backend_pid, connect_ok, PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER, TEST_DB,
};

/// The per-login log line, to see which process serves.
const LOGGED_IN: &str = "client logged in";

fn control_path(p: &Pooler) -> PathBuf {
    p.socket_dir()
        .join(format!(".s.PGSQL.{}.takeover", p.port()))
}

/// `SELECT 1` per transaction, so no pgbench tables are needed.
fn select_script() -> (PathBuf, String) {
    let dir = common::util::unique_temp_dir("takeover-script");
    let script = dir.join("select.sql");
    std::fs::write(&script, "SELECT 1;\n").expect("write script");
    let s = script.to_string_lossy().into_owned();
    (dir, s)
}

/// pgbench through `pooler` over `t` in the background.
fn spawn_pgbench(pooler: &Pooler, t: Transport, args: &[&str]) -> Child {
    common::clients::pgbench_cmd(
        &pooler.host(t),
        pooler.port(),
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        TEST_DB,
    )
    .args(args)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("run pgbench")
}

/// Waits for pgbench and asserts it finished with every transaction done
/// and none failed (pgbench exits non-zero when a client aborts, e.g. on a
/// refused connection).
fn assert_pgbench_clean(mut child: Child, what: &str) -> String {
    if common::wait::wait_child(&mut child, Duration::from_secs(60)).is_none() {
        let _ = child.kill();
        panic!("{what}: pgbench hung");
    }
    let out = child.wait_with_output().expect("pgbench output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && stdout.contains("number of failed transactions: 0 ")
            && !stderr.contains("aborted"),
        "{what}: {stdout}\n{stderr}"
    );
    let done = stdout
        .lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|n| n.split('/').next()?.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(done > 0, "{what}: no transaction processed: {stdout}");
    stdout
}

/// The old process's log has `n` logins: the load is running through it.
fn wait_logins(p: &Pooler, n: usize) {
    assert!(
        p.wait_for_log(LOGGED_IN, n, Duration::from_secs(20)),
        "no load through the pooler; log:\n{}",
        p.log_text()
    );
}

/// Asserts the old process exits within `timeout`, and cleanly.
#[test]
fn pgbench_connect_per_transaction_across_a_takeover_fails_nothing() {
    let pg = PgCluster::shared();
    let mut old = Pooler::start(pg, PoolerOpts::transaction(4));
    let (dir, script) = select_script();
    let bench = spawn_pgbench(
        &old,
        Transport::Tcp,
        &["-n", "-C", "-c", "4", "-j", "4", "-T", "6", "-f", &script],
    );
    wait_logins(&old, 20);
    let new = old.take_over(&[]).expect("takeover");
    wait_logins(&new, 20);
    let stdout = assert_pgbench_clean(bench, "pgbench -C across a takeover");
    old.assert_exits(Duration::from_secs(10));
    assert!(
        stdout.contains("number of failed transactions: 0 "),
        "{stdout}"
    );
    // The path is the new process's: a second restart works the same way.
    let newer = new.take_over(&[]).expect("second takeover");
    connect_and_query(&newer, Transport::Unix);
    drop(newer);
    drop(new);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn persistent_transaction_mode_pgbench_across_a_takeover_fails_nothing() {
    let pg = PgCluster::shared();
    let mut old = Pooler::start(pg, PoolerOpts::transaction(4));
    let (dir, script) = select_script();
    let bench = spawn_pgbench(
        &old,
        Transport::Unix,
        &["-n", "-c", "8", "-j", "4", "-T", "5", "-f", &script],
    );
    wait_logins(&old, 8);
    let new = old.take_over(&[]).expect("takeover");
    // New clients reach the new process while the old one still serves pgbench.
    connect_and_query(&new, Transport::Tcp);
    assert!(new.wait_for_log(LOGGED_IN, 1, Duration::from_secs(5)));
    assert_pgbench_clean(bench, "pgbench -c 8 across a takeover");
    // pgbench's clients ended with its run: the old process has drained.
    old.assert_exits(Duration::from_secs(10));
    drop(new);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One login and a query through `p` over `t`, with a fresh process each
/// time (psql), so it exercises the accept path.
fn connect_and_query(p: &Pooler, t: Transport) {
    let ci = p.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let got = common::clients::psql_ok(&ci, Some(SCRAM_USER.1), "SELECT 41 + 1");
    assert_eq!(got, "42");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_client_stays_on_the_old_process_until_it_leaves() {
    let pg = PgCluster::shared();
    let mut old = Pooler::start(
        pg,
        PoolerOpts::default()
            .mode("session")
            .shutdown_timeout("30s"),
    );
    let ci = old.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let client = connect_ok(&ci).await;
    let pid: i32 = backend_pid(&client).await;
    let new = tokio::task::block_in_place(|| old.take_over(&[])).expect("takeover");
    assert!(
        old.wait_for_log("drains", 1, Duration::from_secs(5)),
        "{}",
        old.log_text()
    );
    // Still on the same backend, through the old process.
    for _ in 0..5 {
        let again: i32 = backend_pid(&client).await;
        assert_eq!(again, pid);
    }
    old.assert_alive();
    tokio::task::block_in_place(|| connect_and_query(&new, Transport::Unix));
    drop(client);
    tokio::task::block_in_place(|| old.assert_exits(Duration::from_secs(10)));
    drop(new);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tls_client_drains_on_the_old_process() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("takeover");
    let opts = PoolerOpts::transaction(2)
        .shutdown_timeout("30s")
        .tls(&tls_toml(Some(&certs), &[("sslmode", "prefer")]));
    let mut old = Pooler::start(pg, opts);
    let ci = format!(
        "{} sslmode=require",
        old.conninfo(Transport::Tcp, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)
    );
    let client = connect_tls_tcp(&ci, &certs.ca).await.expect("TLS login");
    client.batch_execute("SELECT 1").await.unwrap();
    let new = tokio::task::block_in_place(|| old.take_over(&[])).expect("takeover");
    for i in 0..5i32 {
        let got: i32 = client
            .query_one("SELECT $1::int", &[&i])
            .await
            .unwrap()
            .get(0);
        assert_eq!(got, i);
    }
    old.assert_alive();
    // A new TLS login is the new process's.
    let second = connect_tls_tcp(&ci, &certs.ca)
        .await
        .expect("TLS login to the new process");
    second.batch_execute("SELECT 1").await.unwrap();
    assert!(
        new.wait_for_log(LOGGED_IN, 1, Duration::from_secs(5)),
        "{}",
        new.log_text()
    );
    drop(client);
    tokio::task::block_in_place(|| old.assert_exits(Duration::from_secs(10)));
    second.batch_execute("SELECT 1").await.unwrap();
    drop(second);
    drop(new);
}

#[test]
fn takeover_with_nothing_running_fails_with_a_clear_message() {
    let pg = PgCluster::shared();
    let mut old = Pooler::start(pg, PoolerOpts::transaction(1));
    old.signal(libc::SIGTERM);
    old.assert_exits(Duration::from_secs(10));
    assert!(
        !control_path(&old).exists(),
        "control socket file left behind"
    );
    let out = Command::new(Pooler::binary())
        .arg("--takeover")
        .arg("--config")
        .arg(old.config_path())
        .stdin(Stdio::null())
        .output()
        .expect("run pgharbor --takeover");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--takeover: no running pgharbor answers on")
            && stderr.contains("start without --takeover"),
        "{stderr}"
    );
}

/// Sends `bytes` on a fresh control connection and returns what came back
/// before the pooler closed it.
fn control_exchange(path: &PathBuf, bytes: &[u8]) -> Vec<u8> {
    let mut s = UnixStream::connect(path).expect("connect to the control socket");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

#[test]
fn malformed_control_messages_leave_the_running_process_serving() {
    let pg = PgCluster::shared();
    let mut old = Pooler::start(pg, PoolerOpts::transaction(1));
    let path = control_path(&old);
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xff; 4],
        vec![0, 0],
        frame(b"{"),
        frame(b"{\"type\":\"nonsense\"}"),
        frame(b"{\"type\":\"accepting\",\"pid\":1}"),
        frame(b"{\"type\":\"hello\"}"),
        [0, 0, 0, 40, b'{'].to_vec(),
    ];
    for bytes in &cases {
        let back = control_exchange(&path, bytes);
        assert!(back.is_empty(), "{bytes:?} got {back:?}");
        old.assert_alive();
    }
    // Another version is told so, and nothing changes hands.
    let back = control_exchange(&path, &frame(b"{\"type\":\"hello\",\"version\":999}"));
    let text = String::from_utf8_lossy(&back);
    assert!(
        text.contains("\"type\":\"refused\"") && text.contains("999"),
        "{text}"
    );
    old.assert_alive();
    connect_and_query(&old, Transport::Unix);
    // The control socket still works for a real takeover.
    let new = old.take_over(&[]).expect("takeover after malformed input");
    old.assert_exits(Duration::from_secs(10));
    connect_and_query(&new, Transport::Tcp);
    drop(new);
}

/// `GET /metrics` at `addr`: the status line.
fn metrics_status(addr: &str) -> String {
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect to metrics");
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).unwrap();
    let mut back = String::new();
    let _ = tcp.read_to_string(&mut back);
    back.lines().next().unwrap_or_default().to_string()
}

#[test]
fn the_pidfile_and_the_metrics_endpoint_follow_the_takeover() {
    let pg = PgCluster::shared();
    let dir = common::util::unique_temp_dir("takeover-pidfile");
    let pidfile = dir.join("pgharbor.pid");
    let pid_arg = pidfile.to_string_lossy().into_owned();
    let metrics = format!("127.0.0.1:{}", common::util::free_port());
    let opts = PoolerOpts::transaction(1)
        .metrics_listen(&metrics)
        .args(&["--pidfile", &pid_arg]);
    let mut old = Pooler::start(pg, opts);
    assert!(metrics_status(&metrics).contains("200"));
    let new = old.take_over(&["--pidfile", &pid_arg]).expect("takeover");
    let names_new =
        || std::fs::read_to_string(&pidfile).is_ok_and(|t| t.trim() == new.pid().to_string());
    assert!(common::wait::wait_until(Duration::from_secs(5), names_new));
    old.assert_exits(Duration::from_secs(10));
    assert!(
        names_new(),
        "the old process removed or rewrote the pidfile"
    );
    // The same listening socket: the endpoint never went away.
    assert!(metrics_status(&metrics).contains("200"));
    drop(new);
    assert!(
        !pidfile.exists(),
        "the new process leaves its pidfile behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_for_a_client_draining_on_the_old_process_still_cancels() {
    let pg = PgCluster::shared();
    let opts = PoolerOpts::default()
        .mode("session")
        .shutdown_timeout("30s");
    let mut old = Pooler::start(pg, opts);
    let ci = old.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let client = connect_ok(&ci).await;
    let token = client.cancel_token();
    let new = tokio::task::block_in_place(|| old.take_over(&[])).expect("takeover");
    assert!(
        old.wait_for_log("drains", 1, Duration::from_secs(5)),
        "{}",
        old.log_text()
    );
    // Only the new process accepts now: the cancel reaches it, not the old one.
    let (client, err) = common::clients::sleep_and_cancel(pg, client, &token, 30).await;
    assert_eq!(
        common::clients::sqlstate(&err).as_deref(),
        Some("57014"),
        "{err}"
    );
    client.batch_execute("SELECT 1").await.unwrap();
    drop(client);
    tokio::task::block_in_place(|| old.assert_exits(Duration::from_secs(10)));
    drop(new);
}

#[test]
fn a_new_process_that_vanishes_after_taking_over_does_not_hang_the_old_one() {
    let pg = PgCluster::shared();
    let mut old = Pooler::start(pg, PoolerOpts::transaction(1));
    let mut s = UnixStream::connect(control_path(&old)).expect("connect to the control socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&frame(b"{\"type\":\"hello\",\"version\":2}"))
        .unwrap();
    // A plain read: the kernel closes the descriptors that ride along.
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("the offer");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("the offer");
    assert!(String::from_utf8_lossy(&body).contains("\"offer\""));
    s.write_all(&frame(b"{\"type\":\"accepting\",\"pid\":1}"))
        .unwrap();
    drop(s);
    // It has handed over and stops, whether or not the goodbye got through.
    old.assert_exits(Duration::from_secs(10));
}
