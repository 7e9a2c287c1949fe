//! Every pool, created on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Pool, PoolKey};

/// Every pool, created on first use.
#[derive(Default)]
pub struct PoolRegistry {
    pools: Mutex<HashMap<PoolKey, Arc<Pool>>>,
}

impl PoolRegistry {
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
