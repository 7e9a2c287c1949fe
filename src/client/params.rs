//! Making a pooled backend's session parameters match what a client asked
//! for in its StartupMessage, so that it sees what a direct connection shows.

use std::sync::Arc;

use super::error::ClientError;
use crate::backend::{push_set_config, Link, ParamSet};
use crate::pool::Pool;
use crate::protocol::frontend::StartupMessage;
use crate::protocol::{PgError, Violation};

/// Startup keys that are not session parameters.
const NOT_PARAMS: &[&str] = &["user", "database", "replication", "options"];

/// The (name, value) settings a StartupMessage asks for, including `-c name=value`
/// (and `--name=value`) switches in `options`.
pub fn requested(startup: &StartupMessage) -> Result<Vec<(String, String)>, ClientError> {
    let mut out: Vec<(String, String)> = startup
        .params
        .iter()
        .filter(|(k, _)| !NOT_PARAMS.contains(&k.as_str()))
        .cloned()
        .collect();
    if let Some(options) = startup.get("options") {
        out.extend(parse_options(options)?);
    }
    Ok(out)
}

/// Splits libpq's `options` the way PostgreSQL's pg_split_opts does (whitespace,
/// backslash escapes) and keeps the `-c name=value` settings.
fn parse_options(options: &str) -> Result<Vec<(String, String)>, ClientError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut chars = options.chars();
    let mut in_word = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    in_word = true;
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    let mut out = Vec::new();
    let mut it = words.into_iter();
    while let Some(w) = it.next() {
        let setting = if w == "-c" {
            it.next()
        } else {
            w.strip_prefix("-c")
                .or_else(|| w.strip_prefix("--"))
                .map(str::to_string)
        };
        let bad = || {
            ClientError::Refused(PgError::fatal(
                "08P01",
                format!("unsupported startup option \"{w}\": pgharbor accepts only -c name=value"),
            ))
        };
        let setting = setting.ok_or_else(bad)?;
        let (name, value) = setting.split_once('=').ok_or_else(bad)?;
        out.push((name.replace('-', "_"), value.to_string()));
    }
    Ok(out)
}

/// True when PostgreSQL reports `value` back verbatim and cannot refuse it:
/// an application_name of printable ASCII shorter than NAMEDATALEN. Such a
/// SET can be pipelined ahead of the client's first message instead of
/// costing a round trip at login.
fn predictable(name: &str, value: &str) -> bool {
    name == "application_name"
        && value.len() < 64
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// Issues SET for every requested parameter whose reported value differs.
/// A SET whose outcome is certain is only sent (its reply is read at the start
/// of the relay); the others are waited for, so that a refused value fails
/// the login as it would on PostgreSQL and the client sees canonical values.
pub async fn apply(backend: &mut Link, wanted: &[(String, String)]) -> Result<(), ClientError> {
    // A backend opened with another client's application_name keeps it
    // across resets; a client that sent none sees '' as on a direct login.
    let unnamed = backend.hinted_app_name() && !wanted.iter().any(|(k, _)| k == "application_name");
    let settings = || {
        let pairs = wanted.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        pairs.chain(unnamed.then_some(("application_name", "")))
    };
    let mut sync_sql = String::new();
    let mut pipelined_sql = String::new();
    for (name, value) in settings() {
        let same = backend.param(name).is_some_and(|v| {
            v == value || (name == "client_encoding" && v.eq_ignore_ascii_case(value))
        });
        if same {
            continue;
        }
        if name.contains('\0') || value.contains('\0') {
            return Err(ClientError::Protocol(Violation::new(
                "NUL byte in startup parameter",
            )));
        }
        let sql = if predictable(name, value) {
            &mut pipelined_sql
        } else {
            &mut sync_sql
        };
        push_set_config(sql, name, value);
    }
    if !pipelined_sql.is_empty() {
        let set: Vec<(&str, &str)> = settings().filter(|(n, v)| predictable(n, v)).collect();
        backend.queue_settings(&pipelined_sql, &set)?;
    }
    if sync_sql.is_empty() {
        return Ok(());
    }
    backend
        .run_queries(&[&sync_sql], crate::backend::PoolerStatement::Settings)
        .await
        .map_err(|e| match e {
            crate::backend::BackendError::Server(s) => {
                let code = if s.code == "42704" { "42704" } else { "22023" };
                ClientError::Refused(PgError::fatal(code, s.message))
            }
            other => ClientError::Backend(other),
        })
}

/// The parameters a client would see at login, from what earlier logins of
/// its pool taught us; `None` when a backend must check its values (a
/// value never seen before, or a pool with no backend opened yet).
pub fn without_backend(pool: &Pool, wanted: &[(String, String)]) -> Option<Arc<ParamSet>> {
    let cache = pool.param_cache();
    if let Some(shown) = cache.shown_for(wanted) {
        return Some(shown);
    }
    let mut shown = cache.base()?;
    for (name, value) in wanted {
        if name.contains('\0') || value.contains('\0') {
            return None;
        }
        let reported = shown.get_ci(name).map(str::to_string);
        let accepted = cache
            .accepted(name, value)
            .or_else(|| (reported.as_deref() == Some(value.as_str())).then(|| value.clone()))
            .or_else(|| predictable(name, value).then(|| value.clone()))?;
        if reported.is_some() {
            let key = shown_name(&shown, name);
            shown.set(&key, &accepted);
        }
    }
    // A direct login without application_name shows it empty, whatever the
    // backend the pool opened first was called.
    if !wanted.iter().any(|(k, _)| k == "application_name") {
        shown.set("application_name", "");
    }
    let shown = Arc::new(shown);
    cache.remember_shown(wanted, &shown);
    Some(shown)
}

/// The name as the server reports it (`DateStyle` for `datestyle`).
fn shown_name(shown: &ParamSet, name: &str) -> String {
    shown
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map_or_else(|| name.to_string(), |(k, _)| k.to_string())
}

/// Remembers what the server made of each requested value.
pub fn learn(pool: &Pool, wanted: &[(String, String)], backend: &Link) {
    let cache = pool.param_cache();
    for (name, value) in wanted {
        let reported = backend.ledger_ref().params().get_ci(name).unwrap_or(value);
        cache.learn(name, value, reported);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libpq_options() {
        assert_eq!(
            parse_options("-c search_path=a\\ b --work-mem=4MB -cstatement_timeout=5").unwrap(),
            vec![
                ("search_path".into(), "a b".into()),
                ("work_mem".into(), "4MB".into()),
                ("statement_timeout".into(), "5".into()),
            ]
        );
        assert!(parse_options("-d 5").is_err());
        assert!(parse_options("-c novalue").is_err());
        assert!(parse_options("  ").unwrap().is_empty());
    }
}
