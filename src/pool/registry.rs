//! Every pool, created on first use, and the limits pools share.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use super::{LimitGroup, Pool, PoolKey};
use crate::auth::SaltedPasswordCache;
use crate::backend::BackendIds;
use crate::stats::Stats;

/// Salted passwords kept across backend logins (PBKDF2 is the costly part).
const SCRAM_CACHE_ENTRIES: usize = 1024;

/// Every pool, created on first use, and what all pools share.
pub struct PoolRegistry {
    /// Where every pool counts connects and closes.
    pub(super) stats: Arc<Stats>,
    /// Salted passwords for SCRAM logins to PostgreSQL, shared by all pools.
    pub(super) scram_cache: Arc<SaltedPasswordCache>,
    /// Backend ids, unique across the pools.
    pub(super) backend_ids: Arc<BackendIds>,
    pools: Mutex<foldhash::HashMap<PoolKey, Arc<Pool>>>,
    /// `max_db_connections`, by database name.
    db_limits: Mutex<HashMap<String, Arc<LimitGroup>>>,
    /// `max_user_connections`, by backend user.
    user_limits: Mutex<HashMap<String, Arc<LimitGroup>>>,
}

impl PoolRegistry {
    /// No pools yet; every pool will count into `stats`.
    pub fn new(stats: Arc<Stats>) -> PoolRegistry {
        PoolRegistry {
            stats,
            scram_cache: Arc::new(SaltedPasswordCache::new(SCRAM_CACHE_ENTRIES)),
            backend_ids: Arc::default(),
            pools: Mutex::default(),
            db_limits: Mutex::default(),
            user_limits: Mutex::default(),
        }
    }

    /// The pool for `key`, created by `make` if it does not exist yet.
    pub fn get_or_create(
        &self,
        (database, user): (&str, &str),
        make: impl FnOnce(&PoolKey) -> Result<Pool, String>,
    ) -> Result<Arc<Pool>, String> {
        let mut pools = self
            .pools
            .lock()
            .map_err(|_| "pool registry poisoned".to_string())?;
        // Looked up by the login's own strings: a key is built only for a
        // pool that does not exist yet.
        if let Some(p) = pools.get(&(database, user) as &dyn KeyView) {
            return Ok(p.clone());
        }
        let key = PoolKey {
            database: database.to_string(),
            user: user.to_string(),
        };
        let p = Arc::new(make(&key)?);
        pools.insert(key, p.clone());
        Ok(p)
    }

    /// The shared limits a new pool for `key` counts against: its
    /// database's (`max_db`) and its user's (`max_user`), 0 meaning none.
    /// A limit keeps the value it had when its first pool was created.
    pub fn limits_for(
        &self,
        key: &PoolKey,
        max_db: usize,
        max_user: usize,
    ) -> Vec<Arc<LimitGroup>> {
        let group = |map: &Mutex<HashMap<String, Arc<LimitGroup>>>, name: &str, max, what| {
            let mut map = map.lock().ok()?;
            if let Some(g) = map.get(name) {
                return Some(g.clone());
            }
            if max == 0 {
                return None;
            }
            let g = Arc::new(LimitGroup::new(format!("{what} \"{name}\""), max));
            map.insert(name.to_string(), g.clone());
            Some(g)
        };
        let db = group(
            &self.db_limits,
            &key.database,
            max_db,
            "max_db_connections of database",
        );
        let user = group(
            &self.user_limits,
            &key.user,
            max_user,
            "max_user_connections of user",
        );
        db.into_iter().chain(user).collect()
    }

    /// A snapshot of all pools.
    pub fn all(&self) -> Vec<Arc<Pool>> {
        self.pools
            .lock()
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Closes every pool.
    pub fn close_all(&self) {
        for p in self.all() {
            p.close();
        }
    }
}

/// A pool's key as two borrowed strings, so that the map can be searched
/// with the strings a login has (see [`PoolRegistry::get_or_create`]).
trait KeyView {
    fn view(&self) -> (&str, &str);
}

impl KeyView for PoolKey {
    fn view(&self) -> (&str, &str) {
        (&self.database, &self.user)
    }
}

impl KeyView for (&str, &str) {
    fn view(&self) -> (&str, &str) {
        *self
    }
}

impl<'a> Borrow<dyn KeyView + 'a> for PoolKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

impl Hash for dyn KeyView + '_ {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.view().hash(h);
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.view() == other.view()
    }
}

impl Eq for dyn KeyView + '_ {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;

    /// A key and its borrowed view hash and compare alike, so a map of keys
    /// is searched with borrowed strings; names that only join alike
    /// ("ab" + "c", "a" + "bc") stay apart.
    #[test]
    fn a_key_is_found_by_its_borrowed_strings() {
        let hasher = RandomState::new();
        let key = |d: &str, u: &str| PoolKey {
            database: d.into(),
            user: u.into(),
        };
        let view = |d, u| -> Box<dyn KeyView> { Box::new((d, u)) };
        assert_eq!(
            hasher.hash_one(key("app", "bob")),
            hasher.hash_one(&*view("app", "bob"))
        );
        let mut map = HashMap::new();
        map.insert(key("ab", "c"), 1);
        map.insert(key("a", "bc"), 2);
        assert_eq!(map.get(&*view("ab", "c")), Some(&1));
        assert_eq!(map.get(&*view("a", "bc")), Some(&2));
        assert_eq!(map.get(&*view("abc", "")), None);
    }
}
