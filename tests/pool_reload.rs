//! A reload that changes a pool setting applies to the pools that exist
//! (issue 14 item 5): `pool_size` 2 -> 1 under load, and the limit really
//! holds (SHOW POOLS through psql, and PostgreSQL's own pg_stat_activity);
//! then 1 -> 3, and three clients are served at once; then 3 -> 1 with
//! idle backends, which close at once. The log names the
//! pool and the change, and a key only a restart applies is warned about.

mod common;

use std::collections::HashMap;

use common::clients::psql_cmd;
use common::wait::{wait_until, WAIT};
use common::{connect, PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER, TEST_DB};

/// SHOW POOLS through psql, as an operator reads it: one map per row.
fn show_pools(pooler: &Pooler) -> Vec<HashMap<String, String>> {
    let console = pooler.conninfo(Transport::Unix, SCRAM_USER.0, None, "pgharbor");
    let out = psql_cmd(&console, Some(SCRAM_USER.1))
        .args([
            "-q",
            "-A",
            "-F",
            "\t",
            "-P",
            "footer=off",
            "-c",
            "SHOW POOLS",
        ])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql SHOW POOLS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split('\t')
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split('\t').map(str::to_string))
                .collect()
        })
        .collect()
}

/// (sv_active, cl_waiting) of the pools of `TEST_DB`.
fn active_and_waiting(pooler: &Pooler) -> (i64, i64) {
    let num = |r: &HashMap<String, String>, c: &str| {
        r.get(c).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0)
    };
    show_pools(pooler)
        .iter()
        .filter(|r| r.get("database").map(String::as_str) == Some(TEST_DB))
        .fold((0, 0), |(a, w), r| {
            (a + num(r, "sv_active"), w + num(r, "cl_waiting"))
        })
}

/// Backends of SCRAM_USER that PostgreSQL has.
fn server_sessions(pg: &PgCluster) -> i64 {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE usename = '{}' \
         AND backend_type = 'client backend'",
        SCRAM_USER.0
    );
    pg.psql_ok(TEST_DB, &sql).parse().unwrap_or(-1)
}

/// Waits until SHOW POOLS and pg_stat_activity show `active` backends lent
/// out, `waiting` clients in line and `sessions` server sessions.
fn wait_state(pg: &PgCluster, pooler: &Pooler, active: i64, waiting: i64, sessions: i64) {
    let mut last = ((0, 0), 0);
    let reached = wait_until(WAIT, || {
        last = (active_and_waiting(pooler), server_sessions(pg));
        last == ((active, waiting), sessions)
    });
    assert!(
        reached,
        "never sv_active={active} cl_waiting={waiting} with {sessions} server sessions; \
         last ((sv_active, cl_waiting), sessions) = {last:?}\n{}",
        pooler.log_text()
    );
}

/// Rewrites `default_pool_size` in the config and reloads with SIGHUP,
/// waiting for the `nth` reload to be logged.
fn reload_pool_size(pooler: &Pooler, from: usize, to: usize, nth: usize) {
    let path = pooler.config_path();
    let text = std::fs::read_to_string(path).expect("read config");
    let changed = text.replace(
        &format!("default_pool_size = {from}\n"),
        &format!("default_pool_size = {to}\n"),
    );
    assert_ne!(text, changed, "no default_pool_size = {from} in\n{text}");
    std::fs::write(path, changed).expect("write config");
    pooler.signal(libc::SIGHUP);
    assert!(
        pooler.wait_for_log("configuration reloaded", nth, WAIT),
        "reload {nth} not logged:\n{}",
        pooler.log_text()
    );
}

type Session = tokio_postgres::Client;

/// A client that logs in (session mode: it holds a backend from then on),
/// in a task, since its login waits while the pool is full.
fn client(pooler: &Pooler) -> tokio::task::JoinHandle<Session> {
    let conninfo = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    tokio::spawn(async move {
        let c = connect(&conninfo).await.expect("client login");
        c.simple_query("SELECT 1").await.expect("client query");
        c
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reloaded_pool_size_applies_to_the_existing_pool() {
    let pg = PgCluster::shared();
    let opts = PoolerOpts::default()
        .pool_size(2)
        .admin_users(&[SCRAM_USER.0]);
    let pooler = Pooler::start(pg, opts);
    let a = client(&pooler).await.expect("first client");
    let b = client(&pooler).await.expect("second client");
    let c = client(&pooler);
    block(&pooler, pg, 2, 1, 2).await;

    // 2 -> 1: the clients keep their backends; the next one to come back
    // is closed, and the waiting client stays in line.
    reload_pool_size(&pooler, 2, 1, 1);
    assert!(
        pooler.wait_for_log("pool_size 2 -> 1", 1, WAIT),
        "no log of the applied change:\n{}",
        pooler.log_text()
    );
    drop(a);
    block(&pooler, pg, 1, 1, 1).await;
    drop(b);
    let c = c.await.expect("the waiting client got the one backend");
    block(&pooler, pg, 1, 0, 1).await;

    // 1 -> 3: three clients at once.
    reload_pool_size(&pooler, 1, 3, 2);
    let d = client(&pooler).await.expect("second client after growing");
    let e = client(&pooler).await.expect("third client after growing");
    block(&pooler, pg, 3, 0, 3).await;
    assert!(pooler.wait_for_log("pool_size 1 -> 3", 1, WAIT));

    // 3 -> 1 with two backends idle: those beyond the new size close at once.
    drop((d, e));
    block(&pooler, pg, 1, 0, 3).await;
    reload_pool_size(&pooler, 3, 1, 3);
    block(&pooler, pg, 1, 0, 1).await;
    drop(c);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_only_a_restart_applies_is_warned_about() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    let path = pooler.config_path();
    let text = std::fs::read_to_string(path).expect("read config");
    let changed = text.replace("max_client_conn = 10000", "max_client_conn = 500");
    assert_ne!(text, changed);
    std::fs::write(path, changed).expect("write config");
    pooler.signal(libc::SIGHUP);
    assert!(pooler.wait_for_log("configuration reloaded", 1, WAIT));
    let log = pooler.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("pool.max_client_conn changed: takes effect after a restart"))
        .unwrap_or_else(|| panic!("no warning:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
}

/// [`wait_state`] off the async workers.
async fn block(pooler: &Pooler, pg: &'static PgCluster, active: i64, waiting: i64, sessions: i64) {
    tokio::task::block_in_place(|| wait_state(pg, pooler, active, waiting, sessions));
}
