//! Transaction pooling when things go wrong: a backend killed under a
//! client, PostgreSQL restarting, clients vanishing mid-batch, cancel
//! requests, and clients idling inside a transaction.

mod common;

use common::scram_unix_conninfo;

use std::time::{Duration, Instant};

use common::ext::{self, read_messages};
use common::wait::{wait_active, wait_clients_waiting, wait_show};
use common::wire::send_cancel;
use common::{
    backend_pid, connect_ok, PgCluster, Pooler, PoolerOpts, RawConn, Reply, StopMode, Transport,
    SCRAM_USER, TEST_DB,
};

/// Generous bound for anything that must happen "promptly" on a loaded machine.
const WAIT: Duration = Duration::from_secs(20);

fn login(p: &Pooler) -> (RawConn, (i32, i32)) {
    let mut c = RawConn::connect(&p.endpoint(Transport::Unix));
    let s = c
        .login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap_or_else(|e| panic!("login through the pooler: {e:?}"));
    (c, s.key.expect("BackendKeyData"))
}

fn fresh_table(pg: &PgCluster, name: &str) {
    pg.psql_ok(
        TEST_DB,
        &format!(
            "DROP TABLE IF EXISTS {name}; CREATE TABLE {name}(tag text); \
             GRANT ALL ON {name} TO scram_user"
        ),
    );
}

/// True when the error is what a client should see when its backend died:
/// 57P01 (admin shutdown / terminated), 08006 (connection failure) or 57P02/57P03
/// (crash / cannot connect now), or the connection simply closed.
fn is_backend_gone(e: &tokio_postgres::Error) -> bool {
    match common::clients::sqlstate(e) {
        Some(code) => {
            ["57P01", "57P02", "57P03", "08006", "08003", "08000"].contains(&code.as_str())
        }
        None => e.is_closed() || format!("{e:?}").contains("closed"),
    }
}

// ---------------------------------------------------------------------------
// A backend killed mid-transaction

