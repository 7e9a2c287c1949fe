//! `SHOW CONFIG`: every setting of the running config, one row each, from
//! the config's key table (`config::keys`), so a key added there shows up
//! here with its default and reload behaviour.

use super::super::rows::{ResultSet, Type};
use crate::admin::Authorized;
use crate::config::keys::{self, Get, Key};
use crate::pooler::Pooler;

/// `SHOW CONFIG`: key, value, default, changeable (as PgBouncer), and
/// reload. Keys are the config file's dotted names, `[databases.NAME]` and
/// `[users.NAME]` keys once per name. `changeable` is `yes` when a RELOAD
/// can change the key at all; `reload` says for whom: `immediate`,
/// `new logins` (clients that connect after it), `new pools` (pools created
/// after it) or `restart` (nobody until a restart). Passwords never appear:
/// conninfo strings are shown redacted.
pub fn config(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let c = pooler.config();
    let mut rs = ResultSet::new([
        ("key", Type::Text),
        ("value", Type::Text),
        ("default", Type::Text),
        ("changeable", Type::Text),
        ("reload", Type::Text),
    ]);
    let mut add = |name: String, value: String, key: &Key| {
        let changeable = if key.reload.changeable() { "yes" } else { "no" };
        rs.push(vec![
            name.into(),
            value.into(),
            key.default_value(&c).into(),
            changeable.into(),
            key.reload.as_str().into(),
        ]);
    };
    for key in keys::all() {
        if let Get::Global(get) = key.get {
            add(key.dotted(), get(&c), key);
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
