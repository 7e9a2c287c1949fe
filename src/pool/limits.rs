//! Limits shared by several pools: `max_db_connections` (every pool of one
//! database, whatever the user) and `max_user_connections` (every pool of
//! one backend user, whatever the database).
//!
//! A limit is a fair (FIFO) semaphore with one permit per backend; each open
//! backend holds its permits and gives them back when it closes. A pool that
//! needs a backend while the limit is reached closes the longest-idle backend
//! of another pool of the group to make room, as PgBouncer does, and
//! otherwise waits.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use deadpool::managed::WeakPool;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::manager::{close_idle, BackendManager};
use super::PoolKey;

/// One shared limit and the pools it covers.
pub struct LimitGroup {
    /// What is limited, for logs: `max_db_connections of database "app"`.
    what: String,
    max: usize,
    permits: Arc<Semaphore>,
    members: Mutex<Vec<(PoolKey, WeakPool<BackendManager>)>>,
}

impl std::fmt::Debug for LimitGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimitGroup")
            .field("what", &self.what)
            .field("max", &self.max)
            .field("available", &self.permits.available_permits())
            .finish()
    }
}

impl LimitGroup {
    /// A limit of `max` backends (at least 1), described by `what`.
    pub fn new(what: String, max: usize) -> LimitGroup {
        LimitGroup {
            what,
            max,
            permits: Arc::new(Semaphore::new(max)),
            members: Mutex::new(Vec::new()),
        }
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Backends counted against the limit now.
    pub fn in_use(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    /// What is limited, for logs and errors.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Adds a pool to the group, so its idle backends can be evicted for others.
    pub(super) fn join(&self, key: PoolKey, pool: WeakPool<BackendManager>) {
        if let Ok(mut m) = self.members.lock() {
            m.push((key, pool));
        }
    }

    /// A permit if one is free and nobody is queued for it.
    pub(super) fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }

    /// Waits for a permit, first come first served.
    pub(super) async fn take(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().acquire_owned().await.ok()
    }

    /// Closes the longest-idle backend of a pool in this group other than
    /// `except`; false if none of them has an idle backend.
    pub(super) fn evict_idle(&self, except: &PoolKey) -> bool {
        let members: Vec<_> = match self.members.lock() {
            Ok(m) => m
                .iter()
                .filter(|(k, _)| k != except)
                .filter_map(|(_, w)| w.upgrade())
                .collect(),
            Err(_) => return false,
        };
        // The front of each pool's queue has been idle longest there.
        let mut oldest: Option<(Instant, usize)> = None;
        for (i, pool) in members.iter().enumerate() {
            let mut front = None;
            pool.retain(|p, _| {
                front.get_or_insert(p.idle_since);
                true
            });
            if let Some(t) = front {
                if oldest.is_none_or(|(o, _)| t < o) {
                    oldest = Some((t, i));
                }
            }
        }
        let Some((_, i)) = oldest else { return false };
        let mut first = true;
        let removed = members[i].retain(|_, _| !std::mem::take(&mut first));
        let evicted = !removed.removed.is_empty();
        for pooled in removed.removed {
            close_idle(pooled, &format!("evicted: {} reached", self.what));
        }
        evicted
    }
}
