//! The parameters a server reports, kept per backend and per client.

use std::fmt;
use std::sync::{Arc, OnceLock};

use bytes::BytesMut;

use postgres_protocol::escape::escape_literal;

use crate::protocol::messages::ParameterStatus;
use crate::protocol::server;
use crate::protocol::sql::Setting;

/// Appends SQL that sets `name` to `value` as a startup packet does: the
/// value is given to the parameter as one string, so a list such as
/// `search_path=a,b` means two schemas (a `SET name TO 'a,b'` would make
/// it one schema called "a,b").
pub fn push_set_config(sql: &mut String, name: &str, value: &str) {
    sql.push_str("SELECT pg_catalog.set_config(");
    sql.push_str(&escape_literal(name));
    sql.push_str(", ");
    sql.push_str(&escape_literal(value));
    sql.push_str(", false);");
}

/// A backend's ParameterStatus values, in the order first reported (the
/// order a direct connection shows them in).
#[derive(Default)]
pub struct ParamSet {
    pairs: Vec<(String, String)>,
    /// The set as ParameterStatus messages, encoded for the first login
    /// shown it and reused by every later one until a value changes.
    wire: OnceLock<Box<[u8]>>,
}

impl Clone for ParamSet {
    /// A copy is made to be changed (copy-on-write): it encodes afresh.
    fn clone(&self) -> Self {
        ParamSet {
            pairs: self.pairs.clone(),
            wire: OnceLock::new(),
        }
    }
}

impl PartialEq for ParamSet {
    fn eq(&self, other: &Self) -> bool {
        self.pairs == other.pairs
    }
}

impl Eq for ParamSet {}

impl fmt::Debug for ParamSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl ParamSet {
    /// Value of a parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// All (name, value) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Every value as a ParameterStatus message, in order: what a login is
    /// shown.
    pub fn status_messages(&self) -> &[u8] {
        self.wire.get_or_init(|| {
            // Sized first: grown from empty, the buffer reallocated about
            // once a message, which cost more than writing them
            // (callgrind: over 8000 instructions a login that re-encodes).
            let size = self
                .iter()
                .map(|(name, value)| server::parameter_status_len(name, value))
                .sum();
            let mut out = BytesMut::with_capacity(size);
            for (name, value) in self.iter() {
                server::parameter_status(&mut out, name, value);
            }
            Vec::from(out).into_boxed_slice()
        })
    }

    /// Sets a value the server is known to report (ahead of its report).
    pub fn set(&mut self, name: &str, value: &str) {
        match self.pairs.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => {
                if v == value {
                    return;
                }
                *v = value.to_string();
            }
            None => self.pairs.push((name.to_string(), value.to_string())),
        }
        self.wire.take();
    }

    /// The value of `name`, matched as PostgreSQL matches parameter names
    /// (case-insensitively).
    pub fn get_ci(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Records a ParameterStatus body (`name\0value\0`) in a set that
    /// clients and backends may share; false if malformed. The set is
    /// copied only when the value changes: a report of the value it holds
    /// (the server confirming the pooler's own SET, say) keeps it shared,
    /// and the next checkout compares pointers instead of every value.
    pub fn apply_status(set: &mut Arc<ParamSet>, body: &[u8]) -> bool {
        let Ok(ps) = ParameterStatus::parse(body) else {
            return false;
        };
        let holds = set
            .pairs
            .iter()
            .any(|(k, v)| k.as_bytes() == ps.name && v.as_bytes() == ps.value);
        if !holds {
            Arc::make_mut(set).set(
                &String::from_utf8_lossy(ps.name),
                &String::from_utf8_lossy(ps.value),
            );
        }
        true
    }
}

/// A value the pooler gave a parameter on one backend, as it gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// A client's startup option, given with set_config.
    Startup(String),
    /// A client's own SET, replayed as written (`SET <sql>`).
    Sql(String),
    /// Changed in a way the pooler could not follow: whoever gets the
    /// backend next has it set again, or reset.
    Unknown,
}

/// The settings one backend has beyond its own defaults, as the pooler
/// gave them for its clients, by parameter (lower-case). A parameter not
/// here has the backend's default.
#[derive(Debug, Clone, Default)]
pub struct AppliedSet(Vec<(String, Applied)>);

impl AppliedSet {
    /// What `name` was given.
    pub fn get(&self, name: &str) -> Option<&Applied> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// Records that `name` was given `value`.
    pub fn set(&mut self, name: &str, value: Applied) {
        match self.0.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v = value,
            None => self.0.push((name.to_string(), value)),
        }
    }

    /// Records that `name` is back to the backend's default.
    pub fn remove(&mut self, name: &str) {
        self.0.retain(|(k, _)| k != name);
    }

    /// Every parameter is back to the backend's default.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The parameters given a value.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    /// True when nothing was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Records what a client's settings did on this backend: `lasted` took
    /// effect (their transactions committed); `voided` were undone, which
    /// the pooler trusts no further than to set those parameters again.
    pub fn settle(&mut self, lasted: &[Setting], voided: &[Setting]) {
        for s in lasted {
            match s {
                Setting::Set { name, sql } => self.set(name, Applied::Sql(sql.clone())),
                Setting::Reset { name } => self.remove(name),
                Setting::ResetAll => self.clear(),
            }
        }
        for s in voided {
            match s {
                Setting::Set { name, .. } | Setting::Reset { name } => {
                    self.set(name, Applied::Unknown)
                }
                Setting::ResetAll => {
                    for (_, v) in &mut self.0 {
                        *v = Applied::Unknown;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_of_the_value_held_keeps_the_set_shared() {
        let mut client = Arc::new(ParamSet::default());
        Arc::make_mut(&mut client).set("application_name", "pgbench");
        let mut backend = Arc::clone(&client);
        assert!(ParamSet::apply_status(
            &mut backend,
            b"application_name\0pgbench\0"
        ));
        assert!(Arc::ptr_eq(&backend, &client));
        assert!(ParamSet::apply_status(&mut backend, b"TimeZone\0UTC\0"));
        assert!(!Arc::ptr_eq(&backend, &client));
        assert_eq!(backend.get("TimeZone"), Some("UTC"));
        assert_eq!(client.get("TimeZone"), None);
        assert!(!ParamSet::apply_status(&mut backend, b"no terminator"));
    }

    /// The encoded messages follow every change, and a copy made to be
    /// changed does not carry the original's.
    #[test]
    fn status_messages_follow_the_values() {
        let encode = |set: &ParamSet| {
            let mut out = BytesMut::new();
            for (name, value) in set.iter() {
                server::parameter_status(&mut out, name, value);
            }
            out.to_vec()
        };
        let mut set = Arc::new(ParamSet::default());
        assert_eq!(set.status_messages(), b"");
        for body in [
            &b"TimeZone\0UTC\0"[..],
            b"application_name\0a\0",
            b"application_name\0a\0",
            b"TimeZone\0Europe/Paris\0",
        ] {
            let before = Arc::clone(&set);
            assert_eq!(before.status_messages(), encode(&before));
            assert!(ParamSet::apply_status(&mut set, body));
            assert_eq!(set.status_messages(), encode(&set));
            assert_eq!(before.status_messages(), encode(&before));
        }
        assert_eq!(
            set.status_messages(),
            b"S\0\0\0\x1aTimeZone\0Europe/Paris\0S\0\0\0\x17application_name\0a\0"
        );
        let mut copy = (*set).clone();
        copy.set("application_name", "b");
        assert_eq!(copy.status_messages(), encode(&copy));
        assert_ne!(copy.status_messages(), set.status_messages());
    }
}
