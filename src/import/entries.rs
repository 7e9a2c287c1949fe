//! `[databases]`, `[users]` and `[peers]` lines: PgBouncer's connect
//! strings split into the libpq keywords of a pgharbor conninfo and the
//! pool settings of a `[databases.NAME]` or `[users.NAME]` table, or a
//! `[peers]` line.

use super::out::{Doc, Value};
use super::settings;
use super::Notes;
use crate::config::{join_keyword_pairs, split_keyword_pairs};

/// `[pgbouncer]` keys that PgBouncer applies to its server connections,
/// and the libpq keyword each becomes in every database's conninfo.
pub const BACKEND_KEYS: &[(&str, &str)] = &[
    ("server_tls_sslmode", "sslmode"),
    ("server_tls_ca_file", "sslrootcert"),
    ("server_tls_cert_file", "sslcert"),
    ("server_tls_key_file", "sslkey"),
    ("server_tls_protocols", "ssl_min_protocol_version"),
    ("tcp_keepalive", "keepalives"),
    ("tcp_keepidle", "keepalives_idle"),
    ("tcp_keepintvl", "keepalives_interval"),
    ("tcp_keepcnt", "keepalives_count"),
    ("tcp_user_timeout", "tcp_user_timeout"),
];

/// Connect-string keys that are libpq keywords of the same meaning.
const LIBPQ: &[&str] = &[
    "host",
    "port",
    "user",
    "password",
    "dbname",
    "application_name",
    "client_encoding",
];

/// Connect-string keys that become a table key of the same name.
const POOL_KEYS: &[&str] = &[
    "pool_size",
    "min_pool_size",
    "reserve_pool_size",
    "max_db_connections",
    "pool_mode",
];

/// Per-user keys pgharbor has.
const USER_KEYS: &[&str] = &["pool_mode", "max_user_connections"];

