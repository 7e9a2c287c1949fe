//! Acceptance tests for known relay defects: each test reproduces one defect
//! and encodes what a direct PostgreSQL connection does (the same exchange
//! is run directly against PostgreSQL wherever that makes sense, and the
//! answers are compared). They fail on the relay as it was when they were
//! written; the relay rewrite makes them pass.
//!
//! Every read has a deadline; waits are on observable state (a row in
//! pg_stat_activity, a counter of the test's own proxy, a close), never on
//! elapsed time. The only pauses are the delay the cancel proxy of defect 2
//! imposes and the gaps between the pieces of the Bind of defect 5, both of
//! which shape the input rather than wait for the pooler.

mod common;

use common::scram_unix_conninfo;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio_postgres::AsyncMessage;

use common::clients::describe_error;
use common::ext;
use common::util::free_port;
use common::wait::wait_until;
use common::wire::{
    cancel_packet, cstrings, data_row, name_value, startup_packet, QueryResult, Session,
    CANCEL_REQUEST_CODE, PROTOCOL_3_0,
};
use common::{
    connect_ok, connect_with_messages, Backend, DbEntry, Endpoint, ErrorFields, PgCluster, Pooler,
    PoolerOpts, RawConn, Reply, Transport, MD5_USER, SCRAM_USER, TEST_DB,
};

/// Generous bound for anything that must happen "promptly" on a loaded machine.
const WAIT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// Helpers

/// A raw client logged in at `ep` as `user` on `db`.
fn login_as(ep: &Endpoint, user: &str, password: Option<&str>, db: &str) -> (RawConn, Session) {
    let mut c = RawConn::connect(ep);
    let s = c
        .login(&[("user", user), ("database", db)], password)
        .unwrap_or_else(|e| panic!("login at {ep:?} as {user} on {db}: {e:?}"));
    (c, s)
}

/// A raw client logged in through the pooler's Unix socket as scram_user.
fn pooled(p: &Pooler) -> (RawConn, Session) {
    login_as(
        &p.endpoint(Transport::Unix),
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        TEST_DB,
    )
}

/// A raw client straight to PostgreSQL (Unix socket: trust) as scram_user,
/// the reference for "what a direct connection does".
fn direct(pg: &PgCluster) -> (RawConn, Session) {
    login_as(&pg.endpoint(Transport::Unix), SCRAM_USER.0, None, TEST_DB)
}

/// A raw superuser connection straight to PostgreSQL, for looking from outside.
fn superuser(pg: &PgCluster) -> RawConn {
    login_as(&pg.endpoint(Transport::Unix), "postgres", None, TEST_DB).0
}

/// Reads one simple query's replies up to ReadyForQuery; Err describes a
/// close or timeout before it.
fn read_result(c: &mut RawConn, timeout: Duration) -> Result<QueryResult, String> {
    let deadline = Instant::now() + timeout;
    let mut res = QueryResult::default();
    loop {
        match c.read_msg(deadline.saturating_duration_since(Instant::now())) {
            Reply::Msg(b'D', body) => res.rows.push(data_row(&body)),
            Reply::Msg(b'C', body) => res.tags.extend(cstrings(&body)),
            Reply::Msg(b'E', body) => res.error = Some(ErrorFields::parse(&body)),
            Reply::Msg(b'N', body) => res.notices.push(ErrorFields::parse(&body)),
            Reply::Msg(b'S', body) => res.params.push(name_value(&body)),
            Reply::Msg(b'Z', body) => {
                res.status = body.first().copied().unwrap_or(0);
                return Ok(res);
            }
            Reply::Msg(_, _) => {}
            other => {
                return Err(format!(
                    "{} before ReadyForQuery (error so far: {})",
                    other.summary(),
                    res.error.as_ref().map(short_error).unwrap_or_default()
                ))
            }
        }
    }
}

/// Runs a simple query; Err on close/timeout.
fn try_query(c: &mut RawConn, sql: &str, timeout: Duration) -> Result<QueryResult, String> {
    c.send(&ext::query(sql))
        .map_err(|e| format!("send {sql:?}: {e}"))?;
    read_result(c, timeout)
}

/// Runs a simple query that must succeed.
fn q_ok(c: &mut RawConn, sql: &str) -> QueryResult {
    let r = try_query(c, sql, WAIT).unwrap_or_else(|e| panic!("{}: {e}", clip(sql)));
    if let Some(e) = &r.error {
        panic!("{}: {}", clip(sql), short_error(e));
    }
    r
}

/// "SEVERITY CODE message" with the message cut short (some are a megabyte).
fn short_error(e: &ErrorFields) -> String {
    format!("{} {} {}", e.severity, e.code, clip(&e.message))
}

fn clip(s: &str) -> String {
    if s.len() <= 200 {
        s.to_string()
    } else {
        let cut = (0..=200)
            .rev()
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}... ({} bytes)", &s[..cut], s.len())
    }
}

/// Reads messages up to and including ReadyForQuery (or the close/timeout
/// that came first, as the last element).
fn read_to_ready(c: &mut RawConn, timeout: Duration) -> Vec<Reply> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    loop {
        let r = c.read_msg(deadline.saturating_duration_since(Instant::now()));
        let end = !matches!(r, Reply::Msg(t, _) if t != b'Z');
        out.push(r);
        if end {
            return out;
        }
    }
}

/// Reads up to and including the first message of type `stop` (or the
/// close/timeout that came first).
fn read_to_tag(c: &mut RawConn, stop: u8, timeout: Duration) -> Vec<Reply> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    loop {
        let r = c.read_msg(deadline.saturating_duration_since(Instant::now()));
        let end = !matches!(r, Reply::Msg(t, _) if t != stop && t != b'Z');
        out.push(r);
        if end {
            return out;
        }
    }
}

