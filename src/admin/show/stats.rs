//! `SHOW STATS`, `SHOW STATS_TOTALS` and `SHOW TOTALS`, with PgBouncer's
//! columns: one row per database (every configured one, and any other a
//! client reached, as through a fallback entry), totals since start.
//!
//! What is counted, per database the client asked for (see
//! [`SessionTransfer`]): a query is one client request answered — a
//! ReadyForQuery relayed to the client, for a simple Query or an extended
//! batch up to its Sync (PgBouncer counts one per request too); a
//! transaction ends at such a ReadyForQuery that says idle (`I`), so an
//! autocommit statement is one transaction and one query. `received` /
//! `sent` are bytes from and to clients; times are µs: `query_time` is the
//! time requests were in flight (from a request's first byte to the
//! ReadyForQuery that leaves nothing owed), `xact_time` the same for whole
//! transactions (idle-in-transaction time included, as in PgBouncer),
//! `wait_time` clients' waits for a backend (each login's and, in
//! transaction pooling, each transaction's).
//!
//! Sessions merge their counters when they end and at most once a second
//! while they run, so a live session's last second may not be in yet.
//! `avg_xact_time`, `avg_query_time` and `avg_wait_time` are means over
//! everything counted (per transaction, query and backend assignment);
//! the per-second rates (`avg_xact_count`, `avg_query_count`, `avg_recv`,
//! `avg_sent`) need a stats period, which pgharbor does not keep: NULL.
//! The prepared-statement counts of STATS_TOTALS are not counted: NULL.

use std::collections::BTreeMap;

use crate::admin::rows::{ResultSet, Type, Value};
use crate::admin::Authorized;
use crate::pooler::Pooler;
use crate::stats::SessionTransfer;

/// The counters of every database worth a row (every configured one, and
/// any other a client reached), by name.
pub fn per_database(pooler: &Pooler) -> BTreeMap<String, SessionTransfer> {
    let mut dbs = pooler.stats.databases();
    for name in pooler.config().databases.keys() {
        dbs.entry(name.clone()).or_default();
    }
    dbs
}

fn columns(names: &[&'static str]) -> ResultSet {
    ResultSet::new(names.iter().map(|n| {
        let ty = match *n {
            "database" => Type::Text,
            _ => Type::Int8,
        };
        (*n, ty)
    }))
}

/// `total / n`, 0 when nothing was counted.
fn mean(total: u64, n: u64) -> Value {
    Value::uint(total.checked_div(n).unwrap_or(0))
}

/// The `total_*` values, in SHOW STATS order.
fn totals_of(t: &SessionTransfer) -> [Value; 7] {
    [
        Value::uint(t.xacts),
        Value::uint(t.queries),
        Value::uint(t.bytes_in),
        Value::uint(t.bytes_out),
        Value::uint(t.xact_us),
        Value::uint(t.query_us()),
        Value::uint(t.wait_us),
    ]
}

/// The `avg_*` values, in SHOW STATS order.
fn averages_of(t: &SessionTransfer) -> [Value; 7] {
    [
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
        mean(t.xact_us, t.xacts),
        mean(t.query_us(), t.queries),
        mean(t.wait_us, t.assignments),
    ]
}

/// SHOW STATS's columns after `database`, PgBouncer's; SHOW TOTALS's names.
const STATS_COLUMNS: [&str; 14] = [
    "total_xact_count",
    "total_query_count",
    "total_received",
    "total_sent",
    "total_xact_time",
    "total_query_time",
    "total_wait_time",
    "avg_xact_count",
    "avg_query_count",
    "avg_recv",
    "avg_sent",
    "avg_xact_time",
    "avg_query_time",
    "avg_wait_time",
];

/// `SHOW STATS`.
pub fn stats(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let mut names = vec!["database"];
    names.extend(STATS_COLUMNS);
    let mut rs = columns(&names);
    for (name, t) in per_database(pooler) {
        let mut row = vec![Value::Text(name)];
        row.extend(totals_of(&t));
        row.extend(averages_of(&t));
        rs.push(row);
    }
    rs
}

/// `SHOW STATS_TOTALS`: the totals of SHOW STATS without their prefix,
/// with PgBouncer's (1.24) names.
pub fn stats_totals(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let mut rs = columns(&[
        "database",
        "xact_count",
        "query_count",
        "bytes_received",
        "bytes_sent",
        "xact_time",
        "query_time",
        "wait_time",
        "client_parse_count",
        "server_parse_count",
        "bind_count",
    ]);
    for (name, t) in per_database(pooler) {
        let mut row = vec![Value::Text(name)];
        row.extend(totals_of(&t));
        row.extend([Value::Null, Value::Null, Value::Null]);
        rs.push(row);
    }
    rs
}

/// `SHOW TOTALS`: SHOW STATS summed over all databases, as (`name`,
/// `value`) rows; PgBouncer leaves out the NULL averages too.
pub fn totals(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let mut all = SessionTransfer::default();
    for t in per_database(pooler).values() {
        all.merge(t);
    }
    let mut rs = ResultSet::new([("name", Type::Text), ("value", Type::Int8)]);
    let names = STATS_COLUMNS;
    let values = totals_of(&all).into_iter().chain(averages_of(&all));
    for (name, value) in names.into_iter().zip(values) {
        if value != Value::Null {
            rs.push(vec![name.into(), value]);
        }
    }
    rs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rows_carry_totals_and_means() {
        let mut t = SessionTransfer::default();
        t.exchange(10, Duration::from_micros(30));
        t.exchange(10, Duration::from_micros(50));
        (t.queries, t.xacts) = (2, 1);
        t.xact_time(Duration::from_micros(100));
        t.assigned(Duration::from_micros(9));
        t.assigned(Duration::ZERO);
        let totals = totals_of(&t);
        assert_eq!(totals[0], Value::Int(1));
        assert_eq!(totals[1], Value::Int(2));
        assert_eq!(totals[5], Value::Int(80));
        assert_eq!(totals[6], Value::Int(9));
        let avg = averages_of(&t);
        assert_eq!(avg[0], Value::Null);
        assert_eq!(
            (&avg[4], &avg[5], &avg[6]),
            (&Value::Int(100), &Value::Int(40), &Value::Int(4))
        );
        let none = averages_of(&SessionTransfer::default());
        assert_eq!(none[5], Value::Int(0));
    }
}
