//! The pool settings at their three levels — `[pool]` (defaults),
//! `[databases.NAME]` and `[users.NAME]` — validated, and how they combine:
//! a user's setting wins over its database's, which wins over `[pool]`.
//!
//! Which level may set what follows PgBouncer: per database `pool_size`,
//! `min_pool_size`, `reserve_pool_size`, `max_db_connections` and
//! `pool_mode`; per user `pool_mode` and `max_user_connections`.

use std::collections::BTreeMap;

use super::raw::{key_part, RawDatabase, RawPool, RawUser};
use super::validate::{
    at_least_one, byte_size, duration, duration_or_zero, non_negative, parse_named,
};
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

/// `[pool]`.
pub(super) fn pool(raw: RawPool) -> Result<PoolConfig, ConfigError> {
    let mode = match raw.mode {
        None => PoolMode::Session,
        Some(m) => parse_named("pool.mode", &m)?,
    };
    Ok(PoolConfig {
        mode,
        default_pool_size: at_least_one("pool.default_pool_size", raw.default_pool_size, 20)?,
        max_client_conn: at_least_one("pool.max_client_conn", raw.max_client_conn, 10_000)?,
        query_wait_timeout: duration("pool.query_wait_timeout", raw.query_wait_timeout, 120)?,
        server_connect_timeout: duration(
            "pool.server_connect_timeout",
            raw.server_connect_timeout,
            15,
        )?,
        server_command_timeout: duration(
            "pool.server_command_timeout",
            raw.server_command_timeout,
            30,
        )?,
        server_reset_query: raw
            .server_reset_query
            .unwrap_or_else(|| "DISCARD ALL".to_string()),
        shutdown_timeout: duration_or_zero("pool.shutdown_timeout", raw.shutdown_timeout, 30)?,
        min_pool_size: non_negative("pool.min_pool_size", raw.min_pool_size, 0)?,
        reserve_pool_size: non_negative("pool.reserve_pool_size", raw.reserve_pool_size, 0)?,
        reserve_pool_timeout: duration_or_zero(
            "pool.reserve_pool_timeout",
            raw.reserve_pool_timeout,
            5,
        )?,
        max_db_connections: non_negative("pool.max_db_connections", raw.max_db_connections, 0)?,
        max_user_connections: non_negative(
            "pool.max_user_connections",
            raw.max_user_connections,
            0,
        )?,
        server_idle_timeout: duration_or_zero(
            "pool.server_idle_timeout",
            raw.server_idle_timeout,
            600,
        )?,
        server_lifetime: duration_or_zero("pool.server_lifetime", raw.server_lifetime, 3600)?,
        server_check_delay: duration_or_zero(
            "pool.server_check_delay",
            raw.server_check_delay,
            30,
        )?,
        server_check_query: raw
            .server_check_query
            .unwrap_or_else(|| "SELECT 1".to_string()),
        server_drain_timeout: duration_or_zero(
            "pool.server_drain_timeout",
            raw.server_drain_timeout,
            30,
        )?,
        idle_transaction_timeout: duration_or_zero(
            "pool.idle_transaction_timeout",
            raw.idle_transaction_timeout,
            0,
        )?,
        max_prepared_statements: non_negative(
            "pool.max_prepared_statements",
            raw.max_prepared_statements,
            200,
        )?,
        prepared_statement_bytes: byte_size(
            "pool.prepared_statement_bytes",
            raw.prepared_statement_bytes,
            256 << 20,
        )?,
        prepared_statement_bytes_per_client: byte_size(
            "pool.prepared_statement_bytes_per_client",
            raw.prepared_statement_bytes_per_client,
            4 << 20,
        )?,
        track_parameters: track_parameters(raw.track_parameters.unwrap_or_default())?,
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

/// The pool keys of `[databases.NAME]` (`key` is `databases.NAME`).
pub(super) fn database(
    key: &str,
    conninfo: ConnInfo,
    raw: &RawDatabase,
) -> Result<DatabaseConfig, ConfigError> {
    let count = |name: &str, value: Option<i64>| match value {
        None => Ok(None),
        Some(n) => non_negative(&format!("{key}.{name}"), Some(n), 0).map(Some),
    };
    let pool_size = match raw.pool_size {
        None => None,
        Some(n) => Some(at_least_one(&format!("{key}.pool_size"), Some(n), 1)?),
    };
    let pool_mode = match &raw.pool_mode {
        None => None,
        Some(m) => Some(parse_named(&format!("{key}.pool_mode"), m)?),
    };
    Ok(DatabaseConfig {
        conninfo,
        pool_size,
        pool_mode,
        min_pool_size: count("min_pool_size", raw.min_pool_size)?,
        reserve_pool_size: count("reserve_pool_size", raw.reserve_pool_size)?,
        max_db_connections: count("max_db_connections", raw.max_db_connections)?,
    })
}

/// `[users.NAME]`, by role name.
pub(super) fn users(
    raw: BTreeMap<String, RawUser>,
) -> Result<BTreeMap<String, UserConfig>, ConfigError> {
    let mut users = BTreeMap::new();
    for (name, user) in raw {
        let key = format!("users.{}", key_part(&name));
        if name.is_empty() {
            return Err(ConfigError::invalid(key, "user name must not be empty"));
        }
        let pool_mode = match user.pool_mode {
            None => None,
            Some(m) => Some(parse_named(&format!("{key}.pool_mode"), &m)?),
        };
        let max_user_connections = match user.max_user_connections {
            None => None,
            Some(n) => Some(non_negative(
                &format!("{key}.max_user_connections"),
                Some(n),
                0,
            )?),
        };
        users.insert(
            name,
            UserConfig {
                pool_mode,
                max_user_connections,
            },
        );
    }
    Ok(users)
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
