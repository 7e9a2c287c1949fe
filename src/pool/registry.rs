//! Every pool, created on first use, and the limits pools share.

use std::collections::HashMap;
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
    pools: Mutex<HashMap<PoolKey, Arc<Pool>>>,
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
        key: &PoolKey,
        make: impl FnOnce() -> Result<Pool, String>,
    ) -> Result<Arc<Pool>, String> {
        let mut pools = self
            .pools
            .lock()
            .map_err(|_| "pool registry poisoned".to_string())?;
        if let Some(p) = pools.get(key) {
            return Ok(p.clone());
        }
        let p = Arc::new(make()?);
        pools.insert(key.clone(), p.clone());
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
