//! The SHOW commands PgBouncer also has: same column names and meanings, so
//! dashboards and exporters written for PgBouncer keep working. A column
//! pgharbor does not measure yet is NULL, never a made-up number; one that
//! PgBouncer defines but that has no meaning here (load balancing) holds
//! PgBouncer's "none" value.

use std::collections::BTreeMap;

use super::rows::{ResultSet, Type, Value};
use super::Authorized;
use crate::config::BackendHost;
use crate::pooler::Pooler;

mod config;
mod pools;
mod stats;

pub use config::config;
pub use pools::{clients_by_pool, pools, seconds_and_us, PoolClients};
pub use stats::{per_database as stats_by_database, stats, stats_totals, totals};

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

/// Per database: backends open, and whether any of its pools is paused.
fn pools_per_database(pooler: &Pooler) -> BTreeMap<String, (usize, bool)> {
    let mut per_db: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    for pool in pooler.pools.all() {
        let e = per_db.entry(pool.key.database.clone()).or_default();
        e.0 += pool.servers().list().len();
        e.1 |= pool.is_paused();
    }
    per_db
}

/// `SHOW DATABASES`, with PgBouncer's (1.24) columns. `pool_mode` is the
/// database's effective mode (PgBouncer leaves it NULL when inherited; a
/// `[users.NAME]` mode may still differ per user); `max_connections` is
/// `max_db_connections`; `paused` is 1 when a pool of the database is
/// paused (PAUSE or KILL).
pub fn databases(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let c = pooler.config();
    let mut rs = ResultSet::new([
        ("name", Type::Text),
        ("host", Type::Text),
        ("port", Type::Int8),
        ("database", Type::Text),
        ("force_user", Type::Text),
        ("pool_size", Type::Int8),
        ("min_pool_size", Type::Int8),
        ("reserve_pool_size", Type::Int8),
        ("server_lifetime", Type::Int8),
        ("pool_mode", Type::Text),
        ("load_balance_hosts", Type::Text),
        ("max_connections", Type::Int8),
        ("current_connections", Type::Int8),
        ("max_client_connections", Type::Int8),
        ("current_client_connections", Type::Int8),
        ("paused", Type::Int8),
        ("disabled", Type::Int8),
    ]);
    let per_db = pools_per_database(pooler);
    let clients = pooler.clients.list();
    for (name, db) in &c.databases {
        // The whole list, as PgBouncer shows its host setting; one port
        // when every host has the same.
        let hosts = &db.conninfo.hosts;
        let host = hosts
            .iter()
            .map(|h| match &h.host {
                BackendHost::Tcp(h) => h.clone(),
                BackendHost::Unix(dir) => dir.display().to_string(),
            })
            .collect::<Vec<_>>()
            .join(",");
        let port = match db.conninfo.first_host().port {
            p if hosts.iter().all(|h| h.port == p) => Value::Int(p.into()),
            _ => Value::Null,
        };
        let (open, paused) = per_db.get(name).copied().unwrap_or_default();
        let connected = clients.iter().filter(|c| &c.database == name).count();
        rs.push(vec![
            name.as_str().into(),
            host.into(),
            port,
            Value::opt_text(Some(db.conninfo.dbname.as_deref().unwrap_or(name))),
            Value::opt_text(db.conninfo.user.as_deref()),
            Value::count(c.pool_size_for(name)),
            Value::count(c.min_pool_size_for(name)),
            Value::count(c.reserve_pool_size_for(name)),
            // Seconds. pgharbor's 0 turns the limit off, where PgBouncer's
            // would mean "use once": show an unlimited lifetime as NULL.
            if c.pool.server_lifetime.is_zero() {
                Value::Null
            } else {
                Value::uint(c.pool.server_lifetime.as_secs())
            },
            db.pool_mode.unwrap_or(c.pool.mode).as_str().into(),
            db.conninfo.load_balance_hosts.as_str().into(),
            // max_db_connections; 0 = no limit, as in PgBouncer.
            Value::count(c.max_db_connections_for(name)),
            Value::count(open),
            Value::Int(0),
            Value::count(connected),
            Value::Int(paused.into()),
            Value::Int(0),
        ]);
    }
    rs
}
