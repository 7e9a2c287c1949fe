//! `SHOW CONFIG`: every setting of the running config, one row each, from
//! the config's key table (`config::keys`), so a key added there shows up
//! here with its default and reload behaviour.

use super::super::rows::{ResultSet, Type};
use crate::admin::Authorized;
use crate::config::keys::{self, Get, Key};
use crate::pooler::Pooler;

/// `SHOW CONFIG`: key, value, default, changeable, as PgBouncer: exactly
/// these four columns, as pgbouncer_exporter accepts no other shape. Keys
/// are the config file's dotted names, `[databases.NAME]` and
/// `[users.NAME]` keys once per name; the integer settings PgBouncer also
/// has come again under PgBouncer's name (`max_client_conn`, the same value
/// as `pool.max_client_conn`). `changeable` is `yes` when a RELOAD
/// can change the key at all. Passwords never appear: conninfo strings are
/// shown redacted.
pub fn config(pooler: &Pooler, _: &Authorized) -> ResultSet {
    rows(pooler, false)
}

/// `SHOW CONFIG_RELOAD`: SHOW CONFIG plus `reload`, for whom a RELOAD
/// changes the key: `immediate`, `new logins` (clients that connect after
/// it), `new pools` (pools created after it) or `restart` (nobody until a
/// restart). SET takes the first two.
pub fn config_reload(pooler: &Pooler, _: &Authorized) -> ResultSet {
    rows(pooler, true)
}

fn rows(pooler: &Pooler, with_reload: bool) -> ResultSet {
    let c = pooler.config();
    let mut columns = vec![
        ("key", Type::Text),
        ("value", Type::Text),
        ("default", Type::Text),
        ("changeable", Type::Text),
    ];
    if with_reload {
        columns.push(("reload", Type::Text));
    }
    let mut rs = ResultSet::new(columns);
    let mut add = |name: String, value: String, key: &Key| {
        let changeable = if key.reload.changeable() { "yes" } else { "no" };
        let mut row = vec![
            name.into(),
            value.into(),
            key.default_value(&c).into(),
            changeable.into(),
        ];
        if with_reload {
            row.push(key.reload.as_str().into());
        }
        rs.push(row);
    };
    for key in keys::all() {
        if let Get::Global(get) = key.get {
            add(key.dotted(), get(&c), key);
        }
    }
    // PgBouncer's names of the same integers, which pgbouncer_exporter and
    // dashboards read (max_client_conn, max_user_connections).
    for (pgbouncer, dotted) in crate::import::same_integer_settings() {
        if let Some(key) = keys::by_dotted(&dotted) {
            if let Get::Global(get) = key.get {
                add(pgbouncer.to_string(), get(&c), key);
            }
        }
    }
    for (name, db) in &c.databases {
        for key in keys::all() {
            if let Get::Database(get) = key.get {
                add(format!("databases.{name}.{}", key.name), get(db), key);
            }
        }
    }
    for (name, user) in &c.users {
        for key in keys::all() {
            if let Get::User(get) = key.get {
                add(format!("users.{name}.{}", key.name), get(user), key);
            }
        }
    }
    rs
}
