//! What prometheus-community/pgbouncer_exporter reads, read the way it reads
//! it: its exact `SHOW POOLS;` and `SHOW STATS_TOTALS;` over the simple
//! query protocol on the admin database, every column it maps present, its
//! labels text and its values numbers (`strconv.ParseFloat`; a NULL it
//! turns into NaN, which pgharbor uses only where it counts nothing).
//! The exporter's first query, a bare `SHOW STATS`, must answer too.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use common::{connect_ok, PgCluster, Pooler, Transport, SCRAM_USER, TEST_DB};
use support::{console, opts, show_until, Table};

/// The exporter's `pools` map: labels, then gauges.
const POOLS_LABELS: [&str; 2] = ["database", "user"];
const POOLS_VALUES: [&str; 12] = [
    "cl_active",
    "cl_active_cancel_req",
    "cl_waiting",
    "cl_waiting_cancel_req",
    "sv_active",
    "sv_active_cancel",
    "sv_being_canceled",
    "sv_idle",
    "sv_used",
    "sv_tested",
    "sv_login",
    "maxwait",
];

/// The exporter's `stats_totals` map, less `requests` (PgBouncer before
/// 1.8; the exporter skips a column the answer does not have).
const TOTALS_VALUES: [&str; 10] = [
    "query_count",
    "query_time",
    "bytes_received",
    "bytes_sent",
    "wait_time",
    "xact_count",
    "xact_time",
    "client_parse_count",
    "server_parse_count",
    "bind_count",
];

/// Columns pgharbor does not count (prepared-statement tracking): NULL.
const NOT_COUNTED: [&str; 3] = ["client_parse_count", "server_parse_count", "bind_count"];

/// Checks `t` the way the exporter's queryNamespaceMapping would read it.
fn check(what: &str, t: &Table, labels: &[&str], values: &[&str]) {
    assert!(!t.rows.is_empty(), "{what}: no rows");
    for column in labels.iter().chain(values) {
        assert!(
            t.columns.iter().any(|c| c == column),
            "{what}: no column {column} in {:?}",
            t.columns
        );
    }
    for row in 0..t.rows.len() {
        for label in labels {
            assert!(t.get(row, label).is_some(), "{what}: NULL label {label}");
        }
        for column in values {
            match t.get(row, column) {
                None => assert!(
                    NOT_COUNTED.contains(column),
                    "{what}: {column} is NULL in row {row}"
                ),
                Some(v) => {
                    let parsed = v.parse::<f64>();
                    assert!(parsed.is_ok(), "{what}: {column} = {v:?} is not a number");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_exporter_s_queries_answer_with_every_column_it_maps() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let client =
        connect_ok(&pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB))
            .await;
    client.simple_query("SELECT 1").await.expect("query");
    drop(client);
    let admin = console(&pooler, Transport::Tcp).await;
    admin
        .simple_query("SHOW STATS")
        .await
        .expect("the exporter's ping");

    let pools = show_until(&admin, "SHOW POOLS;", |t| !t.rows.is_empty()).await;
    check("SHOW POOLS", &pools, &POOLS_LABELS, &POOLS_VALUES);
    let totals = show_until(&admin, "SHOW STATS_TOTALS;", |t| {
        let r = t.find(&[("database", TEST_DB)]);
        t.int(r, "query_count") >= 1
    })
    .await;
    check("SHOW STATS_TOTALS", &totals, &["database"], &TOTALS_VALUES);
}