/// One reply in a form that is equal for equal protocol behaviour:
/// ParameterStatus is left out (the pooler may add or drop some), errors
/// and notices keep severity, SQLSTATE and message, everything else its
/// type and whole body.
fn norm(replies: &[Reply]) -> Vec<String> {
    replies
        .iter()
        .filter(|r| !matches!(r, Reply::Msg(b'S', _)))
        .map(|r| match r {
            Reply::Msg(t @ (b'E' | b'N'), body) => {
                let e = ErrorFields::parse(body);
                format!("{} {}", *t as char, short_error(&e))
            }
            Reply::Msg(b'D', body) => format!("D {:?}", data_row(body)),
            Reply::Msg(t, body) if body.len() <= 200 => {
                format!("{} {:?}", *t as char, String::from_utf8_lossy(body))
            }
            Reply::Msg(t, body) => format!("{} <{} bytes>", *t as char, body.len()),
            other => other.summary(),
        })
        .collect()
}

/// Runs `sql` on a superuser connection and returns the first column of
/// the first row.
fn scalar(c: &mut RawConn, sql: &str) -> Option<String> {
    q_ok(c, sql).scalar()
}

fn pg_backend_pid(c: &mut RawConn) -> i32 {
    scalar(c, "SELECT pg_backend_pid()")
        .expect("pg_backend_pid")
        .parse()
        .expect("pid")
}

fn wait_or(what: &str, timeout: Duration, f: impl FnMut() -> bool) {
    assert!(wait_until(timeout, f), "{what} (waited {timeout:?})");
}

/// Creates (or recreates) a table `name(id int)` scram_user may use.
fn fresh_table(pg: &PgCluster, name: &str, extra_sql: &str) {
    pg.psql_ok(
        TEST_DB,
        &format!(
            "DROP TABLE IF EXISTS {name} CASCADE; CREATE TABLE {name}(id int); \
             GRANT ALL ON {name} TO PUBLIC; {extra_sql}"
        ),
    );
}

fn session_pooler(pool_size: usize) -> Pooler {
    Pooler::start(
        PgCluster::shared(),
        PoolerOpts::default().pool_size(pool_size),
    )
}

fn txn_pooler(pool_size: usize) -> Pooler {
    Pooler::start(PgCluster::shared(), PoolerOpts::transaction(pool_size))
}

fn pooler_in(mode: &str, pool_size: usize) -> Pooler {
    Pooler::start(
        PgCluster::shared(),
        PoolerOpts::default().mode(mode).pool_size(pool_size),
    )
}

/// tokio-postgres call with a deadline, panicking with `what` on timeout.
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {WAIT:?}"))
}

// ---------------------------------------------------------------------------
// 1. A commit is lost when its client leaves.

/// A table whose every insert runs a deferred constraint trigger that
/// sleeps 1 s: its COMMIT takes a second.
fn slow_commit_table(pg: &PgCluster, name: &str) {
    fresh_table(
        pg,
        name,
        &format!(
            "CREATE OR REPLACE FUNCTION {name}_slow() RETURNS trigger LANGUAGE plpgsql AS \
             $$BEGIN PERFORM pg_sleep(1); RETURN NULL; END$$; \
             CREATE CONSTRAINT TRIGGER {name}_slow AFTER INSERT ON {name} \
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {name}_slow();"
        ),
    );
}

fn commit_survives_client_leaving(p: &Pooler, table: &str) {
    let pg = PgCluster::shared();
    slow_commit_table(pg, table);
    let mut admin = superuser(pg);

    // Control: directly, the commit of a vanished client is carried out.
    {
        let (mut d, _) = direct(pg);
        q_ok(&mut d, "BEGIN");
        q_ok(&mut d, &format!("INSERT INTO {table} VALUES (1)"));
        let pid = pg_backend_pid(&mut d);
        d.send(&ext::query("COMMIT")).unwrap();
        drop(d);
        wait_commit_done(&mut admin, table, pid, 1);
        assert_eq!(
            scalar(
                &mut admin,
                &format!("SELECT count(*) FROM {table} WHERE id = 1")
            )
            .as_deref(),
            Some("1"),
            "direct PostgreSQL lost the commit of a client that left"
        );
    }

    let (mut c, _) = pooled(p);
    q_ok(&mut c, "BEGIN");
    q_ok(&mut c, &format!("INSERT INTO {table} VALUES (2)"));
    let pid = pg_backend_pid(&mut c);
    c.send(&ext::query("COMMIT")).unwrap();
    // Gone without reading the reply.
    drop(c);
    wait_commit_done(&mut admin, table, pid, 2);
    let log = q_ok(
        &mut admin,
        &format!("SELECT count(*) FROM {table} WHERE id = 2"),
    );
    assert_eq!(
        log.scalar().as_deref(),
        Some("1"),
        "the COMMIT a client sent before it left was not carried out \
         (PostgreSQL carries out what it received from a client that vanished)"
    );

    // The backend was not left broken: the next client works.
    let (mut next, _) = pooled(p);
    let r = try_query(&mut next, "SELECT 'next client'", WAIT)
        .unwrap_or_else(|e| panic!("the next client's query: {e}"));
    assert!(r.error.is_none(), "next client: {:?}", r.error);
    assert_eq!(r.scalar().as_deref(), Some("next client"));
}

