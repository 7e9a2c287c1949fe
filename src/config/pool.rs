//! The pool settings at their three levels — `[pool]` (defaults),
//! `[databases.NAME]` and `[users.NAME]` — validated, and how they combine:
//! a user's setting wins over its database's, which wins over `[pool]`.
//!
//! Which level may set what follows PgBouncer: per database `pool_size`,
//! `min_pool_size`, `reserve_pool_size`, `max_db_connections` and
//! `pool_mode`; per user `pool_mode` and `max_user_connections`.

use std::collections::BTreeMap;

use super::keys::{self, Section};
use super::raw::{key_part, RawDatabase, RawPool, RawUser};
use super::{Config, ConfigError, ConnInfo, DatabaseConfig, PoolConfig, PoolMode, UserConfig};

/// Startup parameters that follow each client in transaction mode whatever
/// `pool.track_parameters` says (lower-cased, as [`PoolConfig::is_tracked`]
/// compares them). PgBouncer tracks the same ones.
pub const TRACKED_PARAMETERS: [&str; 6] = [
    "client_encoding",
    "datestyle",
    "timezone",
    "intervalstyle",
    "standard_conforming_strings",
    "application_name",
];

impl Config {
    /// Pool size of database `name`: its override or `pool.default_pool_size`.
    pub fn pool_size_for(&self, name: &str) -> usize {
        self.database(name)
            .and_then(|db| db.pool_size)
            .unwrap_or(self.pool.default_pool_size)
    }

    /// Pool mode of `user`'s clients on `database`: the user's override, else
    /// the database's, else `pool.mode`.
    pub fn pool_mode_for(&self, database: &str, user: &str) -> PoolMode {
        self.users
            .get(user)
            .and_then(|u| u.pool_mode)
            .or_else(|| self.database(database).and_then(|db| db.pool_mode))
            .unwrap_or(self.pool.mode)
    }

    /// Backends kept open ahead of demand in each pool of database `name`,
    /// capped at its pool size.
    pub fn min_pool_size_for(&self, name: &str) -> usize {
        self.database(name)
            .and_then(|db| db.min_pool_size)
            .unwrap_or(self.pool.min_pool_size)
            .min(self.pool_size_for(name))
    }

    /// Reserve backends of each pool of database `name`.
    pub fn reserve_pool_size_for(&self, name: &str) -> usize {
        self.database(name)
            .and_then(|db| db.reserve_pool_size)
            .unwrap_or(self.pool.reserve_pool_size)
    }

    /// Backends all pools of database `name` may hold together; 0 = no limit.
    pub fn max_db_connections_for(&self, name: &str) -> usize {
        self.database(name)
            .and_then(|db| db.max_db_connections)
            .unwrap_or(self.pool.max_db_connections)
    }

    /// Backends logging in as `user` across all databases; 0 = no limit.
    pub fn max_user_connections_for(&self, user: &str) -> usize {
        self.users
            .get(user)
            .and_then(|u| u.max_user_connections)
            .unwrap_or(self.pool.max_user_connections)
    }
}

impl PoolConfig {
    /// Whether parameter `name` (any case, as PostgreSQL matches them)
    /// follows each client in transaction mode: one of
    /// [`TRACKED_PARAMETERS`] or listed in `pool.track_parameters`.
    pub fn is_tracked(&self, name: &str) -> bool {
        TRACKED_PARAMETERS
            .iter()
            .any(|t| t.eq_ignore_ascii_case(name))
            || self
                .track_parameters
                .iter()
                .any(|p| p.eq_ignore_ascii_case(name))
    }
}

