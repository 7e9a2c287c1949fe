//! One key changed in a running configuration (the console's `SET`): the
//! file's text as it was parsed, with that key set, parsed and validated
//! again. So a SET value goes through exactly the checks the file's would,
//! and the result is the configuration a RELOAD of the edited file would
//! give, without anything else that may have changed on disk since.

use std::fmt;

use super::keys::{self, Key, Kind};
use super::{Config, ConfigError};

/// The TOML the configuration was parsed from. It is not part of what a
/// configuration means: two configs that say the same are equal whatever
/// their text, and a debug print shows none of it (it may hold passwords).
#[derive(Clone, Default)]
pub(super) struct Source(pub(super) toml::Table);

impl PartialEq for Source {
    fn eq(&self, _: &Source) -> bool {
        true
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Source(..)")
    }
}

/// Where a dotted key path puts its value: the tables leading to it and the key.
fn split_path(path: &str) -> Option<(Vec<String>, String)> {
    let (table, rest) = path.split_once('.')?;
    match table {
        "databases" | "users" => {
            let (name, key) = rest.rsplit_once('.')?;
            // SHOW CONFIG writes a name that needs it in double quotes.
            let name = name
                .strip_prefix('"')
                .and_then(|n| n.strip_suffix('"'))
                .unwrap_or(name);
            (!name.is_empty()).then(|| (vec![table.into(), name.into()], key.into()))
        }
        _ => (!rest.contains('.')).then(|| (vec![table.into()], rest.into())),
    }
}

/// `text` as a TOML value of `key`'s kind, as a console user writes it
/// (PgBouncer's `SET key = value`: booleans as 1/0 or on/off too, lists
/// comma-separated).
fn toml_value(key: &Key, path: &str, text: &str) -> Result<toml::Value, ConfigError> {
    let value = match key.kind {
        Kind::Count { .. } => toml::Value::Integer(text.trim().parse().map_err(|_| {
            ConfigError::invalid(path, format!("must be an integer, not {text:?}"))
        })?),
        Kind::Bool => toml::Value::Boolean(match text.trim().to_ascii_lowercase().as_str() {
            "true" | "on" | "yes" | "1" => true,
            "false" | "off" | "no" | "0" => false,
            _ => {
                return Err(ConfigError::invalid(
                    path,
                    format!("must be true or false, not {text:?}"),
                ))
            }
        }),
        Kind::Names | Kind::Addresses | Kind::Cidrs => toml::Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| toml::Value::String(s.to_string()))
                .collect(),
        ),
        _ => toml::Value::String(text.to_string()),
    };
    Ok(value)
}

impl Config {
    /// This configuration with the key at dotted `path` (`pool.mode`,
    /// `databases.app.pool_mode`) set to `text`, validated as the file is.
    /// Whether the running pooler may take the change is the caller's
    /// question (the key's `reload`).
    pub fn with_setting(&self, path: &str, text: &str) -> Result<Config, ConfigError> {
        let unknown = || ConfigError::invalid(path, "unknown key");
        let key = keys::for_path(path).ok_or_else(unknown)?;
        let (tables, name) = split_path(path).ok_or_else(unknown)?;
        let value = toml_value(key, path, text)?;
        let mut root = self.source.0.clone();
        let mut table = &mut root;
        for t in tables {
            let entry = table
                .entry(t)
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = entry.as_table_mut().ok_or_else(unknown)?;
        }
        table.insert(name, value);
        let text = toml::to_string(&root)
            .map_err(|e| ConfigError::invalid(path, format!("cannot write the value: {e}")))?;
        Config::parse(&text, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::config::PoolMode;

    const TEXT: &str = "[auth]\nauth_file = \"users.txt\"\n[pool]\nmode = \"session\"\n\
                        [databases.app]\nconninfo = \"port=5433\"\n\
                        [databases.\"a.b\"]\nconninfo = \"\"\n";

    fn config() -> Config {
        Config::parse(TEXT, Path::new("/etc/pgharbor/pgharbor.toml")).expect("parses")
    }

    #[test]
    fn a_setting_changes_that_key_and_keeps_the_rest() {
        let c = config();
        let set = c.with_setting("pool.mode", "transaction").expect("set");
        assert_eq!(set.pool.mode, PoolMode::Transaction);
        assert_eq!(set.databases, c.databases);
        assert_eq!(set.auth, c.auth);
        let set = set
            .with_setting("pool.idle_transaction_timeout", "90s")
            .expect("set");
        assert_eq!(set.pool.idle_transaction_timeout, Duration::from_secs(90));
        assert_eq!(set.pool.mode, PoolMode::Transaction, "an earlier SET stays");
        let set = c.with_setting("admin.users", "a, b ,").expect("set");
        assert_eq!(set.admin.users, ["a", "b"]);
        let set = c.with_setting("listen.tcp_keepalive", "off").expect("set");
        assert_eq!(set.listen.tcp.keepalive, crate::config::Keepalive::Off);
        let set = c
            .with_setting("databases.\"a.b\".pool_mode", "statement")
            .expect("set");
        assert_eq!(set.databases["a.b"].pool_mode, Some(PoolMode::Statement));
        let set = c.with_setting("users.u.pool_mode", "session").expect("set");
        assert_eq!(set.users["u"].pool_mode, Some(PoolMode::Session));
    }

    #[test]
    fn bad_values_and_keys_are_refused_with_the_files_messages() {
        let c = config();
        let message = |path: &str, text: &str| match c.with_setting(path, text) {
            Ok(_) => panic!("{path} = {text:?} accepted"),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            message("pool.mode", "sometimes"),
            "pool.mode: invalid value \"sometimes\" (expected one of \"session\", \"transaction\", \"statement\")"
        );
        assert_eq!(
            message("pool.max_prepared_statements", "many"),
            "pool.max_prepared_statements: must be an integer, not \"many\""
        );
        assert!(message("pool.default_pool_size", "0").contains("at least 1"));
        assert_eq!(message("pool.bogus", "1"), "pool.bogus: unknown key");
        assert_eq!(message("nothing", "1"), "nothing: unknown key");
        assert!(message("databases.new.pool_mode", "session").contains("conninfo: required"));
        assert!(message("listen.tcp_keepalive", "maybe").contains("true or false"));
    }
}
