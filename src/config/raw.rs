//! The config file as written: a serde mirror of the TOML with every key
//! optional, so that defaults and "required" are decided in `validate`, and
//! `deny_unknown_fields` everywhere, so a misspelt key is an error instead of
//! a silently ignored line.
//!
//! Numbers are read as `i64` (TOML's integer) and range-checked later, so
//! that `port = 0` and `port = -1` get the same clear message. Defaults and
//! ranges are the key table's (`keys`); a test holds these field names to
//! that table's.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_path_to_error::Segment;

use super::ConfigError;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawConfig {
    #[serde(default)]
    pub listen: RawListen,
    #[serde(default)]
    pub tls: RawTls,
    #[serde(default)]
    pub auth: RawAuth,
    #[serde(default)]
    pub pool: RawPool,
    #[serde(default)]
    pub admin: RawAdmin,
    #[serde(default)]
    pub databases: BTreeMap<String, RawDatabase>,
    #[serde(default)]
    pub users: BTreeMap<String, RawUser>,
    #[serde(default)]
    pub service: super::service::RawService,
    #[serde(default)]
    pub peers: BTreeMap<String, String>,
}

/// `[listen]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawListen {
    pub addresses: Option<Vec<String>>,
    pub port: Option<i64>,
    pub unix_socket_dir: Option<String>,
    pub unix_socket_mode: Option<String>,
    pub client_login_timeout: Option<String>,
    pub tcp_keepalive: Option<bool>,
    pub tcp_keepidle: Option<String>,
    pub tcp_keepintvl: Option<String>,
    pub tcp_keepcnt: Option<i64>,
    pub tcp_user_timeout: Option<String>,
    pub tcp_defer_accept: Option<bool>,
    pub reuseport: Option<bool>,
    pub instance_id: Option<i64>,
    pub proxy_protocol_from: Option<Vec<String>>,
}

/// `[tls]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawTls {
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub sslmode: Option<String>,
    pub socketsslmode: Option<String>,
    pub loopbacksslmode: Option<String>,
    pub min_protocol_version: Option<String>,
    pub tls13_ciphers: Option<String>,
    pub ca_file: Option<String>,
    pub crl_file: Option<String>,
    pub crl_dir: Option<String>,
    pub client_cert_map: Option<String>,
}

/// `[auth]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawAuth {
    pub method: Option<String>,
    pub auth_file: Option<String>,
    pub hba_file: Option<String>,
    pub ident_file: Option<String>,
    pub user: Option<String>,
    pub query: Option<String>,
    pub dbname: Option<String>,
    pub query_cache_ttl: Option<String>,
    pub query_timeout: Option<String>,
    pub query_concurrency: Option<i64>,
}

/// `[pool]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawPool {
    pub mode: Option<String>,
    pub default_pool_size: Option<i64>,
    pub max_client_conn: Option<i64>,
    pub query_wait_timeout: Option<String>,
    pub server_connect_timeout: Option<String>,
    pub server_command_timeout: Option<String>,
    pub server_reset_query: Option<String>,
    pub shutdown_timeout: Option<String>,
    pub min_pool_size: Option<i64>,
    pub reserve_pool_size: Option<i64>,
    pub reserve_pool_timeout: Option<String>,
    pub max_db_connections: Option<i64>,
    pub max_user_connections: Option<i64>,
    pub server_idle_timeout: Option<String>,
    pub server_lifetime: Option<String>,
    pub server_check_delay: Option<String>,
    pub server_check_query: Option<String>,
    pub idle_transaction_timeout: Option<String>,
    pub server_drain_timeout: Option<String>,
    pub max_prepared_statements: Option<i64>,
    pub prepared_statement_bytes: Option<String>,
    pub prepared_statement_bytes_per_client: Option<String>,
    pub track_parameters: Option<Vec<String>>,
}

/// `[admin]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawAdmin {
    pub users: Option<Vec<String>>,
    pub stats_users: Option<Vec<String>>,
    pub metrics_listen: Option<String>,
}

/// `[databases.NAME]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawDatabase {
    pub conninfo: Option<String>,
    pub pool_size: Option<i64>,
    pub pool_mode: Option<String>,
    pub min_pool_size: Option<i64>,
    pub reserve_pool_size: Option<i64>,
    pub max_db_connections: Option<i64>,
}

/// `[users.NAME]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawUser {
    pub pool_mode: Option<String>,
    pub max_user_connections: Option<i64>,
}

/// Deserializes `text`, turning toml/serde errors into errors that name
/// the dotted key (tracked by `serde_path_to_error`).
pub(super) fn from_toml(text: &str) -> Result<RawConfig, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let key = dotted_path(err.path());
        let inner = err.into_inner();
        let (line, column) = inner
            .span()
            .map(|span| line_column(text, span.start))
            .unwrap_or((0, 0));
        let message = inner.message().replace('\n', "; ");
        if key.is_empty() {
            return ConfigError::Syntax {
                line,
                column,
                message,
            };
        }
        let message = match message.strip_prefix("unknown field `") {
            // The unknown key is already the last segment of `key`; keep the
            // list of keys serde expected.
            Some(rest) => match rest.split_once("`, ") {
                Some((_, expected)) => format!("unknown key ({expected})"),
                None => "unknown key".to_string(),
            },
            None => match plain_number(&message) {
                Some(n) if super::keys::for_path(&key).is_some_and(|k| k.is_duration()) => {
                    super::keys::duration_hint(n)
                }
                _ => hide_string_value(message).replace("expected i64", "expected an integer"),
            },
        };
        let message = if line > 0 {
            format!("{message} (line {line})")
        } else {
            message
        };
        ConfigError::Invalid { key, message }
    })
}

/// The number of serde's `invalid type: integer `600`, expected ...`
/// (or floating point), when a number was written where text belongs.
fn plain_number(message: &str) -> Option<&str> {
    let rest = message
        .strip_prefix("invalid type: integer `")
        .or_else(|| message.strip_prefix("invalid type: floating point `"))?;
    rest.split_once('`').map(|(n, _)| n)
}

/// Drops the value from serde's `invalid type: string "...", expected ...`:
/// a misplaced conninfo string may hold a password, and errors get logged.
fn hide_string_value(message: String) -> String {
    if let Some(rest) = message.strip_prefix("invalid type: string \"") {
        if let Some(i) = rest.rfind("\", expected ") {
            return format!("invalid type: string, {}", &rest[i + 3..]);
        }
    }
    message
}

/// `listen.addresses[1]`, `databases."a.b".conninfo`; empty for the root.
fn dotted_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&key_part(key));
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// A key as it would be written in TOML: bare if it can be, quoted otherwise.
pub fn key_part(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_string()
    } else {
        // TOML's own quoting (toml's writer), which Rust's `{:?}` is not
        // for every character.
        toml::Value::String(key.to_string()).to_string()
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}