/// `[pool]`: each key through its row of the key table.
pub(super) fn pool(raw: RawPool) -> Result<PoolConfig, ConfigError> {
    let k = |name: &str| keys::key(Section::Pool, name);
    Ok(PoolConfig {
        mode: k("mode")?.choice(raw.mode)?,
        default_pool_size: k("default_pool_size")?.count(raw.default_pool_size)?,
        max_client_conn: k("max_client_conn")?.count(raw.max_client_conn)?,
        query_wait_timeout: k("query_wait_timeout")?.duration(raw.query_wait_timeout)?,
        server_connect_timeout: k("server_connect_timeout")?
            .duration(raw.server_connect_timeout)?,
        server_command_timeout: k("server_command_timeout")?
            .duration(raw.server_command_timeout)?,
        server_reset_query: k("server_reset_query")?
            .text(raw.server_reset_query)
            .unwrap_or_default(),
        shutdown_timeout: k("shutdown_timeout")?.duration(raw.shutdown_timeout)?,
        min_pool_size: k("min_pool_size")?.count(raw.min_pool_size)?,
        reserve_pool_size: k("reserve_pool_size")?.count(raw.reserve_pool_size)?,
        reserve_pool_timeout: k("reserve_pool_timeout")?.duration(raw.reserve_pool_timeout)?,
        max_db_connections: k("max_db_connections")?.count(raw.max_db_connections)?,
        max_user_connections: k("max_user_connections")?.count(raw.max_user_connections)?,
        server_idle_timeout: k("server_idle_timeout")?.duration(raw.server_idle_timeout)?,
        server_lifetime: k("server_lifetime")?.duration(raw.server_lifetime)?,
        server_check_delay: k("server_check_delay")?.duration(raw.server_check_delay)?,
        server_check_query: k("server_check_query")?
            .text(raw.server_check_query)
            .unwrap_or_default(),
        server_drain_timeout: k("server_drain_timeout")?.duration(raw.server_drain_timeout)?,
        idle_transaction_timeout: k("idle_transaction_timeout")?
            .duration(raw.idle_transaction_timeout)?,
        max_prepared_statements: k("max_prepared_statements")?
            .count(raw.max_prepared_statements)?,
        prepared_statement_bytes: k("prepared_statement_bytes")?
            .bytes(raw.prepared_statement_bytes)?,
        prepared_statement_bytes_per_client: k("prepared_statement_bytes_per_client")?
            .bytes(raw.prepared_statement_bytes_per_client)?,
        track_parameters: track_parameters(k("track_parameters")?.names(raw.track_parameters))?,
    })
}

/// Parameter names as PostgreSQL spells GUCs (letters, digits, `_`, and `.`
/// for extension settings), lower-cased, without duplicates.
fn track_parameters(names: Vec<String>) -> Result<Vec<String>, ConfigError> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !valid {
            return Err(ConfigError::invalid(
                format!("pool.track_parameters[{i}]"),
                format!("invalid parameter name {name:?} (letters, digits, \"_\" and \".\" only)"),
            ));
        }
        let lower = name.to_ascii_lowercase();
        if !out.contains(&lower) {
            out.push(lower);
        }
    }
    Ok(out)
}

/// The pool keys of `[databases.NAME]` (`key` is `databases.NAME`); unset
/// ones fall back to `[pool]` when read (see the `*_for` methods).
pub(super) fn database(
    key: &str,
    conninfo: ConnInfo,
    raw: &RawDatabase,
) -> Result<DatabaseConfig, ConfigError> {
    let k = |name: &str| keys::key(Section::Database, name);
    Ok(DatabaseConfig {
        conninfo,
        pool_size: k("pool_size")?.count_in(key, raw.pool_size)?,
        pool_mode: k("pool_mode")?.choice_in(key, raw.pool_mode.as_deref())?,
        min_pool_size: k("min_pool_size")?.count_in(key, raw.min_pool_size)?,
        reserve_pool_size: k("reserve_pool_size")?.count_in(key, raw.reserve_pool_size)?,
        max_db_connections: k("max_db_connections")?.count_in(key, raw.max_db_connections)?,
    })
}

/// `[users.NAME]`, by role name.
pub(super) fn users(
    raw: BTreeMap<String, RawUser>,
) -> Result<BTreeMap<String, UserConfig>, ConfigError> {
    let k = |name: &str| keys::key(Section::User, name);
    let mut users = BTreeMap::new();
    for (name, user) in raw {
        let key = format!("users.{}", key_part(&name));
        if name.is_empty() {
            return Err(ConfigError::invalid(key, "user name must not be empty"));
        }
        let settings = UserConfig {
            pool_mode: k("pool_mode")?.choice_in(&key, user.pool_mode.as_deref())?,
            max_user_connections: k("max_user_connections")?
                .count_in(&key, user.max_user_connections)?,
        };
        users.insert(name, settings);
    }
    Ok(users)
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