/// Waits until the row with `id` is visible, or backend `pid` is done with
/// its COMMIT (idle after it, or gone) so that it never will be.
fn wait_commit_done(admin: &mut RawConn, table: &str, pid: i32, id: i32) {
    let sql = format!(
        "SELECT (SELECT count(*) FROM {table} WHERE id = {id}) > 0 \
         OR NOT coalesce((SELECT state = 'active' OR query <> 'COMMIT' \
                          FROM pg_stat_activity WHERE pid = {pid}), false)"
    );
    wait_or(
        &format!("backend {pid} never finished the COMMIT"),
        WAIT,
        || scalar(admin, &sql).as_deref() == Some("t"),
    );
}

#[test]
fn defect_1_commit_of_a_client_that_left_is_carried_out_session() {
    let p = session_pooler(1);
    commit_survives_client_leaving(&p, "d1_commit_session");
}

#[test]
fn defect_1_commit_of_a_client_that_left_is_carried_out_transaction() {
    let p = txn_pooler(1);
    commit_survives_client_leaving(&p, "d1_commit_txn");
}

// ---------------------------------------------------------------------------
// 2. A late cancel reaches the next client.

/// A TCP proxy to PostgreSQL's port that forwards every connection at once,
/// except that it holds a connection whose first packet is a CancelRequest
/// for `cancel_delay` before passing it on: a slow cancel, deterministically.
struct CancelDelayProxy {
    port: u16,
    stop: Arc<AtomicBool>,
    /// CancelRequests received (from the pooler).
    cancels_received: Arc<AtomicUsize>,
    /// CancelRequests passed to PostgreSQL and closed by it.
    cancels_delivered: Arc<AtomicUsize>,
    acceptor: Option<JoinHandle<()>>,
}

impl CancelDelayProxy {
    fn start(target_port: u16, cancel_delay: Duration) -> CancelDelayProxy {
        let port = free_port();
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind proxy port");
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicUsize::new(0));
        let delivered = Arc::new(AtomicUsize::new(0));
        let acceptor = std::thread::spawn({
            let stop = stop.clone();
            let received = received.clone();
            let delivered = delivered.clone();
            move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let received = received.clone();
                    let delivered = delivered.clone();
                    std::thread::spawn(move || {
                        proxy_one(conn, target_port, cancel_delay, &received, &delivered)
                    });
                }
            }
        });
        CancelDelayProxy {
            port,
            stop,
            cancels_received: received,
            cancels_delivered: delivered,
            acceptor: Some(acceptor),
        }
    }

    fn received(&self) -> usize {
        self.cancels_received.load(Ordering::SeqCst)
    }

    fn delivered(&self) -> usize {
        self.cancels_delivered.load(Ordering::SeqCst)
    }
}

impl Drop for CancelDelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the acceptor so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

fn proxy_one(
    mut client: TcpStream,
    target_port: u16,
    cancel_delay: Duration,
    received: &AtomicUsize,
    delivered: &AtomicUsize,
) {
    let _ = client.set_nodelay(true);
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    let mut first = vec![0u8; 8];
    if client.read_exact(&mut first).is_err() {
        return;
    }
    let len = u32::from_be_bytes(first[0..4].try_into().unwrap());
    let code = u32::from_be_bytes(first[4..8].try_into().unwrap());
    let cancel = len == 16 && code == CANCEL_REQUEST_CODE;
    if cancel {
        let mut key = [0u8; 8];
        if client.read_exact(&mut key).is_err() {
            return;
        }
        first.extend_from_slice(&key);
        received.fetch_add(1, Ordering::SeqCst);
        // The slow link: these bytes are on their way and arrive late,
        // whatever the sender does meanwhile.
        std::thread::sleep(cancel_delay);
    }
    let _ = client.set_read_timeout(None);
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target_port)) else {
        return;
    };
    let _ = server.set_nodelay(true);
    if server.write_all(&first).is_err() {
        return;
    }
    let (Ok(mut client_r), Ok(mut server_w)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_r, &mut server_w);
        let _ = server_w.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Both);
    if cancel {
        delivered.fetch_add(1, Ordering::SeqCst);
    }
    let _ = server.shutdown(Shutdown::Both);
    let _ = up.join();
}

fn late_cancel_spares_the_next_client(mode: &str, delay: Duration) {
    let pg = PgCluster::shared();
    let proxy = CancelDelayProxy::start(pg.port(), delay);
    let db = DbEntry::new(TEST_DB, Backend::Tcp)
        .pool_size(1)
        .conninfo_extra(&format!("port={}", proxy.port));
    let p = Pooler::start(
        pg,
        PoolerOpts::default()
            .mode(mode)
            .pool_size(1)
            .databases(vec![db]),
    );
    let ep = p.endpoint(Transport::Unix);

    // A: a short query, answered; in transaction mode inside a transaction,
    // so that A holds the backend when its cancel arrives.
    let (mut a, sa) = pooled(&p);
    let key = sa.key.expect("BackendKeyData");
    if mode == "transaction" {
        q_ok(&mut a, "BEGIN");
    }
    let r = q_ok(&mut a, "SELECT 'a done'");
    assert_eq!(r.scalar().as_deref(), Some("a done"));
    let a_pid = pg_backend_pid(&mut a);

    // A's cancel, while A holds the backend: the pooler forwards it (the
    // proxy has it) before A says Terminate.
    let mut cancel = RawConn::connect(&ep);
    cancel.send(&cancel_packet(key.0, key.1)).unwrap();
    wait_or(
        "the pooler never forwarded A's cancel while A held the backend",
        WAIT,
        || proxy.received() >= 1,
    );
    a.terminate();
    let a_end = a.read_until_close(WAIT);
    assert_eq!(
        a_end.last(),
        Some(&Reply::Closed),
        "A after Terminate: {a_end:?}"
    );

    // B on the one backend, with a query longer than the cancel's delay:
    // if B got the backend before the cancel landed, the cancel hits it.
    let sleep = delay.as_secs_f64() + 1.0;
    let (mut b, _) = pooled(&p);
    let started = Instant::now();
    let rb = try_query(
        &mut b,
        &format!("SELECT pg_sleep({sleep}), pg_backend_pid()"),
        delay * 3 + WAIT,
    )
    .unwrap_or_else(|e| panic!("B's query: {e}"));
    if let Some(e) = &rb.error {
        panic!(
            "B's query failed with {} after {:?}: A's cancel (sent to PostgreSQL {delay:?} late) \
             reached B, which had been given A's backend {a_pid} before that cancel was delivered",
            short_error(e),
            started.elapsed()
        );
    }
    // The cancel did go through in the end (else the test proved nothing).
    wait_or(
        "the delayed cancel was never delivered to PostgreSQL",
        delay + WAIT,
        || proxy.delivered() >= 1,
    );
    drop(cancel);
    let r = q_ok(&mut b, "SELECT 'b still fine'");
    assert_eq!(r.scalar().as_deref(), Some("b still fine"));
}