#[tokio::test(flavor = "multi_thread")]
async fn a_backend_terminated_mid_transaction_fails_its_client_and_nothing_runs_elsewhere() {
    let pg = PgCluster::shared();
    fresh_table(pg, "fault_term");
    let p = Pooler::start(pg, PoolerOpts::transaction(2));
    let ci = scram_unix_conninfo(&p);
    let admin = pg.admin_client().await;

    // tokio-postgres: a statement after the kill fails promptly, so does COMMIT.
    let a = connect_ok(&ci).await;
    a.batch_execute("BEGIN; INSERT INTO fault_term VALUES ('half')")
        .await
        .unwrap();
    let pid: i32 = backend_pid(&a).await;
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    let started = Instant::now();
    let err = tokio::time::timeout(
        WAIT,
        a.batch_execute("INSERT INTO fault_term VALUES ('after')"),
    )
    .await
    .expect("the client hears of its backend's death promptly")
    .expect_err("a statement on a terminated backend");
    assert!(is_backend_gone(&err), "{err:?}");
    assert!(started.elapsed() < WAIT);
    let commit = tokio::time::timeout(WAIT, a.batch_execute("COMMIT"))
        .await
        .unwrap();
    assert!(commit.is_err(), "COMMIT after the backend died must fail");

    // Raw client: it sends more and COMMIT without waiting for anything;
    // none of it may run anywhere.
    let ep = p.endpoint(Transport::Unix);
    let pid = tokio::task::spawn_blocking({
        let ep = ep.clone();
        move || {
            let mut c = RawConn::connect(&ep);
            c.login(
                &[("user", SCRAM_USER.0), ("database", TEST_DB)],
                Some(SCRAM_USER.1),
            )
            .unwrap();
            let r = c.query("BEGIN; INSERT INTO fault_term VALUES ('raw half')");
            assert_eq!((r.error.as_ref(), r.status), (None, b'T'));
            let pid = c.query("SELECT pg_backend_pid()").scalar().unwrap();
            (c, pid)
        }
    })
    .await
    .unwrap();
    let (mut c, pid) = pid;
    admin
        .execute("SELECT pg_terminate_backend($1::text::int)", &[&pid])
        .await
        .unwrap();
    let replies = tokio::task::spawn_blocking(move || {
        let _ = c.send(&ext::query("INSERT INTO fault_term VALUES ('raw after')"));
        let _ = c.send(&ext::query("COMMIT"));
        let _ = c.send(&ext::query(
            "INSERT INTO fault_term VALUES ('raw autocommit')",
        ));
        c.read_until_close(WAIT)
    })
    .await
    .unwrap();
    assert_eq!(
        replies.last(),
        Some(&Reply::Closed),
        "the client whose backend died is closed: {replies:?}"
    );
    let errors: Vec<String> = replies
        .iter()
        .filter_map(Reply::error)
        .map(|e| e.code)
        .collect();
    assert!(
        errors
            .iter()
            .any(|c| ["57P01", "08006"].contains(&c.as_str())),
        "the client is told why: {replies:?}"
    );
    assert!(
        !replies.iter().any(|r| matches!(r, Reply::Msg(b'C', _))),
        "nothing the client sent after the kill completed: {replies:?}"
    );
    assert_eq!(
        pg.psql_ok(TEST_DB, "SELECT count(*) FROM fault_term"),
        "0",
        "no row of a transaction whose backend died"
    );

    // Next clients get live backends.
    for _ in 0..3 {
        let b = connect_ok(&ci).await;
        let v: i32 = tokio::time::timeout(WAIT, b.query_one("SELECT 1", &[]))
            .await
            .unwrap()
            .expect("a new client's first query after the kill")
            .get(0);
        assert_eq!(v, 1);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_backend_terminated_between_transactions_is_never_handed_out() {
    let pg = PgCluster::shared();
    let p = Pooler::start(pg, PoolerOpts::transaction(1));
    let ci = scram_unix_conninfo(&p);
    let admin = pg.admin_client().await;
    let a = connect_ok(&ci).await;
    for round in 0..6 {
        // Simple protocol: tokio-postgres closes an extended query's
        // statement in the background, and that exchange could be the one in
        // flight when the backend is killed (a legitimate error).
        let pid = backend_pid_simple(&a).await;
        admin
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .await
            .unwrap();
        // Wait until it is really gone, so its FATAL is on the socket.
        let gone = tokio::time::timeout(WAIT, async {
            loop {
                let n: i64 = admin
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                        &[&pid],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if n == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(gone.is_ok(), "backend {pid} did not exit");
        // The same client, holding no backend meanwhile, must not notice.
        let r = tokio::time::timeout(WAIT, a.query_one("SELECT pg_backend_pid()", &[]))
            .await
            .expect("served promptly");
        let new_pid: i32 = r
            .unwrap_or_else(|e| panic!("round {round}: first query after the kill: {e:?}"))
            .get(0);
        assert_ne!(new_pid, pid);
    }
}

// ---------------------------------------------------------------------------
// PostgreSQL restarting

#[tokio::test(flavor = "multi_thread")]
async fn postgresql_restarts_fast_and_immediate() {
    let pg = PgCluster::start();
    fresh_table(&pg, "fault_restart");
    let mut opts = PoolerOpts::transaction(2);
    opts.server_connect_timeout = "5s".into();
    let p = Pooler::start(&pg, opts);
    let ci = scram_unix_conninfo(&p);
    // Clients that stay connected across both restarts; they hold no
    // backend between transactions.
    let steady = connect_ok(&ci).await;
    for mode in [StopMode::Fast, StopMode::Immediate] {
        // Two backends open and idle in the pool.
        {
            let x = connect_ok(&ci).await;
            let y = connect_ok(&ci).await;
            x.batch_execute("BEGIN").await.unwrap();
            y.batch_execute("BEGIN").await.unwrap();
            x.batch_execute("COMMIT").await.unwrap();
            y.batch_execute("COMMIT").await.unwrap();
        }
        let v: i32 = steady.query_one("SELECT 1", &[]).await.unwrap().get(0);
        assert_eq!(v, 1);
        // In flight: one in a long query, one idle inside a transaction.
        let sleeper = connect_ok(&ci).await;
        let sleeping = tokio::spawn(async move {
            let r = sleeper.query_one("SELECT pg_sleep(60)", &[]).await;
            (sleeper, r.map(|_| ()))
        });
        let idle_tx = connect_ok(&ci).await;
        idle_tx
            .batch_execute("BEGIN; INSERT INTO fault_restart VALUES ('in flight')")
            .await
            .unwrap();
        wait_active(&pg, "SELECT pg_sleep(60)");

        pg.stop_server(mode);
        let (_sleeper, r) = tokio::time::timeout(WAIT, sleeping)
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: the running query never failed"))
            .unwrap();
        let err = r.expect_err("a query running when PostgreSQL stopped");
        assert!(is_backend_gone(&err), "{mode:?}: {err:?}");
        let err = tokio::time::timeout(WAIT, idle_tx.batch_execute("COMMIT"))
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: COMMIT hung"))
            .expect_err("COMMIT of a transaction whose server went away");
        assert!(
            is_backend_gone(&err) || common::db_err(&err).is_some(),
            "{mode:?}: {err:?}"
        );

        pg.start_server();
        let back = Instant::now();
        // A new client's first query succeeds: no dead backend is handed out.
        let c = tokio::time::timeout(WAIT, connect_ok(&ci))
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: login after the restart hung"));
        let v: i32 = tokio::time::timeout(WAIT, c.query_one("SELECT 2", &[]))
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: first query after the restart hung"))
            .unwrap_or_else(|e| panic!("{mode:?}: first query after the restart failed: {e:?}"))
            .get(0);
        assert_eq!(v, 2);
        let served_after = back.elapsed();
        assert!(
            served_after < Duration::from_secs(10),
            "{mode:?}: a new client waited {served_after:?} after PostgreSQL came back"
        );
        // Both pool slots work (a dead backend in either would fail here),
        // and so does the client that stayed connected throughout.
        let x = connect_ok(&ci).await;
        let y = connect_ok(&ci).await;
        for (n, cl) in [&x, &y].into_iter().enumerate() {
            tokio::time::timeout(WAIT, cl.batch_execute("BEGIN"))
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{mode:?}: client {n}'s BEGIN: {e:?}"));
        }
        for cl in [&x, &y] {
            cl.batch_execute("COMMIT").await.unwrap();
        }
        let v: i32 = tokio::time::timeout(WAIT, steady.query_one("SELECT 3", &[]))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{mode:?}: the steady client after the restart: {e:?}"))
            .get(0);
        assert_eq!(v, 3);
        assert_eq!(
            pg.psql_ok(TEST_DB, "SELECT count(*) FROM fault_restart"),
            "0",
            "{mode:?}: the transaction in flight was not committed"
        );
    }
}

// ---------------------------------------------------------------------------
// Clients vanishing mid-batch

/// What the pooler does with the bytes a vanishing client sent, that it
/// has done before the client goes.
#[derive(Clone, Copy)]
enum Then {
    /// Answered them (ParseComplete).
    Answered,
    /// Took the backend for them (SHOW POOLS: sv_active = 1).
    Lent,
    /// Nothing visible: an incomplete message waits in its buffer.
    Buffered,
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_gone_before_its_sync_leaves_no_backend_stuck() {
    let mut stuck = Vec::new();
    let cases: Vec<(&str, Vec<u8>, Then)> = vec![
        ("Parse, no Sync", ext::parse("x", "SELECT 1"), Then::Lent),
        (
            "Parse + Flush, answered, no Sync",
            [ext::parse("x", "SELECT 1"), ext::flush()].concat(),
            Then::Answered,
        ),
        (
            "Parse/Bind/Execute of a long query + Flush, no Sync",
            [
                ext::parse("", "SELECT pg_sleep(60)"),
                ext::bind_execute("", &[]),
                ext::flush(),
            ]
            .concat(),
            Then::Lent,
        ),
        (
            "half a Parse",
            ext::parse("x", "SELECT 'a long enough statement text'")[..20].to_vec(),
            Then::Buffered,
        ),
        (
            "BEGIN, then Parse + Flush, no Sync",
            [
                ext::query("BEGIN"),
                ext::parse("x", "SELECT 1"),
                ext::flush(),
            ]
            .concat(),
            Then::Lent,
        ),
    ];
    for (what, bytes, then) in cases {
        // A pooler per case: a stuck backend must not hide the next case.
        let opts = PoolerOpts::transaction(1).admin_users(&[SCRAM_USER.0]);
        let p = Pooler::start(PgCluster::shared(), opts);
        let ci = scram_unix_conninfo(&p);
        let b = connect_ok(&ci).await;
        for terminate in [false, true] {
            tokio::task::block_in_place(|| {
                let (mut c, _) = login(&p);
                c.send(&bytes).unwrap();
                match then {
                    Then::Answered => {
                        let r = read_messages(&mut c, WAIT, |t| t == b'1');
                        assert_eq!(r.flow(), "1", "{what}: {r:?}");
                    }
                    Then::Lent => {
                        let what = format!("{what}: the client never got the backend");
                        wait_show(&p, "SHOW POOLS", &what, |pools| {
                            pools.column("sv_active") == [Some("1".to_string())]
                        });
                    }
                    // The close follows the bytes on the socket, so the
                    // pooler reads them first whenever it reads.
                    Then::Buffered => {}
                }
                if terminate {
                    // A Terminate in the middle of the batch.
                    let _ = c.send(&common::wire::message(b'X', &[]));
                }
                drop(c);
            });
            match tokio::time::timeout(WAIT, b.simple_query("SELECT 1")).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => stuck.push(format!("{what} (Terminate: {terminate}): {e:?}")),
                Err(_) => {
                    stuck.push(format!(
                        "{what} (Terminate: {terminate}): the next client waited {WAIT:?}"
                    ));
                    break;
                }
            }
        }
    }
    assert!(
        stuck.is_empty(),
        "backends left stuck:\n  {}",
        stuck.join("\n  ")
    );
}

// ---------------------------------------------------------------------------
// Cancel

#[test]
fn cancel_reaches_only_the_query_of_the_client_that_asked() {
    let pg = PgCluster::shared();
    let p = Pooler::start(pg, PoolerOpts::transaction(1).admin_users(&[SCRAM_USER.0]));
    let ep = p.endpoint(Transport::Unix);
    let (mut a, key_a) = login(&p);
    let (mut b, _) = login(&p);
    a.send(&ext::query("SELECT pg_sleep(20), 'a'")).unwrap();
    wait_active(pg, "SELECT pg_sleep(20), 'a'");
    // B queues behind A for the one backend.
    b.send(&ext::query("SELECT 'b', pg_sleep(0.5)")).unwrap();
    wait_clients_waiting(&p, 1);
    let started = Instant::now();
    send_cancel(&ep, key_a.0, key_a.1);
    let ra = a.read_query_result(WAIT * 2);
    let err = ra
        .error
        .unwrap_or_else(|| panic!("A's query was not cancelled: {:?}", ra.rows));
    assert_eq!(err.code, "57014", "{err:?}");
    assert!(
        started.elapsed() < WAIT,
        "cancel took {:?}",
        started.elapsed()
    );
    // B then runs on the same backend, and is not cancelled.
    let rb = b.read_query_result(WAIT);
    assert!(
        rb.error.is_none(),
        "B's query after A's cancel: {:?}",
        rb.error
    );
    assert_eq!(rb.scalar().as_deref(), Some("b"));
    let r = b.query("SELECT pg_sleep(0.5), 'b again'");
    assert!(r.error.is_none(), "{:?}", r.error);
    let r = a.query("SELECT 'a again'");
    assert_eq!(r.scalar().as_deref(), Some("a again"));
}

#[test]
fn a_cancel_from_a_client_with_no_query_running_is_not_forwarded() {
    let pg = PgCluster::shared();
    let p = Pooler::start(pg, PoolerOpts::transaction(1).admin_users(&[SCRAM_USER.0]));
    let ep = p.endpoint(Transport::Unix);
    let (mut a, key_a) = login(&p);
    let (mut b, key_b) = login(&p);
    let (mut c, key_c) = login(&p);
    let r = a.query("SELECT 1");
    assert!(r.error.is_none());

    // A is idle (and holds no backend) while B's query runs on the one backend.
    b.send(&ext::query("SELECT pg_sleep(2), 'b done'")).unwrap();
    wait_active(pg, "SELECT pg_sleep(2), 'b done'");
    send_cancel(&ep, key_a.0, key_a.1);
    // C waits for the backend too: its cancel must not reach B's query either.
    c.send(&ext::query("SELECT 'c done'")).unwrap();
    wait_clients_waiting(&p, 1);
    send_cancel(&ep, key_c.0, key_c.1);
    let rb = b.read_query_result(WAIT);
    assert!(
        rb.error.is_none(),
        "B's query was cancelled by another client's cancel: {:?}",
        rb.error
    );
    assert_eq!(rb.rows[0][1].as_deref(), Some("b done"));
    // C's own query: cancelled or run, either is fine, but it must answer.
    let rc = c.read_query_result(WAIT);
    assert!(
        rc.error.as_ref().is_none_or(|e| e.code == "57014"),
        "{:?}",
        rc.error
    );

    // Control: B's own cancel does stop B's query.
    b.send(&ext::query("SELECT pg_sleep(20), 'b again'"))
        .unwrap();
    wait_active(pg, "SELECT pg_sleep(20), 'b again'");
    send_cancel(&ep, key_b.0, key_b.1);
    let rb = b.read_query_result(WAIT * 2);
    assert_eq!(rb.error.map(|e| e.code).as_deref(), Some("57014"));
    // An idle client's cancel sent just before another's query starts
    // does not hit that query either.
    send_cancel(&ep, key_a.0, key_a.1);
    let r = b.query("SELECT pg_sleep(1), 'b third'");
    assert!(r.error.is_none(), "{:?}", r.error);
}

// ---------------------------------------------------------------------------
// idle_transaction_timeout

#[test]
fn idle_transaction_timeout_ends_the_client_and_frees_its_backend() {
    let pg = PgCluster::shared();
    fresh_table(pg, "fault_idle");
    let p = Pooler::start(
        pg,
        PoolerOpts::transaction(1).pool_toml("idle_transaction_timeout = \"1s\""),
    );
    let ended = |c: &mut RawConn, what: &str| {
        let started = Instant::now();
        c.fatal_then_close(WAIT, "25P03", what);
        assert!(started.elapsed() < WAIT);
    };
    let (mut b, _) = login(&p);
    let (mut a, _) = login(&p);
    let r = a.query("BEGIN; INSERT INTO fault_idle VALUES ('a')");
    assert_eq!((r.error.as_ref(), r.status), (None, b'T'));
    ended(&mut a, "idle after BEGIN and an INSERT");
    // The backend is free and clean for B (which idled outside a
    // transaction all along without being ended).
    let r = b.query("SELECT count(*) FROM fault_idle");
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!((r.scalar().as_deref(), r.status), (Some("0"), b'I'));

    // Busy inside a transaction for longer than the limit is not idle.
    let (mut c, _) = login(&p);
    let r = c.query("BEGIN; INSERT INTO fault_idle VALUES ('c'); SELECT pg_sleep(1.5)");
    assert_eq!((r.error.as_ref(), r.status), (None, b'T'));
    ended(&mut c, "idle after a long statement in a transaction");
    // B idles past the limit once more, outside a transaction: not ended.
    std::thread::sleep(Duration::from_millis(1500));
    let r = b.query("SELECT count(*) FROM fault_idle");
    assert_eq!((r.scalar().as_deref(), r.status), (Some("0"), b'I'));
}

/// The backend pid through the simple protocol (no statement to close afterwards).
async fn backend_pid_simple(c: &tokio_postgres::Client) -> i32 {
    let rows = c.simple_query("SELECT pg_backend_pid()").await.unwrap();
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
            _ => None,
        })
        .expect("a pid")
}
