//! Limits shared by several pools: `max_db_connections` (every pool of one
//! database, whatever the user) and `max_user_connections` (every pool of
//! one backend user, whatever the database).
//!
//! A limit is a fair (FIFO) semaphore with one permit per backend; each open
//! backend holds its permits and gives them back when it closes. A pool that
//! needs a backend while the limit is reached closes the longest-idle backend
//! of another pool of the group to make room, as PgBouncer does, and
//! otherwise waits.
//!
//! Opening a backend never waits for a limit: the client that needs one
//! waits in its checkout and prepays the permits ([`Prepaid`]); the
//! maintenance task filling `min_pool_size` stops at a full limit.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool::managed::{Object, PoolError, WeakPool};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::manager::{close_idle, BackendManager, OpenError};
use super::PoolKey;

/// How often a client blocked by a shared limit looks again for an idle
/// backend to evict (or one of its own pool to take instead).
const LIMIT_RECHECK: Duration = Duration::from_millis(100);

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

impl BackendManager {
    /// The permits for a backend about to open, without waiting: a set a
    /// waiting client took, else one of every shared limit if all are free.
    pub(super) fn limits_now(&self) -> Result<Vec<OwnedSemaphorePermit>, OpenError> {
        if let Some(set) = self.prepaid.lock().ok().and_then(|mut p| p.pop()) {
            return Ok(set);
        }
        self.limits
            .iter()
            .map(|group| group.try_take().ok_or(OpenError::Limit))
            .collect()
    }

    /// Hands a client's permits to the next backend this pool opens.
    pub(super) fn prepay(&self, set: Vec<OwnedSemaphorePermit>) {
        if let Ok(mut p) = self.prepaid.lock() {
            p.push(set);
        }
    }

    /// Gives back one prepaid set a client ended up not using.
    pub(super) fn refund(&self) {
        let set = self.prepaid.lock().ok().and_then(|mut p| p.pop());
        drop(set);
    }

    /// Waits, as a client that must open a backend, for one permit of every
    /// shared limit, in a fixed order (database, then user) so two pools
    /// never wait on each other. While a limit is reached, the longest-idle
    /// backend of another pool of the group is closed to make room; if this
    /// pool itself has an idle backend, the caller takes that one instead
    /// (`None`).
    pub(super) async fn wait_for_limits(&self) -> Option<Vec<OwnedSemaphorePermit>> {
        let mut held = Vec::with_capacity(self.limits.len());
        for group in &self.limits {
            if let Some(p) = group.try_take() {
                held.push(p);
                continue;
            }
            let take = group.take();
            tokio::pin!(take);
            let permit = loop {
                if self.has_idle() {
                    return None;
                }
                if group.evict_idle(&self.key) {
                    tracing::debug!(limit = group.what(), "evicted an idle backend");
                }
                tokio::select! {
                    biased;
                    p = &mut take => break p,
                    _ = tokio::time::sleep(LIMIT_RECHECK) => {}
                }
            };
            // None only if the semaphore was closed, which it never is.
            held.extend(permit);
        }
        Some(held)
    }
}

/// Limit permits one checkout prepaid for a backend (see
/// `BackendManager::prepaid`), given back if no backend was opened with them.
pub(super) struct Prepaid<'a>(&'a BackendManager, bool);

impl<'a> Prepaid<'a> {
    /// Nothing paid yet.
    pub(super) fn new(manager: &'a BackendManager) -> Prepaid<'a> {
        Prepaid(manager, false)
    }

    /// Stages `set` for the next backend the pool opens.
    pub(super) fn pay(&mut self, set: Vec<OwnedSemaphorePermit>) {
        self.0.prepay(set);
        self.1 = true;
    }

    /// After a checkout attempt: whether it opened a backend (and so used a
    /// prepaid set) is told by a fresh object's recycle count, or by an
    /// open that failed. A full limit means the set was already taken by
    /// another opening.
    pub(super) fn settle(&mut self, got: &Result<Object<BackendManager>, PoolError<OpenError>>) {
        if !std::mem::take(&mut self.1) {
            return;
        }
        let opened = match got {
            Ok(obj) => Object::metrics(obj).recycle_count == 0,
            Err(PoolError::Backend(_)) => true,
            Err(_) => false,
        };
        if !opened {
            self.0.refund();
        }
    }
}

impl Drop for Prepaid<'_> {
    fn drop(&mut self) {
        // A checkout given up (query_wait_timeout) while its set was staged.
        if self.1 {
            self.0.refund();
        }
    }
}
