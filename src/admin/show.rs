//! The SHOW commands PgBouncer also has: same column names and meanings, so
//! dashboards and exporters written for PgBouncer keep working. A column
//! pgharbor does not measure yet is NULL, never a made-up number; one that
//! PgBouncer defines but that has no meaning here (load balancing) holds
//! PgBouncer's "none" value.

use super::rows::{ResultSet, Type, Value};
use super::Authorized;
use crate::pool::ServerState;
use crate::pooler::Pooler;
use crate::stats::{Side, CLIENT_PHASES};

mod config;
mod databases;
mod lists;

pub use config::{config, config_reload};
pub use databases::{databases, users};
pub use lists::{lists, mem, state};

/// `SHOW VERSION`: one row, column `version`.
pub fn version(_: &Authorized) -> ResultSet {
    let mut rs = ResultSet::new([("version", Type::Text)]);
    rs.push(vec![version_string().into()]);
    rs
}

/// `pgharbor <crate version>`.
pub fn version_string() -> String {
    format!("pgharbor {}", env!("CARGO_PKG_VERSION"))
}

/// `SHOW POOLS`, with PgBouncer's (1.24) columns, one row per (database,
/// user) pool, from its server registry: `sv_active` = backends lent out,
/// `sv_used` = ones being reset after their client left, `sv_idle` = clean
/// ones; `cl_active` = `sv_active` (session mode: one client per backend);
/// `cl_waiting` = clients waiting for a backend; `sv_login` = backends
/// connecting or logging in. Not tracked yet, so 0: how long the oldest has
/// waited (`maxwait`, `maxwait_us`), cancel requests in flight.
pub fn pools(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let c = pooler.config();
    let mut rs = ResultSet::new(
        [
            "database",
            "user",
            "cl_active",
            "cl_waiting",
            "cl_active_cancel_req",
            "cl_waiting_cancel_req",
            "sv_active",
            "sv_active_cancel",
            "sv_being_canceled",
            "sv_idle",
            "sv_used",
            "sv_tested",
            "sv_login",
            "maxwait",
            "maxwait_us",
            "pool_mode",
            "load_balance_hosts",
        ]
        .map(|n| {
            let ty = match n {
                "database" | "user" | "pool_mode" | "load_balance_hosts" => Type::Text,
                _ => Type::Int8,
            };
            (n, ty)
        }),
    );
    let mut pools = pooler.pools.all();
    pools.sort_by(|a, b| (&a.key.database, &a.key.user).cmp(&(&b.key.database, &b.key.user)));
    for pool in pools {
        let servers = pool.servers().list();
        let count = |state: ServerState| servers.iter().filter(|s| s.state == state).count();
        let active = count(ServerState::Active);
        let zero = || Value::Int(0);
        rs.push(vec![
            pool.key.database.as_str().into(),
            pool.key.user.as_str().into(),
            Value::count(active),
            Value::count(pool.waiting()),
            zero(),
            zero(),
            Value::count(active),
            zero(),
            zero(),
            Value::count(count(ServerState::Idle)),
            Value::count(count(ServerState::Resetting)),
            zero(),
            Value::count(pool.logging_in()),
            zero(),
            zero(),
            c.pool_mode_for(&pool.key.database, &pool.key.user)
                .as_str()
                .into(),
            Value::Null,
        ]);
    }
    rs
}

/// `SHOW STATS`, with PgBouncer's classic columns, in one row for the whole
/// pooler (`database` = `*`): pgharbor counts traffic per transport class,
/// not per database. A "query" is one request/response exchange (up to
/// ReadyForQuery); times are µs. `total_wait_time` and `avg_wait_time` are
/// the time logins waited for a backend (sum and mean per login). NULL:
/// transaction counts and times (not tracked) and the per-second `avg_*`
/// rates (no stats period yet).
pub fn stats(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let mut rs = ResultSet::new(
        [
            "database",
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
        ]
        .map(|n| {
            (
                n,
                if n == "database" {
                    Type::Text
                } else {
                    Type::Int8
                },
            )
        }),
    );
    let wait_phase = CLIENT_PHASES
        .iter()
        .position(|p| *p == "backend_wait")
        .unwrap_or(usize::MAX);
    let (mut queries, mut received, mut sent, mut busy_us) = (0u64, 0u64, 0u64, 0u64);
    let (mut waits, mut wait_us) = (0u64, 0f64);
    // Transfer is merged into both the client's and the backend's class;
    // counting client classes alone counts every byte once.
    for (class, s) in pooler.stats.snapshot() {
        if class.side != Side::Client {
            continue;
        }
        let t = &s.transfer;
        queries += t.chatty.exchanges + t.bulk.exchanges;
        received += t.bytes_in;
        sent += t.bytes_out;
        busy_us += t.chatty.busy_us + t.bulk.busy_us;
        if let Some(h) = s.phases.get(wait_phase) {
            waits += h.len();
            wait_us += h.mean() * h.len() as f64;
        }
    }
    let avg_query_us = busy_us.checked_div(queries).unwrap_or(0);
    let avg_wait_us = if waits == 0 {
        0.0
    } else {
        wait_us / waits as f64
    };
    rs.push(vec![
        "*".into(),
        Value::Null,
        Value::uint(queries),
        Value::uint(received),
        Value::uint(sent),
        Value::Null,
        Value::uint(busy_us),
        Value::uint(wait_us.round() as u64),
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
        Value::uint(avg_query_us),
        Value::uint(avg_wait_us.round() as u64),
    ]);
    rs
}