#[test]
fn defect_2_late_cancel_does_not_reach_the_next_client_session() {
    late_cancel_spares_the_next_client("session", Duration::from_secs(2));
}

#[test]
fn defect_2_late_cancel_does_not_reach_the_next_client_transaction() {
    // Longer than the 5 s the transaction relay waits for a cancel today.
    late_cancel_spares_the_next_client("transaction", Duration::from_secs(6));
}

// ---------------------------------------------------------------------------
// 3. The unnamed statement and portal outlive the hand-over (transaction mode).

/// B's view of the unnamed statement and portal A left behind, compared with
/// a fresh direct connection's.
fn unnamed_left_behind(a: &mut RawConn, b: &mut RawConn) {
    let pg = PgCluster::shared();
    let (mut fresh, _) = direct(pg);

    // A: Parse(unnamed) + Sync; then it idles (holding no backend).
    a.send(&[ext::parse("", "SELECT 'secret of A'"), ext::sync()].concat())
        .unwrap();
    let ra = read_to_ready(a, WAIT);
    assert_eq!(norm(&ra), ["1 \"\"", "Z \"I\""], "A's Parse");

    let probes: [(&str, Vec<u8>); 3] = [
        (
            "Bind(unnamed stmt) + Execute",
            [ext::bind("", "", &[]), ext::execute(""), ext::sync()].concat(),
        ),
        (
            "Describe statement ''",
            [ext::describe(b'S', ""), ext::sync()].concat(),
        ),
        (
            "Describe portal ''",
            [ext::describe(b'P', ""), ext::sync()].concat(),
        ),
    ];
    let mut wrong = Vec::new();
    for (what, bytes) in probes {
        fresh.send(&bytes).unwrap();
        let want = norm(&read_to_ready(&mut fresh, WAIT));
        b.send(&bytes).unwrap();
        let got = norm(&read_to_ready(b, WAIT));
        if got != want {
            wrong.push(format!(
                "{what}:\n    B got   {got:?}\n    direct  {want:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "after A's transaction B must see what a fresh session sees, not what A left \
         on the backend:\n  {}",
        wrong.join("\n  ")
    );
    // A itself still works.
    let r = q_ok(a, "SELECT 'a again'");
    assert_eq!(r.scalar().as_deref(), Some("a again"));
}

#[test]
fn defect_3_unnamed_statement_is_not_handed_over_same_user_transaction() {
    let p = txn_pooler(1);
    let (mut a, _) = pooled(&p);
    let (mut b, _) = pooled(&p);
    unnamed_left_behind(&mut a, &mut b);
}

#[test]
fn defect_3_unnamed_statement_is_not_handed_over_across_users_transaction() {
    // All clients of `shared` use one backend role, whoever they log in as.
    let shared = DbEntry::new("d3_shared", Backend::Unix).user(SCRAM_USER.0, None);
    let p = Pooler::start(
        PgCluster::shared(),
        PoolerOpts::transaction(1).databases(vec![shared]),
    );
    let ep = p.endpoint(Transport::Unix);
    let (mut a, _) = login_as(&ep, SCRAM_USER.0, Some(SCRAM_USER.1), "d3_shared");
    let (mut b, _) = login_as(&ep, MD5_USER.0, Some(MD5_USER.1), "d3_shared");
    // Both on the one backend.
    let pa = pg_backend_pid(&mut a);
    let pb = pg_backend_pid(&mut b);
    assert_eq!(pa, pb, "pool_size 1: A and B share the backend");
    unnamed_left_behind(&mut a, &mut b);
}

// ---------------------------------------------------------------------------
// 4. COPY through the extended protocol desynchronises the reply accounting.

async fn tp_copy_in(client: &tokio_postgres::Client, table: &str, rows: &str) -> u64 {
    let sink = within(
        "copy_in",
        client.copy_in::<_, Bytes>(&format!("COPY {table} FROM STDIN")),
    )
    .await
    .unwrap_or_else(|e| panic!("copy_in: {}", describe_error(&e)));
    tokio::pin!(sink);
    within("CopyData", sink.send(Bytes::from(rows.to_string())))
        .await
        .unwrap_or_else(|e| panic!("CopyData: {}", describe_error(&e)));
    within("CopyDone", sink.finish())
        .await
        .unwrap_or_else(|e| panic!("CopyDone: {}", describe_error(&e)))
}

async fn tp_pid(client: &tokio_postgres::Client) -> i32 {
    within(
        "pg_backend_pid()",
        client.query_one("SELECT pg_backend_pid()", &[]),
    )
    .await
    .unwrap_or_else(|e| panic!("pg_backend_pid(): {}", describe_error(&e)))
    .get(0)
}

async fn copy_in_then_query(p: &Pooler, table: &str) -> i32 {
    let client = connect_ok(&scram_unix_conninfo(p)).await;
    assert_eq!(tp_copy_in(&client, table, "1\n2\n3\n").await, 3);
    let n = within(
        "the query after COPY",
        client.query_one(&format!("SELECT count(*) FROM {table}"), &[]),
    )
    .await
    .unwrap_or_else(|e| panic!("the query after copy_in: {}", describe_error(&e)));
    assert_eq!(n.get::<_, i64>(0), 3);
    let again = within("a second query", client.simple_query("SELECT 'again'"))
        .await
        .unwrap_or_else(|e| panic!("the second query after copy_in: {}", describe_error(&e)));
    assert!(!again.is_empty());
    tp_pid(&client).await
}

#[tokio::test(flavor = "multi_thread")]
async fn defect_4_copy_in_then_query_transaction() {
    let pg = PgCluster::shared();
    fresh_table(pg, "d4_copy_txn", "");
    let p = txn_pooler(1);
    copy_in_then_query(&p, "d4_copy_txn").await;
    // And the backend serves the next client.
    let other = connect_ok(&scram_unix_conninfo(&p)).await;
    let n: i64 = within(
        "next client",
        other.query_one("SELECT count(*) FROM d4_copy_txn", &[]),
    )
    .await
    .unwrap_or_else(|e| panic!("next client: {}", describe_error(&e)))
    .get(0);
    assert_eq!(n, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn defect_4_copy_in_then_query_session() {
    let pg = PgCluster::shared();
    fresh_table(pg, "d4_copy_session", "");
    let p = session_pooler(1);
    let first = copy_in_then_query(&p, "d4_copy_session").await;
    // The client left between queries: its backend is as good as any and
    // goes back to the pool (the next client, pool_size 1, gets it).
    let next = connect_ok(&scram_unix_conninfo(&p)).await;
    let second = tp_pid(&next).await;
    assert_eq!(
        second, first,
        "the backend {first} of a client that used copy_in and left between queries was \
         closed instead of reused (the next client got a new backend {second})"
    );
}

/// libpq's PQexecParams("COPY ... FROM STDIN"): P/B/D/E/S, then (after
/// CopyInResponse) CopyData, CopyDone and a second Sync; then a query.
fn libpq_copy_exchange(c: &mut RawConn, table: &str) -> Vec<String> {
    let mut all = Vec::new();
    c.send(
        &[
            ext::parse("", &format!("COPY {table} FROM STDIN")),
            ext::bind("", "", &[]),
            ext::describe(b'P', ""),
            ext::execute(""),
            ext::sync(),
        ]
        .concat(),
    )
    .unwrap();
    let head = read_to_tag(c, b'G', WAIT);
    all.extend(norm(&head));
    if !matches!(head.last(), Some(Reply::Msg(b'G', _))) {
        return all;
    }
    c.send(
        &[
            common::wire::message(b'd', b"7\n8\n"),
            common::wire::message(b'c', &[]),
            ext::sync(),
        ]
        .concat(),
    )
    .unwrap();
    all.push("-- after CopyData, CopyDone, Sync".into());
    all.extend(norm(&read_to_ready(c, WAIT)));
    c.send(&ext::query(&format!("SELECT count(*) FROM {table}")))
        .unwrap();
    all.push("-- after a simple query".into());
    all.extend(norm(&read_to_ready(c, WAIT)));
    all
}

#[test]
fn defect_4_libpq_copy_in_byte_sequence_transaction() {
    let pg = PgCluster::shared();
    let (mut d, _) = direct(pg);
    fresh_table(pg, "d4_libpq", "");
    let want = libpq_copy_exchange(&mut d, "d4_libpq");
    fresh_table(pg, "d4_libpq", "");
    let p = txn_pooler(1);
    let (mut c, _) = pooled(&p);
    let got = libpq_copy_exchange(&mut c, "d4_libpq");
    assert_eq!(
        got, want,
        "libpq's COPY FROM STDIN through the extended protocol, then a query: \
         the pooler's answers differ from PostgreSQL's"
    );
    // The same once more on the same connection.
    fresh_table(pg, "d4_libpq", "");
    let got = libpq_copy_exchange(&mut c, "d4_libpq");
    assert_eq!(got, want, "the second COPY on the same connection");
}

#[tokio::test(flavor = "multi_thread")]
async fn defect_4_copy_out_piped_into_copy_in_transaction() {
    const ROWS: i64 = 5000;
    let pg = PgCluster::shared();
    fresh_table(
        pg,
        "d4_pipe_src",
        &format!("INSERT INTO d4_pipe_src SELECT generate_series(1, {ROWS});"),
    );
    fresh_table(pg, "d4_pipe_dst", "");
    let p = txn_pooler(2);
    let reader = connect_ok(&scram_unix_conninfo(&p)).await;
    let writer = connect_ok(&scram_unix_conninfo(&p)).await;
    let piped = async {
        let stream = reader
            .copy_out("COPY d4_pipe_src TO STDOUT")
            .await
            .map_err(|e| format!("copy_out: {}", describe_error(&e)))?;
        let sink = writer
            .copy_in::<_, Bytes>("COPY d4_pipe_dst FROM STDIN")
            .await
            .map_err(|e| format!("copy_in: {}", describe_error(&e)))?;
        tokio::pin!(stream);
        tokio::pin!(sink);
        while let Some(block) = stream.next().await {
            let block = block.map_err(|e| format!("copy_out block: {}", describe_error(&e)))?;
            sink.send(block)
                .await
                .map_err(|e| format!("copy_in block: {}", describe_error(&e)))?;
        }
        sink.finish()
            .await
            .map_err(|e| format!("copy_in finish: {}", describe_error(&e)))
    };
    let copied = tokio::time::timeout(WAIT, piped)
        .await
        .unwrap_or_else(|_| panic!("piping COPY TO STDOUT into COPY FROM STDIN hung ({WAIT:?})"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(copied, ROWS as u64);
    for (who, c) in [("reader", &reader), ("writer", &writer)] {
        let n: i64 = within(
            "count after the pipe",
            c.query_one("SELECT count(*) FROM d4_pipe_dst", &[]),
        )
        .await
        .unwrap_or_else(|e| panic!("{who} after the pipe: {}", describe_error(&e)))
        .get(0);
        assert_eq!(n, ROWS, "{who}");
    }
}

// ---------------------------------------------------------------------------
// 5. No inspection limit may end a session.

const HUGE_ERROR: &str = "SELECT repeat('x', 1100000)::int";
const HUGE_NOTICE: &str = "DO $$BEGIN RAISE NOTICE '%', repeat('x', 1100000); END$$";

/// Runs `sql` directly and through the pooler; the answers (error or
/// notices) must be the same and the pooled connection must go on working.
fn huge_message_like_direct(p: &Pooler, sql: &str) {
    let pg = PgCluster::shared();
    let (mut d, _) = direct(pg);
    let want = try_query(&mut d, sql, WAIT).unwrap_or_else(|e| panic!("direct: {e}"));
    let (mut c, _) = pooled(p);
    let got = try_query(&mut c, sql, WAIT).unwrap_or_else(|e| {
        panic!("through the pooler, a message over 1 MiB ended the session: {e}")
    });
    assert!(
        want.error.is_some() || !want.notices.is_empty(),
        "direct: neither error nor notice"
    );
    let full = |e: &ErrorFields| (e.severity.clone(), e.code.clone(), e.message.clone());
    let same = want.error.as_ref().map(full) == got.error.as_ref().map(full)
        && want.notices.iter().map(full).collect::<Vec<_>>()
            == got.notices.iter().map(full).collect::<Vec<_>>()
        && want.status == got.status;
    assert!(
        same,
        "through the pooler: error {:?}, notices {:?}, status {:?}; directly: error {:?}, \
         notices {:?}, status {:?}",
        got.error.as_ref().map(short_error),
        got.notices.iter().map(short_error).collect::<Vec<_>>(),
        got.status as char,
        want.error.as_ref().map(short_error),
        want.notices.iter().map(short_error).collect::<Vec<_>>(),
        want.status as char,
    );
    let r = try_query(&mut c, "SELECT 'next query'", WAIT)
        .unwrap_or_else(|e| panic!("the next query on the same connection: {e}"));
    assert_eq!(r.scalar().as_deref(), Some("next query"));
}

#[test]
fn defect_5_error_over_1mib_session() {
    huge_message_like_direct(&session_pooler(1), HUGE_ERROR);
}

#[test]
fn defect_5_error_over_1mib_transaction() {
    huge_message_like_direct(&txn_pooler(1), HUGE_ERROR);
}

#[test]
fn defect_5_notice_over_1mib_session() {
    huge_message_like_direct(&session_pooler(1), HUGE_NOTICE);
}

#[test]
fn defect_5_notice_over_1mib_transaction() {
    huge_message_like_direct(&txn_pooler(1), HUGE_NOTICE);
}

/// Where the big Bind is cut: the brief's 3 + 7 bytes, and cuts that end a
/// read inside the header or the portal/statement names (an unnamed portal
/// and statement are the bytes at offsets 5 and 6), which is where the
/// pooler looks into a Bind too big to buffer whole.
const BIND_CUTS: [&[usize]; 4] = [&[3, 10], &[3, 6], &[5], &[6]];

/// Parse(unnamed), then a Bind of ~1.5 MiB written in pieces cut at `cuts`,
/// Execute, Sync, and a query after it; the replies.
fn big_bind_in_pieces(c: &mut RawConn, cuts: &[usize]) -> Vec<String> {
    let value: String = "0123456789abcdef".repeat(1_572_864 / 16);
    let bind = ext::bind("", "", &[Some(&value)]);
    assert!(bind.len() > 1 << 20);
    // Send errors are left to show as the close the replies end with.
    let _ = c.send(&ext::parse("", "SELECT length($1::text), md5($1::text)"));
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bind.len())) {
        if at > 0 {
            // A slow link: the pieces arrive in separate reads.
            std::thread::sleep(Duration::from_millis(150));
        }
        let _ = c.send(&bind[at..cut]);
        at = cut;
    }
    let _ = c.send(&[ext::execute(""), ext::sync()].concat());
    let mut out = norm(&read_to_ready(c, WAIT));
    out.push("-- then".into());
    let _ = c.send(&ext::query("SELECT 'after the big Bind'"));
    out.extend(norm(&read_to_ready(c, WAIT)));
    out
}

#[test]
fn defect_5_bind_over_1mib_in_pieces_transaction() {
    let pg = PgCluster::shared();
    let p = txn_pooler(1);
    let (mut d, _) = direct(pg);
    let (mut c, _) = pooled(&p);
    for cuts in BIND_CUTS {
        let want = big_bind_in_pieces(&mut d, cuts);
        let got = big_bind_in_pieces(&mut c, cuts);
        assert_eq!(
            got, want,
            "a 1.5 MiB Bind that arrives in pieces cut at {cuts:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// 6. The pooler's own errors keep the right text.

/// Prepares s1 and s2, then sends two batches in one write: an error on the
/// server with a duplicate Parse of s1 behind it, then a duplicate Parse of
/// s2. The replies to both batches.
fn pipelined_duplicates(c: &mut RawConn) -> Vec<String> {
    for (name, sql) in [("s1", "SELECT 1"), ("s2", "SELECT 2")] {
        c.send(&[ext::parse(name, sql), ext::sync()].concat())
            .unwrap();
        let r = norm(&read_to_ready(c, WAIT));
        assert_eq!(r, ["1 \"\"", "Z \"I\""], "Parse {name}");
    }
    c.send(
        &[
            // Batch 1: the server fails; everything up to Sync is skipped.
            ext::parse("", "SELECT 1/0"),
            ext::bind("", "", &[]),
            ext::execute(""),
            ext::parse("s1", "SELECT 1"),
            ext::sync(),
            // Batch 2: a duplicate s2.
            ext::parse("s2", "SELECT 2"),
            ext::sync(),
        ]
        .concat(),
    )
    .unwrap();
    let mut out = vec!["-- batch 1".to_string()];
    out.extend(norm(&read_to_ready(c, WAIT)));
    out.push("-- batch 2".into());
    out.extend(norm(&read_to_ready(c, WAIT)));
    // The statements still work.
    c.send(
        &[
            ext::bind("", "s1", &[]),
            ext::execute(""),
            ext::bind("", "s2", &[]),
            ext::execute(""),
            ext::sync(),
        ]
        .concat(),
    )
    .unwrap();
    out.push("-- s1 and s2".into());
    out.extend(norm(&read_to_ready(c, WAIT)));
    out
}

#[test]
fn defect_6_duplicate_statement_error_names_the_right_statement_transaction() {
    let pg = PgCluster::shared();
    let (mut d, _) = direct(pg);
    let want = pipelined_duplicates(&mut d);
    assert!(
        want.iter()
            .any(|l| l.contains("42P05") && l.contains("\"s2\"")),
        "direct: {want:#?}"
    );
    let p = txn_pooler(1);
    let (mut c, _) = pooled(&p);
    let got = pipelined_duplicates(&mut c);
    assert_eq!(
        got, want,
        "pipelined batches with a duplicate Parse after an error"
    );
}

// ---------------------------------------------------------------------------
// 7. Garbage after login closes the connection.

/// Sends `bytes` after login and returns (severity, SQLSTATE) of the error
/// that came back and whether the connection then closed, or the replies.
fn garbage_answer(c: &mut RawConn, bytes: &[u8]) -> Result<(String, String), Vec<String>> {
    c.send(bytes).unwrap();
    let replies = c.read_until_close(Duration::from_secs(5));
    match replies.as_slice() {
        [Reply::Msg(b'E', body), Reply::Closed] => {
            let e = ErrorFields::parse(body);
            Ok((e.severity, e.code))
        }
        other => Err(other.iter().map(Reply::summary).collect()),
    }
}

fn garbage_after_login_closes(mode: &str) {
    let pg = PgCluster::shared();
    let p = pooler_in(mode, 1);
    let startup = startup_packet(
        PROTOCOL_3_0,
        &[("user", SCRAM_USER.0), ("database", TEST_DB)],
    );
    let cases: [(&str, &[u8]); 2] = [("a StartupMessage", &startup), ("a lone 'z' byte", b"z")];
    let mut wrong = Vec::new();
    for (what, bytes) in cases {
        let (mut d, _) = direct(pg);
        let want = garbage_answer(&mut d, bytes)
            .unwrap_or_else(|r| panic!("direct PostgreSQL after {what}: {r:?}"));
        assert_eq!(want, ("FATAL".to_string(), "08P01".to_string()));
        let (mut c, _) = pooled(&p);
        let got = garbage_answer(&mut c, bytes);
        if got != Ok(want.clone()) {
            wrong.push(format!("{what}: got {got:?}, directly {want:?} then EOF"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{mode} mode, garbage after login (PostgreSQL answers FATAL 08P01 and closes):\n  {}",
        wrong.join("\n  ")
    );
    // The pooler and its backend are fine for the next client.
    let (mut c, _) = pooled(&p);
    let r = q_ok(&mut c, "SELECT 'still serving'");
    assert_eq!(r.scalar().as_deref(), Some("still serving"));
}

#[test]
fn defect_7_garbage_after_login_closes_session() {
    garbage_after_login_closes("session");
}

#[test]
fn defect_7_garbage_after_login_closes_transaction() {
    garbage_after_login_closes("transaction");
}

#[test]
fn defect_7_garbage_after_login_closes_statement() {
    garbage_after_login_closes("statement");
}

// ---------------------------------------------------------------------------
// 8. Session mode shows the real backend.

#[test]
fn defect_8_backend_key_data_carries_the_backend_pid_session() {
    let pg = PgCluster::shared();
    let p = session_pooler(2);
    let (mut c, s) = pooled(&p);
    let (pid, _) = s.key.expect("BackendKeyData");
    let backend = pg_backend_pid(&mut c);
    assert_eq!(
        pid, backend,
        "session mode: BackendKeyData must carry the backend's process id"
    );
    // pg_stat_activity finds the client's session under that pid.
    let mut admin = superuser(pg);
    let row = q_ok(
        &mut admin,
        &format!("SELECT usename, datname FROM pg_stat_activity WHERE pid = {pid}"),
    );
    assert_eq!(
        row.rows,
        vec![vec![
            Some(SCRAM_USER.0.to_string()),
            Some(TEST_DB.to_string())
        ]],
        "pg_stat_activity row for the pid the client was given"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn defect_8_notification_sender_is_the_reported_pid_session() {
    let p = session_pooler(2);
    // tokio-postgres: the Notification of its own NOTIFY names its backend.
    let (client, mut messages) = connect_with_messages(&scram_unix_conninfo(&p))
        .await
        .unwrap_or_else(|e| panic!("connect: {}", describe_error(&e)));
    let pid = tp_pid(&client).await;
    within(
        "LISTEN/NOTIFY",
        client.batch_execute("LISTEN d8_chan; NOTIFY d8_chan, 'hello'"),
    )
    .await
    .unwrap_or_else(|e| panic!("LISTEN/NOTIFY: {}", describe_error(&e)));
    let n = loop {
        match within("the notification", messages.recv()).await {
            Some(AsyncMessage::Notification(n)) => break n,
            Some(_) => continue,
            None => panic!("connection ended before the notification"),
        }
    };
    assert_eq!((n.channel(), n.payload()), ("d8_chan", "hello"));
    assert_eq!(
        n.process_id(),
        pid,
        "Notification sender vs pg_backend_pid()"
    );

    // libpq-style: a client tells its own notifications by comparing the
    // sender's pid with the one from BackendKeyData (PQbackendPID).
    let key_pid = tokio::task::spawn_blocking({
        let ep = p.endpoint(Transport::Unix);
        move || {
            let (mut c, s) = login_as(&ep, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
            q_ok(&mut c, "LISTEN d8_raw");
            c.send(&ext::query("NOTIFY d8_raw, 'self'")).unwrap();
            let replies = read_to_ready(&mut c, WAIT);
            let sender = replies.iter().find_map(|r| match r {
                Reply::Msg(b'A', body) => Some(i32::from_be_bytes(body[..4].try_into().unwrap())),
                _ => None,
            });
            (s.key.expect("BackendKeyData").0, sender, norm(&replies))
        }
    })
    .await
    .unwrap();
    let (key, sender, replies) = key_pid;
    let sender = sender.unwrap_or_else(|| panic!("no NotificationResponse: {replies:?}"));
    assert_eq!(
        sender, key,
        "the sender pid of a client's own notification must be the pid its BackendKeyData gave"
    );
}

#[test]
fn defect_8_pg_terminate_backend_of_the_reported_pid_session() {
    let pg = PgCluster::shared();
    let p = session_pooler(2);
    let (mut c, s) = pooled(&p);
    let (pid, _) = s.key.expect("BackendKeyData");
    q_ok(&mut c, "SELECT 1");
    let mut admin = superuser(pg);
    let r = q_ok(&mut admin, &format!("SELECT pg_terminate_backend({pid})"));
    assert_eq!(
        (
            r.scalar().as_deref(),
            r.notices.iter().map(short_error).collect::<Vec<_>>()
        ),
        (Some("t"), vec![]),
        "pg_terminate_backend(the pid the client was given)"
    );
    // The client hears PostgreSQL's own FATAL, then the close.
    let replies = c.read_until_close(WAIT);
    let first = replies.first().and_then(Reply::error);
    assert_eq!(
        first
            .as_ref()
            .map(|e| (e.severity.as_str(), e.code.as_str())),
        Some(("FATAL", "57P01")),
        "after pg_terminate_backend: {:?}",
        replies.iter().map(Reply::summary).collect::<Vec<_>>()
    );
    assert_eq!(replies.last(), Some(&Reply::Closed));
}

/// A cancel with the key from BackendKeyData stops the client's pg_sleep.
fn cancel_with_reported_key(p: &Pooler, key: (i32, i32), c: &mut RawConn) {
    let pg = PgCluster::shared();
    let mut admin = superuser(pg);
    let marker = format!("d8_cancel_{}", key.1);
    let sql = format!("SELECT pg_sleep(30) /* {marker} */");
    c.send(&ext::query(&sql)).unwrap();
    wait_or(&format!("{sql} never started"), WAIT, || {
        scalar(
            &mut admin,
            &format!(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
                 AND query LIKE '%{marker}%' AND pid <> pg_backend_pid()"
            ),
        )
        .as_deref()
            == Some("1")
    });
    let mut cancel = RawConn::connect(&p.endpoint(Transport::Unix));
    cancel.send(&cancel_packet(key.0, key.1)).unwrap();
    let r = read_result(c, WAIT).unwrap_or_else(|e| panic!("the cancelled query: {e}"));
    assert_eq!(
        r.error.as_ref().map(|e| e.code.as_str()),
        Some("57014"),
        "cancel with the key the client saw"
    );
    assert_eq!(cancel.read_until_close(WAIT).last(), Some(&Reply::Closed));
    let r = q_ok(c, "SELECT 'after cancel'");
    assert_eq!(r.scalar().as_deref(), Some("after cancel"));
}

#[test]
fn defect_8_cancel_with_the_reported_key_session() {
    let p = session_pooler(2);
    let (mut c, s) = pooled(&p);
    let key = s.key.expect("BackendKeyData");
    assert_eq!(
        key.0,
        pg_backend_pid(&mut c),
        "session mode: BackendKeyData must carry the backend's process id"
    );
    cancel_with_reported_key(&p, key, &mut c);

    // Transaction mode keeps its own keys; a cancel still works.
    let t = txn_pooler(1);
    let (mut c, s) = pooled(&t);
    cancel_with_reported_key(&t, s.key.expect("BackendKeyData"), &mut c);
}
