//! The parameters a server reports, kept per backend and per client.

use std::sync::Arc;

use postgres_protocol::escape::escape_literal;

use crate::protocol::messages::ParameterStatus;
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamSet(Vec<(String, String)>);

impl ParamSet {
    /// Value of a parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// All (name, value) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Sets a value the server is known to report (ahead of its report).
    pub fn set(&mut self, name: &str, value: &str) {
        match self.0.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => {
                if v != value {
                    *v = value.to_string();
                }
            }
            None => self.0.push((name.to_string(), value.to_string())),
        }
    }

    /// The value of `name`, matched as PostgreSQL matches parameter names
    /// (case-insensitively).
    pub fn get_ci(&self, name: &str) -> Option<&str> {
        self.0
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
            .0
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
}
