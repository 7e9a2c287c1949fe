//! The OS user names of peer logins' uids, kept a while.
//!
//! glibc's `getpwuid_r` reads `/etc/passwd` afresh at every call: a stat
//! of `nsswitch.conf`, then open, stat, seek, read and close, and a parse
//! of the file, six of a peer login's 17 system calls. A name looked up is
//! kept [`TTL`] (nscd keeps them ten minutes by default), so a storm of
//! peer logins from the same OS users reads the file once every few
//! seconds; a RELOAD loads new rules with an empty cache. A uid not found
//! is looked up again at every login.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a name looked up serves peer logins of the same uid.
pub const TTL: Duration = Duration::from_secs(10);

/// Names kept at most; past it the cache starts afresh (local OS users
/// are few; this only bounds what many uids could make it hold).
const MAX: usize = 1024;

/// Names by uid, each with when it was looked up.
#[derive(Debug, Default)]
pub struct OsNames {
    names: Mutex<HashMap<u32, (Arc<str>, Instant)>>,
}

impl OsNames {
    /// The name of `uid` as of `now`: one looked up less than `TTL` (ten
    /// seconds) before, else `lookup`'s (kept when found).
    pub fn name(
        &self,
        uid: u32,
        now: Instant,
        lookup: impl FnOnce(u32) -> Option<String>,
    ) -> Option<Arc<str>> {
        if let Ok(names) = self.names.lock() {
            if let Some((name, at)) = names.get(&uid) {
                if now.saturating_duration_since(*at) < TTL {
                    return Some(name.clone());
                }
            }
        }
        let name: Arc<str> = lookup(uid)?.into();
        if let Ok(mut names) = self.names.lock() {
            if names.len() >= MAX {
                names.clear();
            }
            names.insert(uid, (name.clone(), now));
        }
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_name_is_looked_up_again_only_once_it_is_older_than_the_ttl() {
        let names = OsNames::default();
        let lookups = Cell::new(0);
        let lookup = |uid: u32| {
            lookups.set(lookups.get() + 1);
            Some(format!("user{uid}"))
        };
        let t0 = Instant::now();
        assert_eq!(names.name(7, t0, lookup).as_deref(), Some("user7"));
        assert_eq!(
            names.name(7, t0 + TTL / 2, lookup).as_deref(),
            Some("user7")
        );
        // A login accepted before the lookup was made still takes it.
        assert_eq!(names.name(7, t0, lookup).as_deref(), Some("user7"));
        assert_eq!(lookups.get(), 1);
        assert_eq!(names.name(8, t0, lookup).as_deref(), Some("user8"));
        assert_eq!(lookups.get(), 2);
        assert_eq!(names.name(7, t0 + TTL, lookup).as_deref(), Some("user7"));
        assert_eq!(lookups.get(), 3);
    }

    #[test]
    fn a_uid_not_found_is_not_kept() {
        let names = OsNames::default();
        let lookups = Cell::new(0);
        let none = |_| {
            lookups.set(lookups.get() + 1);
            None
        };
        let t0 = Instant::now();
        assert_eq!(names.name(9, t0, none), None);
        assert_eq!(names.name(9, t0, none), None);
        assert_eq!(lookups.get(), 2);
        assert_eq!(
            names.name(9, t0, |_| Some("late".into())).as_deref(),
            Some("late")
        );
    }

    #[test]
    fn the_cache_stays_bounded() {
        let names = OsNames::default();
        let t0 = Instant::now();
        for uid in 0..(MAX as u32 * 3) {
            names.name(uid, t0, |uid| Some(uid.to_string()));
        }
        assert!(names.names.lock().unwrap().len() <= MAX);
    }
}
