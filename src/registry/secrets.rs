//! Secrets `auth.query` looked up, kept for `auth.query_cache_ttl`, and the
//! bound on lookups running at once. A miss ("no such user") is kept too:
//! a client trying names must not turn each attempt into a query.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::auth::Secret;

/// Most answers kept; past it the oldest half is dropped (a client
/// inventing names cannot grow the pooler's memory).
const MAX_ENTRIES: usize = 10_000;

/// What a lookup found: the user's secret, or `None` for no such user (or
/// a user without a password).
pub type Found = Option<Arc<Secret>>;

/// The looked-up secrets and the lookup slots.
#[derive(Debug)]
pub struct SecretCache {
    answers: Mutex<HashMap<String, (Instant, Found)>>,
    /// One permit per lookup allowed to run (`auth.query_concurrency`).
    pub slots: Semaphore,
}

impl SecretCache {
    /// An empty cache allowing `concurrency` lookups at once.
    pub fn new(concurrency: usize) -> SecretCache {
        SecretCache {
            answers: Mutex::default(),
            slots: Semaphore::new(concurrency.max(1)),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, (Instant, Found)>) -> R) -> R {
        match self.answers.lock() {
            Ok(mut m) => f(&mut m),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    /// The answer for `user` if one younger than `ttl` is kept.
    pub fn get(&self, user: &str, ttl: Duration) -> Option<Found> {
        self.with(|m| match m.get(user) {
            Some((at, found)) if at.elapsed() < ttl => Some(found.clone()),
            _ => None,
        })
    }

    /// Keeps `found` as the answer for `user`.
    pub fn put(&self, user: &str, found: Found) {
        self.with(|m| {
            if m.len() >= MAX_ENTRIES && !m.contains_key(user) {
                let mut ages: Vec<Instant> = m.values().map(|(at, _)| *at).collect();
                ages.sort_unstable();
                let cut = ages[ages.len() / 2];
                m.retain(|_, (at, _)| *at > cut);
            }
            m.insert(user.to_string(), (Instant::now(), found));
        });
    }

    /// Forgets every answer (a reload may have changed the query or the
    /// database it runs in).
    pub fn clear(&self) {
        self.with(HashMap::clear);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_last_their_ttl_and_misses_are_kept_too() {
        let c = SecretCache::new(2);
        let secret = Secret::parse("md5aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
            .ok()
            .map(Arc::new);
        c.put("alice", secret);
        c.put("nobody", None);
        let long = Duration::from_secs(60);
        assert!(matches!(c.get("alice", long), Some(Some(_))));
        assert!(matches!(c.get("nobody", long), Some(None)));
        assert!(c.get("carol", long).is_none(), "never looked up");
        assert!(
            c.get("alice", Duration::ZERO).is_none(),
            "ttl 0: always look up"
        );
        c.clear();
        assert!(c.get("alice", long).is_none());
    }

    #[test]
    fn invented_names_cannot_grow_it_past_its_bound() {
        let c = SecretCache::new(1);
        for i in 0..(MAX_ENTRIES + 10) {
            c.put(&format!("user{i}"), None);
        }
        assert!(c.with(|m| m.len()) <= MAX_ENTRIES);
        let last = format!("user{}", MAX_ENTRIES + 9);
        assert!(c.get(&last, Duration::from_secs(60)).is_some());
    }
}
