//! Waiting on observable state with a deadline, instead of sleeping and
//! hoping the other side got there: a sleep long enough on an idle machine
//! is too short on a loaded one (the test fails at random) and too long
//! everywhere else (the suite is slow), and a test whose setup did not
//! happen yet can pass by accident. Each wait here polls something a person
//! could look at — a row in `pg_stat_activity`, the pooler's `SHOW POOLS`,
//! a process's exit — and panics, saying what never happened, at its
//! deadline.

use std::future::Future;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use super::wire::QueryResult;
use super::{PgCluster, Pooler, RawConn, Transport, SCRAM_USER, TEST_DB};

/// The deadline of the waits below: generous, since only a failure waits
/// that long.
pub const WAIT: Duration = Duration::from_secs(20);

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(20);

/// Polls `f` every 20 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// [`wait_until`] for a condition that must be awaited (tokio tests): polls
/// `f` until it returns `Some`, which it returns; `None` after `timeout`.
pub async fn wait_for_async<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits for a child with a timeout; `None` if it is still running.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let mut status = None;
    wait_until(timeout, || {
        status = child.try_wait().unwrap_or(None);
        status.is_some()
    });
    status
}

/// Counts the other sessions whose running query contains `$1`.
const ACTIVE_SQL: &str = "SELECT count(*) FROM pg_stat_activity \
     WHERE state = 'active' AND strpos(query, $1) > 0 AND pid <> pg_backend_pid()";

/// Waits until PostgreSQL runs a query whose text contains `marker` (so a
/// cancel or a disconnect now lands inside it); panics after [`WAIT`].
pub fn wait_active(pg: &PgCluster, marker: &str) {
    let literal = format!("'{}'", marker.replace('\'', "''"));
    let sql = ACTIVE_SQL.replace("$1", &literal);
    assert!(
        wait_until(WAIT, || pg.psql_ok(TEST_DB, &sql) != "0"),
        "{marker:?} never started running"
    );
}

/// [`wait_active`] through a tokio-postgres connection (superuser, to see
/// every session's query text).
pub async fn wait_active_async(admin: &tokio_postgres::Client, marker: &str) {
    let active = wait_for_async(WAIT, || async {
        let row = admin.query_one(ACTIVE_SQL, &[&marker]).await.unwrap();
        (row.get::<_, i64>(0) > 0).then_some(())
    })
    .await;
    assert!(active.is_some(), "{marker:?} never started running");
}

/// Runs `sql` on the pooler's admin console until `done` holds for its
/// answer; panics after [`WAIT`] saying `what` never happened, with the last
/// answer. The pooler must list [`SCRAM_USER`] in `admin.users`.
pub fn wait_show(
    pooler: &Pooler,
    sql: &str,
    what: &str,
    done: impl Fn(&QueryResult) -> bool,
) -> QueryResult {
    let mut console = RawConn::connect(&pooler.endpoint(Transport::Unix));
    console
        .login(
            &[("user", SCRAM_USER.0), ("database", "pgharbor")],
            Some(SCRAM_USER.1),
        )
        .unwrap_or_else(|e| panic!("admin console login: {e:?}"));
    let mut last = QueryResult::default();
    let reached = wait_until(WAIT, || {
        last = console.query(sql);
        assert!(last.error.is_none(), "{sql}: {:?}", last.error);
        done(&last)
    });
    assert!(reached, "{what} (waited {WAIT:?}); last {sql}: {last:?}");
    console.terminate();
    last
}

/// Waits until `SHOW POOLS` counts `n` clients waiting for a backend, over
/// all pools.
pub fn wait_clients_waiting(pooler: &Pooler, n: i64) {
    let what = format!("{n} clients never waited for a backend");
    wait_show(pooler, "SHOW POOLS", &what, |pools| {
        let waiting = pools.column("cl_waiting");
        waiting
            .iter()
            .flatten()
            .map(|v| v.parse::<i64>().unwrap_or(0))
            .sum::<i64>()
            == n
    });
}

/// Waits until `SHOW CLIENTS` lists `n` logged-in clients (the console's own
/// sessions are not listed). A client leaves the list only once its session
/// has ended and let go of what it held.
pub fn wait_clients(pooler: &Pooler, n: usize) {
    let what = format!("the pooler never had {n} clients");
    wait_show(pooler, "SHOW CLIENTS", &what, |c| c.rows.len() == n);
}
