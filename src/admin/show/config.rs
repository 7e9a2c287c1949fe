//! `SHOW CONFIG`: every setting of the running config, one row each.

use std::path::Path;
use std::time::Duration;

use super::super::rows::{ResultSet, Type};
use crate::admin::Authorized;
use crate::pooler::Pooler;

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
