//! The admin console's values are true (issue 14): a client that waits for
//! a backend shows its wait in SHOW CLIENTS and SHOW POOLS while it waits;
//! the application_name a client sent is shown; SHOW CLIENTS and SHOW
//! SERVERS name each other's connection, and the backend's pid is the
//! PostgreSQL process; SHOW STATS counts the transactions and queries of a
//! known workload on its database and nothing on another.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use std::time::Duration;

use common::{connect_ok, Backend, DbEntry, PgCluster, Pooler, Transport, SCRAM_USER, TEST_DB};
use support::{console, opts, show, show_until, Table};
use tokio_postgres::SimpleQueryMessage;

/// A row's `<s>` and `<s>_us` columns as one duration (PgBouncer's split).
fn split_wait(t: &Table, row: usize, seconds: &str) -> Duration {
    let us = t.int(row, &format!("{seconds}_us"));
    Duration::from_secs(t.int(row, seconds) as u64) + Duration::from_micros(us as u64)
}

fn app_conninfo(pooler: &Pooler, app: &str) -> String {
    let base = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    format!("{base} application_name={app}")
}

/// The first column of the first row of `sql`'s answer.
async fn scalar(c: &tokio_postgres::Client, sql: &str) -> String {
    let rows = c.simple_query(sql).await.expect(sql);
    rows.iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

#[tokio::test(flavor = "multi_thread")]
async fn waits_links_and_application_names_are_the_real_ones() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts().mode("transaction").pool_size(1));
    let admin = console(&pooler, Transport::Tcp).await;
    let holder = connect_ok(&app_conninfo(&pooler, "holder")).await;
    let waiter = connect_ok(&app_conninfo(&pooler, "waiter")).await;

    // The holder keeps the pool's one backend inside a transaction.
    holder.simple_query("BEGIN").await.expect("BEGIN");
    let pid = scalar(&holder, "SELECT pg_backend_pid()").await;
    let query = tokio::spawn(async move {
        let r = waiter.simple_query("SELECT 'served'").await;
        (waiter, r)
    });
    let min_wait = Duration::from_millis(800);
    let clients = show_until(&admin, "SHOW CLIENTS", |t| {
        let r = t.find(&[("application_name", "waiter")]);
        t.get(r, "state") == Some("waiting") && split_wait(t, r, "wait") >= min_wait
    })
    .await;
    let pools = show(&admin, "SHOW POOLS").await;
    let p = pools.find(&[("database", TEST_DB), ("user", SCRAM_USER.0)]);
    assert_eq!(pools.int(p, "cl_waiting"), 1);
    let maxwait = split_wait(&pools, p, "maxwait");
    assert!(maxwait >= min_wait, "maxwait {maxwait:?}");
    assert!(maxwait < Duration::from_secs(30), "maxwait {maxwait:?}");
    let w = clients.find(&[("application_name", "waiter")]);
    assert_eq!(
        clients.get(w, "link"),
        None,
        "a waiting client holds nothing"
    );

    // The holder and its backend name each other, and that backend is the
    // PostgreSQL process the holder's queries run in.
    let servers = show(&admin, "SHOW SERVERS").await;
    let h = clients.find(&[("application_name", "holder")]);
    let (client_ptr, server_ptr) = (clients.get(h, "ptr"), clients.get(h, "link"));
    assert_eq!(
        clients.get(h, "ptr"),
        Some(&*format!("c{}", clients.int(h, "id")))
    );
    let s = servers.find(&[("ptr", server_ptr.expect("holder's link"))]);
    assert_eq!(servers.get(s, "link"), client_ptr);
    assert_eq!(servers.get(s, "remote_pid"), Some(pid.as_str()));
    assert_eq!(servers.get(s, "application_name"), Some("holder"));
    let pg_admin = pg.admin_client().await;
    let seen = scalar(
        &pg_admin,
        &format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}"),
    )
    .await;
    assert_eq!(seen, "1", "backend pid {pid} in pg_stat_activity");

    // Once served, the wait is over.
    holder.simple_query("COMMIT").await.expect("COMMIT");
    let (_waiter, r) = tokio::time::timeout(Duration::from_secs(10), query)
        .await
        .expect("waiter still waiting after COMMIT")
        .unwrap();
    r.expect("waiter's query");
    let clients = show(&admin, "SHOW CLIENTS").await;
    let w = clients.find(&[("application_name", "waiter")]);
    assert_eq!(split_wait(&clients, w, "wait"), Duration::ZERO);
    let pools = show(&admin, "SHOW POOLS").await;
    assert_eq!(split_wait(&pools, 0, "maxwait"), Duration::ZERO);
}

#[tokio::test(flavor = "multi_thread")]
async fn show_stats_counts_transactions_and_queries_per_database() {
    let pg = PgCluster::shared();
    let dbs = vec![
        DbEntry::new(TEST_DB, Backend::Unix),
        DbEntry::new("quiet", Backend::Unix),
    ];
    let pooler = Pooler::start(pg, opts().mode("transaction").databases(dbs));
    let admin = console(&pooler, Transport::Unix).await;
    let c = connect_ok(&app_conninfo(&pooler, "workload")).await;
    // 3 autocommit statements: 3 transactions, 3 queries.
    for _ in 0..3 {
        c.simple_query("SELECT 1").await.expect("SELECT 1");
    }
    // One transaction block of 3 queries, one failed block of 3, and one
    // query string of two statements (one request, one transaction).
    for sql in ["BEGIN", "SELECT 2", "COMMIT", "BEGIN"] {
        c.simple_query(sql).await.expect(sql);
    }
    assert!(c.simple_query("SELECT 1/0").await.is_err());
    for sql in ["ROLLBACK", "SELECT 3; SELECT 4"] {
        c.simple_query(sql).await.expect(sql);
    }
    let (xacts, queries) = (6, 10);
    drop(c);
    // Counters are handed over by the session at the latest when it ends.
    let stats = show_until(&admin, "SHOW STATS", |t| {
        t.int(t.find(&[("database", TEST_DB)]), "total_query_count") >= queries
    })
    .await;
    let r = stats.find(&[("database", TEST_DB)]);
    assert_eq!(stats.int(r, "total_query_count"), queries);
    assert_eq!(stats.int(r, "total_xact_count"), xacts);
    let (xact_us, query_us) = (
        stats.int(r, "total_xact_time"),
        stats.int(r, "total_query_time"),
    );
    assert!(query_us > 0 && xact_us >= query_us, "{xact_us} {query_us}");
    assert_eq!(stats.int(r, "avg_query_time"), query_us / queries);
    assert!(stats.int(r, "total_received") > 0 && stats.int(r, "total_sent") > 0);
    let q = stats.find(&[("database", "quiet")]);
    for column in ["total_xact_count", "total_query_count", "total_received"] {
        assert_eq!(
            stats.int(q, column),
            0,
            "{column} of a database nobody used"
        );
    }

    let totals = show(&admin, "SHOW STATS_TOTALS").await;
    let r = totals.find(&[("database", TEST_DB)]);
    assert_eq!(
        (totals.int(r, "xact_count"), totals.int(r, "query_count")),
        (xacts, queries)
    );
    assert_eq!(totals.int(r, "xact_time"), xact_us);
    let sums = show(&admin, "SHOW TOTALS").await;
    assert_eq!(sums.columns, ["name", "value"]);
    let n = sums.find(&[("name", "total_query_count")]);
    assert_eq!(sums.int(n, "value"), queries);
}