/// One `[databases]` line: `name = connect string`.
pub fn database(
    doc: &mut Doc,
    notes: &mut Notes,
    name: &str,
    connstr: &str,
    backend: &[(&str, String)],
    at: &str,
) {
    let what = format!("[databases] {name}");
    let pairs = match split_keyword_pairs(connstr) {
        Ok(p) => p,
        Err(e) => {
            notes.differs(at, &what, format!("not imported: {e}"));
            return;
        }
    };
    let mut libpq: Vec<(String, String)> = Vec::new();
    let mut startup_options: Vec<String> = Vec::new();
    let table = ["databases", name];
    for (key, value) in pairs {
        let key = key.to_ascii_lowercase();
        match key.as_str() {
            k if LIBPQ.contains(&k) => libpq.push((key, value)),
            // PgBouncer sends these as startup parameters of its own.
            "datestyle" | "timezone" => {
                let param = if key == "datestyle" {
                    "DateStyle"
                } else {
                    "TimeZone"
                };
                startup_options.push(format!("-c {param}={}", value.replace(' ', "\\ ")));
            }
            k if POOL_KEYS.contains(&k) => match pool_value(k, &value) {
                Ok(v) => doc.set(&table, k, v, format!("{at}: {key}={value}")),
                Err(reason) => notes.differs(at, &format!("{what}: {key}"), reason),
            },
            "reserve_pool" => match pool_value("reserve_pool_size", &value) {
                Ok(v) => doc.set(
                    &table,
                    "reserve_pool_size",
                    v,
                    format!("{at}: {key}={value}"),
                ),
                Err(reason) => notes.differs(at, &format!("{what}: {key}"), reason),
            },
            _ => notes.differs(at, &format!("{what}: {key}"), connstr_reason(&key)),
        }
    }
    if !startup_options.is_empty() {
        libpq.push(("options".into(), startup_options.join(" ")));
    }
    if !libpq.iter().any(|(k, _)| k == "host") {
        notes.same(
            at,
            &what,
            "no host: pgharbor connects to /var/run/postgresql; PgBouncer to the socket directory it was built with",
        );
    }
    for (keyword, value) in backend {
        if !libpq.iter().any(|(k, _)| k == keyword) {
            libpq.push((keyword.to_string(), value.clone()));
        }
    }
    let conninfo = join_keyword_pairs(libpq.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    doc.set(
        &table,
        "conninfo",
        Value::Str(conninfo),
        format!("{at}: {name}"),
    );
}

/// One `[users]` line: `name = key=value ...`.
pub fn user(doc: &mut Doc, notes: &mut Notes, name: &str, settings_text: &str, at: &str) {
    let what = format!("[users] {name}");
    let pairs = match split_keyword_pairs(settings_text) {
        Ok(p) => p,
        Err(e) => {
            notes.differs(at, &what, format!("not imported: {e}"));
            return;
        }
    };
    for (key, value) in pairs {
        let key = key.to_ascii_lowercase();
        if !USER_KEYS.contains(&key.as_str()) {
            let reason = match key.as_str() {
                "pool_size" | "reserve_pool_size" => {
                    "pool sizes are per database; max_user_connections limits a user"
                }
                "max_user_client_connections" => "only max_client_conn limits clients",
                _ => "not a per-user setting of pgharbor",
            };
            notes.differs(at, &format!("{what}: {key}"), reason);
            continue;
        }
        match pool_value(&key, &value) {
            Ok(v) => doc.set(&["users", name], &key, v, format!("{at}: {key}={value}")),
            Err(reason) => notes.differs(at, &format!("{what}: {key}"), reason),
        }
    }
}

/// One `[peers]` line: `id = host=... port=...`. `peering` says whether
/// `peer_id` is set, without which PgBouncer ignores the section.
pub fn peer(doc: &mut Doc, notes: &mut Notes, peering: bool, id: &str, connstr: &str, at: &str) {
    let what = format!("[peers] {id}");
    if !peering {
        notes.same(
            at,
            &what,
            "peer_id is not set: PgBouncer ignores [peers] then",
        );
        return;
    }
    let pairs = match split_keyword_pairs(connstr) {
        Ok(p) => p,
        Err(e) => {
            notes.differs(at, &what, format!("not imported: {e}"));
            return;
        }
    };
    let mut kept: Vec<(String, String)> = Vec::new();
    for (key, value) in pairs {
        let key = key.to_ascii_lowercase();
        match key.as_str() {
            "host" | "port" => kept.push((key, value)),
            "pool_size" => notes.same(
                at,
                &format!("{what}: {key}"),
                "each forwarded cancel opens its own connection to the peer",
            ),
            _ => notes.differs(at, &format!("{what}: {key}"), "not a PgBouncer peer key"),
        }
    }
    let conninfo = join_keyword_pairs(kept.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    doc.set(&["peers"], id, Value::Str(conninfo), format!("{at}: {id}"));
}

/// The conninfo keywords `[pgbouncer]`'s server-side settings give every
/// database, in libpq's spelling.
pub fn backend_pairs(
    lookup: impl Fn(&str) -> Option<(String, String)>,
    notes: &mut Notes,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (key, keyword) in BACKEND_KEYS {
        let Some((value, at)) = lookup(key).filter(|(v, _)| !v.is_empty()) else {
            continue;
        };
        let converted = match *keyword {
            "ssl_min_protocol_version" => settings::lowest_protocol(&value),
            "keepalives" => match value.as_str() {
                "0" | "no" | "off" | "false" => Ok("0".into()),
                _ => Ok("1".into()),
            },
            // libpq's own unit for all of these is the PgBouncer one.
            _ => Ok(value.clone()),
        };
        match converted {
            // PgBouncer's 0 for a keepalive knob means the system default,
            // which is what an absent libpq keyword means too.
            Ok(v) if v == "0" && keyword.starts_with("keepalives_") => {}
            Ok(v) => out.push((*keyword, v)),
            Err(reason) => notes.differs(&at, key, reason),
        }
    }
    out
}

fn pool_value(key: &str, value: &str) -> Result<Value, String> {
    if key == "pool_mode" {
        return settings::convert(settings::Conv::PoolMode, value);
    }
    settings::convert(settings::Conv::Int, value)
}

fn connstr_reason(key: &str) -> &'static str {
    match key {
        "auth_user" | "auth_query" | "auth_dbname" => {
            "per-database lookups are not supported: set [auth] user, query and dbname"
        }
        "connect_query" => "no query is run on new backends",
        "max_db_client_connections" => "only max_client_conn limits clients",
        "server_lifetime" => "server_lifetime is set for all databases in [pool]",
        "load_balance_hosts" => {
            "PgBouncer's round-robin is not libpq's random: add load_balance_hosts=random by hand"
        }
        _ => "not a PgBouncer connect-string key pgharbor knows",
    }
}
