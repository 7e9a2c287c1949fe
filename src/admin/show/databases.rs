//! `SHOW DATABASES` and `SHOW USERS`: the configured entries, each with
//! what is open on it now.

use std::collections::{BTreeMap, BTreeSet};

use super::super::rows::{ResultSet, Type, Value};
use crate::admin::Authorized;
use crate::config::{BackendHost, DatabaseConfig};
use crate::pooler::Pooler;

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

/// The host column (the whole list, as PgBouncer shows its host setting)
/// and the port, when every host has the same one.
fn host_and_port(db: &DatabaseConfig) -> (String, Value) {
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
    (host, port)
}

/// `SHOW DATABASES`, with PgBouncer's (1.24) columns plus `reserve_pool`,
/// the name PgBouncer before 1.24 gave `reserve_pool_size` (and the one
/// pgbouncer_exporter reads). `pool_mode` is the database's effective mode
/// (PgBouncer leaves it NULL when inherited; a `[users.NAME]` mode may
/// still differ per user); `max_connections` is `max_db_connections`;
/// `paused` is 1 when a pool of the database is paused (PAUSE or KILL);
/// `disabled` is 1 after DISABLE. pgharbor has no per-database client
/// limit, so `max_client_connections` is 0 (PgBouncer's "no limit").
pub fn databases(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let c = pooler.config();
    let mut rs = ResultSet::new(
        [
            "name",
            "host",
            "port",
            "database",
            "force_user",
            "pool_size",
            "min_pool_size",
            "reserve_pool_size",
            "reserve_pool",
            "server_lifetime",
            "pool_mode",
            "load_balance_hosts",
            "max_connections",
            "current_connections",
            "max_client_connections",
            "current_client_connections",
            "paused",
            "disabled",
        ]
        .map(|n| match n {
            "name" | "host" | "database" | "force_user" | "pool_mode" | "load_balance_hosts" => {
                (n, Type::Text)
            }
            _ => (n, Type::Int8),
        }),
    );
    let per_db = pools_per_database(pooler);
    let clients = pooler.clients.list();
    for (name, db) in &c.databases {
        let (host, port) = host_and_port(db);
        let (open, paused) = per_db.get(name).copied().unwrap_or_default();
        let connected = clients.iter().filter(|c| &c.database == name).count();
        let reserve = c.reserve_pool_size_for(name);
        rs.push(vec![
            name.as_str().into(),
            host.into(),
            port,
            Value::opt_text(Some(db.conninfo.dbname.as_deref().unwrap_or(name))),
            Value::opt_text(db.conninfo.user.as_deref()),
            Value::count(c.pool_size_for(name)),
            Value::count(c.min_pool_size_for(name)),
            Value::count(reserve),
            Value::count(reserve),
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
            Value::Int(pooler.is_disabled(name).into()),
        ]);
    }
    rs
}

/// Every user the pooler knows: a `[users.NAME]` table, a pool, or a
/// client logged in as it. (The auth file's users are not listed: it names
/// who may log in, not who has.)
pub(super) fn known_users(pooler: &Pooler) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = pooler.config().users.keys().cloned().collect();
    names.extend(pooler.pools.all().iter().map(|p| p.key.user.clone()));
    names.extend(pooler.clients.list().into_iter().map(|c| c.user));
    names
}

/// `SHOW USERS`, with PgBouncer's (1.24) columns: `pool_mode` is the
/// `[users.NAME]` override (NULL when not set); `max_user_connections` the
/// user's limit in force (0 = none); `current_connections` the backends
/// open as this user; `current_client_connections` its clients. pgharbor
/// has no per-user pool size, reserve or client limit: NULL, NULL and 0.
pub fn users(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let c = pooler.config();
    let mut rs = ResultSet::new([
        ("name", Type::Text),
        ("pool_size", Type::Int8),
        ("reserve_pool_size", Type::Int8),
        ("pool_mode", Type::Text),
        ("max_user_connections", Type::Int8),
        ("current_connections", Type::Int8),
        ("max_user_client_connections", Type::Int8),
        ("current_client_connections", Type::Int8),
    ]);
    let pools = pooler.pools.all();
    let clients = pooler.clients.list();
    for name in known_users(pooler) {
        let open: usize = pools
            .iter()
            .filter(|p| p.key.user == name)
            .map(|p| p.servers().list().len())
            .sum();
        let connected = clients.iter().filter(|c| c.user == name).count();
        let mode = c.users.get(&name).and_then(|u| u.pool_mode);
        rs.push(vec![
            Value::Text(name.clone()),
            Value::Null,
            Value::Null,
            Value::opt_text(mode.map(|m| m.as_str())),
            Value::count(c.max_user_connections_for(&name)),
            Value::count(open),
            Value::Int(0),
            Value::count(connected),
        ]);
    }
    rs
}
