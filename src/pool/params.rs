//! What a pool knows about session parameters, so that in transaction
//! pooling a client can log in without a backend: the values a fresh backend
//! reports, and the values PostgreSQL accepted (and how it spelled them) for
//! what earlier clients asked in their startup packets.
//!
//! Logging in without a backend is what PgBouncer does too; it matters
//! because many clients connect synchronously (pgbench -C does), and a login
//! that waits for a backend held by a transaction of another client of the
//! same process would wait forever.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::backend::ParamSet;

/// Accepted (name, value) pairs remembered before the map starts over.
const LIMIT: usize = 4096;

/// Startup parameters asked, and the parameter set shown for them.
type Shown = (Vec<(String, String)>, Arc<ParamSet>);

/// Parameter knowledge of one pool.
#[derive(Default)]
pub struct ParamCache {
    /// ParameterStatus set of the first backend opened (the server's defaults
    /// for this pool's startup parameters).
    base: Mutex<Option<ParamSet>>,
    /// (name, value as a client asked) → value as PostgreSQL reported it
    /// (the same value for parameters it does not report).
    accepted: Mutex<HashMap<(String, String), String>>,
    /// The last parameter set shown at a login without backend, and the
    /// startup parameters it answered: clients of one application ask the
    /// same, and share one copy.
    last_shown: Mutex<Option<Shown>>,
}

impl ParamCache {
    /// Records a fresh backend's parameters, once.
    pub fn set_base_once(&self, params: &ParamSet) {
        if let Ok(mut b) = self.base.lock() {
            if b.is_none() {
                *b = Some(params.clone());
            }
        }
    }

    /// A fresh backend's parameters, if one was ever opened.
    pub fn base(&self) -> Option<ParamSet> {
        self.base.lock().ok().and_then(|b| b.clone())
    }

    /// Records that the server accepted `requested` for `name` and reports
    /// it as `reported`.
    pub fn learn(&self, name: &str, requested: &str, reported: &str) {
        if let Ok(mut m) = self.accepted.lock() {
            if m.len() >= LIMIT {
                m.clear();
            }
            m.insert(
                (name.to_ascii_lowercase(), requested.to_string()),
                reported.to_string(),
            );
        }
    }

    /// The set shown last for exactly `wanted`, if any.
    pub fn shown_for(&self, wanted: &[(String, String)]) -> Option<Arc<ParamSet>> {
        let last = self.last_shown.lock().ok()?;
        match &*last {
            Some((w, shown)) if w == wanted => Some(shown.clone()),
            _ => None,
        }
    }

    /// Remembers the set shown for `wanted`.
    pub fn remember_shown(&self, wanted: &[(String, String)], shown: &Arc<ParamSet>) {
        if let Ok(mut last) = self.last_shown.lock() {
            *last = Some((wanted.to_vec(), shown.clone()));
        }
    }

    /// How the server reports `requested` for `name`, if it accepted it before.
    pub fn accepted(&self, name: &str, requested: &str) -> Option<String> {
        let m = self.accepted.lock().ok()?;
        m.get(&(name.to_ascii_lowercase(), requested.to_string()))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_base_once_and_accepted_values_case_insensitively() {
        let c = ParamCache::default();
        assert!(c.base().is_none());
        let mut p = ParamSet::default();
        p.set("TimeZone", "UTC");
        c.set_base_once(&p);
        let mut q = ParamSet::default();
        q.set("TimeZone", "Europe/Paris");
        c.set_base_once(&q);
        assert_eq!(
            c.base().and_then(|b| b.get("TimeZone").map(str::to_string)),
            Some("UTC".into())
        );
        c.learn("DateStyle", "iso", "ISO, MDY");
        assert_eq!(c.accepted("datestyle", "iso").as_deref(), Some("ISO, MDY"));
        assert_eq!(c.accepted("datestyle", "ISO"), None);
    }
}
