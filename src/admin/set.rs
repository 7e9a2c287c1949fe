//! `SET key = value`: one key of the running configuration changed, the
//! way a RELOAD of a file with that value would change it (the new
//! configuration goes through [`Pooler::reload_from`]). Only keys a reload
//! applies at once or to new logins can be SET; a key that waits for new
//! pools or a restart is refused, as SET could not keep its promise. A
//! later RELOAD reads the file again, which undoes the SET (as in PgBouncer).
//! Like a RELOAD, a SET loads the auth file and certificate the
//! configuration names afresh, so changes made to those files take effect too.

use super::Admin;
use crate::config::keys::{self, Reload};
use crate::config::ConfigError;
use crate::pooler::{Pooler, PoolerError};
use crate::protocol::PgError;

/// Why a SET did not take.
enum Refused {
    /// The value does not validate.
    Value(ConfigError),
    /// The configuration that names it could not be loaded (its auth file
    /// or certificate).
    Load(PoolerError),
}

impl From<PoolerError> for Refused {
    fn from(e: PoolerError) -> Refused {
        Refused::Load(e)
    }
}

/// `SET key = value`, `key` a dotted name as SHOW CONFIG shows it.
pub async fn set(pooler: &Pooler, key: &str, value: &str, _: &Admin) -> Result<(), PgError> {
    let Some(row) = keys::for_path(key) else {
        return Err(unknown(key));
    };
    match row.reload {
        Reload::Immediate | Reload::NewLogins => {}
        Reload::Restart => {
            return Err(PgError::error(
                "55P02",
                format!("parameter \"{key}\" cannot be changed without restarting the pooler"),
            ))
        }
        Reload::NewPools => {
            return Err(PgError::error(
                "55P02",
                format!("parameter \"{key}\" cannot be changed with SET: it applies only to pools created after it changes"),
            )
            .with_hint("Change it in the config file and RELOAD; pools created after that use it."))
        }
    }
    let changed = pooler
        .reload_from(|c| c.with_setting(key, value).map_err(Refused::Value))
        .await;
    match changed {
        Ok(()) => {
            tracing::info!(
                key,
                reload = row.reload.as_str(),
                "SET on the admin console"
            );
            Ok(())
        }
        Err(Refused::Value(e)) => Err(PgError::error(
            "22023",
            format!("invalid value for parameter \"{key}\": {e}"),
        )),
        Err(Refused::Load(e)) => Err(PgError::error("22023", format!("SET {key} failed: {e}"))
            .with_hint("The configuration in force is unchanged.")),
    }
}

/// 42704 for a key the table does not have, naming the dotted key when the
/// user wrote a bare (PgBouncer-style) name.
fn unknown(key: &str) -> PgError {
    let e = PgError::error(
        "42704",
        format!("unrecognized configuration parameter \"{key}\""),
    );
    let dotted: Vec<String> = keys::all()
        .filter(|k| k.name == key)
        .map(|k| k.dotted())
        .collect();
    if dotted.is_empty() {
        e.with_hint("SHOW CONFIG lists the keys, by their dotted names (pool.mode, databases.NAME.pool_size).")
    } else {
        e.with_hint(format!("Keys have dotted names: {}.", dotted.join(", ")))
    }
}
