//! The SHOW commands PgBouncer also has: same column names and meanings, so
//! dashboards and exporters written for PgBouncer keep working. A column
//! pgharbor does not measure yet is NULL, never a made-up number; one that
//! PgBouncer defines but that has no meaning here (load balancing) holds
//! PgBouncer's "none" value.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::console::Authorized;
use super::rows::{ResultSet, Type, Value};
use crate::config::BackendHost;
use crate::pool::ServerState;
use crate::pooler::Pooler;
use crate::stats::{Side, CLIENT_PHASES};

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

/// `SHOW CONFIG`: key, value, default, changeable (as PgBouncer). Keys are
/// the config file's dotted names; `changeable` says whether RELOAD applies
/// a new value to everything (`yes`) or only a restart does (`no`; pool
/// settings reach only pools created after the reload). Passwords never
/// appear: conninfo strings are shown redacted.
pub fn config(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let c = pooler.config();
    let mut rs = ResultSet::new([
        ("key", Type::Text),
        ("value", Type::Text),
        ("default", Type::Text),
        ("changeable", Type::Text),
    ]);
    let mut add = |key: &str, value: String, default: &str, changeable: bool| {
        let yes_no = if changeable { "yes" } else { "no" };
        rs.push(vec![
            key.into(),
            value.into(),
            default.into(),
            yes_no.into(),
        ]);
    };
    let l = &c.listen;
    let addresses: Vec<String> = l.addresses.iter().map(|a| a.to_string()).collect();
    add("listen.addresses", addresses.join(", "), "127.0.0.1", false);
    add("listen.port", l.port.to_string(), "6432", false);
    add(
        "listen.unix_socket_dir",
        opt_path(l.unix_socket_dir.as_deref()),
        "/tmp",
        false,
    );
    add(
        "listen.unix_socket_mode",
        format!("{:04o}", l.unix_socket_mode),
        "0777",
        false,
    );
    add(
        "listen.client_login_timeout",
        dur(l.client_login_timeout),
        "15s",
        true,
    );
    let opt = |d: Option<Duration>| d.map(dur).unwrap_or_else(|| "0s".into());
    let k = &l.tcp;
    let on = k.keepalive == crate::config::Keepalive::On;
    add("listen.tcp_keepalive", on.to_string(), "true", true);
    add("listen.tcp_keepidle", opt(k.keepalive_idle), "0s", true);
    add(
        "listen.tcp_keepintvl",
        opt(k.keepalive_interval),
        "0s",
        true,
    );
    let count = k.keepalive_count.unwrap_or(0).to_string();
    add("listen.tcp_keepcnt", count, "0", true);
    add("listen.tcp_user_timeout", opt(k.user_timeout), "0s", true);
    let t = &c.tls;
    add("tls.cert_file", opt_path(t.cert_file.as_deref()), "", true);
    add("tls.key_file", opt_path(t.key_file.as_deref()), "", true);
    let sslmode_default = if t.has_certificate() {
        "prefer"
    } else {
        "disable"
    };
    add("tls.sslmode", t.sslmode.to_string(), sslmode_default, true);
    add(
        "tls.socketsslmode",
        t.socketsslmode.to_string(),
        "disable",
        true,
    );
    let loopback = t.loopbacksslmode.map(|m| m.to_string()).unwrap_or_default();
    add("tls.loopbacksslmode", loopback, "", true);
    add(
        "tls.min_protocol_version",
        t.min_protocol_version.to_string(),
        "TLSv1.2",
        true,
    );
    add(
        "auth.method",
        c.auth.method.to_string(),
        "scram-sha-256",
        true,
    );
    add(
        "auth.auth_file",
        opt_path(c.auth.auth_file.as_deref()),
        "",
        true,
    );
    let p = &c.pool;
    add("pool.mode", p.mode.to_string(), "session", true);
    add(
        "pool.default_pool_size",
        p.default_pool_size.to_string(),
        "20",
        false,
    );
    add(
        "pool.max_client_conn",
        p.max_client_conn.to_string(),
        "10000",
        false,
    );
    add(
        "pool.query_wait_timeout",
        dur(p.query_wait_timeout),
        "2m",
        false,
    );
    add(
        "pool.server_connect_timeout",
        dur(p.server_connect_timeout),
        "15s",
        false,
    );
    add(
        "pool.server_command_timeout",
        dur(p.server_command_timeout),
        "30s",
        false,
    );
    add(
        "pool.server_reset_query",
        p.server_reset_query.clone(),
        "DISCARD ALL",
        false,
    );
    add(
        "pool.shutdown_timeout",
        dur(p.shutdown_timeout),
        "30s",
        false,
    );
    let count = |n: usize| n.to_string();
    add("pool.min_pool_size", count(p.min_pool_size), "0", false);
    add(
        "pool.reserve_pool_size",
        count(p.reserve_pool_size),
        "0",
        false,
    );
    add(
        "pool.reserve_pool_timeout",
        dur(p.reserve_pool_timeout),
        "5s",
        false,
    );
    add(
        "pool.max_db_connections",
        count(p.max_db_connections),
        "0",
        false,
    );
    add(
        "pool.max_user_connections",
        count(p.max_user_connections),
        "0",
        false,
    );
    add(
        "pool.server_idle_timeout",
        dur(p.server_idle_timeout),
        "10m",
        false,
    );
    add("pool.server_lifetime", dur(p.server_lifetime), "1h", false);
    add(
        "pool.server_check_delay",
        dur(p.server_check_delay),
        "30s",
        false,
    );
    add(
        "pool.server_check_query",
        p.server_check_query.clone(),
        "SELECT 1",
        false,
    );
    add(
        "pool.server_drain_timeout",
        dur(p.server_drain_timeout),
        "30s",
        false,
    );
    add(
        "pool.idle_transaction_timeout",
        dur(p.idle_transaction_timeout),
        "0s",
        true,
    );
    add(
        "pool.max_prepared_statements",
        count(p.max_prepared_statements),
        "200",
        true,
    );
    add(
        "pool.prepared_statement_bytes",
        count(p.prepared_statement_bytes),
        "268435456",
        true,
    );
    add(
        "pool.prepared_statement_bytes_per_client",
        count(p.prepared_statement_bytes_per_client),
        "4194304",
        true,
    );
    add(
        "pool.track_parameters",
        p.track_parameters.join(", "),
        "",
        true,
    );
    add("admin.users", c.admin.users.join(", "), "", true);
    for (name, db) in &c.databases {
        let key = |k: &str| format!("databases.{name}.{k}");
        add(&key("conninfo"), db.conninfo.redacted(), "", false);
        let size = db.pool_size.map(|n| n.to_string()).unwrap_or_default();
        add(
            &key("pool_size"),
            size,
            &p.default_pool_size.to_string(),
            false,
        );
        let mode = db.pool_mode.map(|m| m.to_string()).unwrap_or_default();
        add(&key("pool_mode"), mode, p.mode.as_str(), true);
        let opt = |n: Option<usize>| n.map(|n| n.to_string()).unwrap_or_default();
        add(
            &key("min_pool_size"),
            opt(db.min_pool_size),
            &count(p.min_pool_size),
            false,
        );
        add(
            &key("reserve_pool_size"),
            opt(db.reserve_pool_size),
            &count(p.reserve_pool_size),
            false,
        );
        add(
            &key("max_db_connections"),
            opt(db.max_db_connections),
            &count(p.max_db_connections),
            false,
        );
    }
    for (name, user) in &c.users {
        let key = |k: &str| format!("users.{name}.{k}");
        let mode = user.pool_mode.map(|m| m.to_string()).unwrap_or_default();
        add(&key("pool_mode"), mode, "", true);
        let max = user
            .max_user_connections
            .map(|n| n.to_string())
            .unwrap_or_default();
        add(
            &key("max_user_connections"),
            max,
            &count(p.max_user_connections),
            false,
        );
    }
    rs
}

fn dur(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn opt_path(p: Option<&Path>) -> String {
    p.map(|p| p.display().to_string()).unwrap_or_default()
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
        let host = match &db.conninfo.host {
            BackendHost::Tcp(h) => h.clone(),
            BackendHost::Unix(dir) => dir.display().to_string(),
        };
        let (open, paused) = per_db.get(name).copied().unwrap_or_default();
        let connected = clients.iter().filter(|c| &c.database == name).count();
        rs.push(vec![
            name.as_str().into(),
            host.into(),
            Value::Int(db.conninfo.port.into()),
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
            Value::Null,
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
