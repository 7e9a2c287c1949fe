//! Each pool's maintenance task, spawned with the pool and stopped when it
//! closes: it closes idle backends that are dead, past `server_lifetime` or
//! idle past `server_idle_timeout` (never below `min_pool_size`), and opens
//! backends until `min_pool_size` are open, retrying failures with a growing
//! pause so a PostgreSQL that is down is not hammered.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool::managed::{self, PoolError, Timeouts};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use super::manager::{close_idle, BackendManager, OpenError};
use super::tuning::Tuning;
use crate::backend::BackendError;

/// The longest pause between sweeps; shorter timeouts sweep more often.
const MAX_TICK: Duration = Duration::from_secs(1);
/// The shortest pause between sweeps.
const MIN_TICK: Duration = Duration::from_millis(50);
/// First pause after a failed attempt to open `min_pool_size` backends; it
/// doubles after each failure up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// What the task works on.
pub(super) struct Janitor {
    pub inner: managed::Pool<BackendManager>,
    /// The pool's `pool_size` permits: filling takes one per backend it
    /// holds, without queueing, so it never overtakes a waiting client.
    pub main: Arc<Semaphore>,
    pub paused: watch::Receiver<bool>,
    pub stop: CancellationToken,
    /// The pool's settings, read afresh each sweep (a reload changes them).
    pub tuning: watch::Receiver<Arc<Tuning>>,
}

impl Janitor {
    /// Runs until `stop` is cancelled.
    pub async fn run(self) {
        let mut retry = FIRST_RETRY;
        let mut next_fill = Instant::now();
        loop {
            let tuning = self.tuning.borrow().clone();
            let tick = [tuning.idle_timeout, tuning.lifetime]
                .iter()
                .filter(|d| !d.is_zero())
                .map(|d| *d / 4)
                .fold(MAX_TICK, Duration::min)
                .max(MIN_TICK);
            // Sleep first: a pool is created for a client that is about to
            // open its own backend, which min_pool_size must not duplicate.
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(tick) => {}
            }
            if *self.paused.borrow() {
                continue;
            }
            let tuning = self.tuning.borrow().clone();
            self.sweep(&tuning);
            let min_size = tuning.min_size.min(tuning.size);
            if min_size == 0 || Instant::now() < next_fill {
                continue;
            }
            let filled = tokio::select! {
                _ = self.stop.cancelled() => return,
                r = self.fill(min_size) => r,
            };
            match filled {
                Ok(()) => retry = FIRST_RETRY,
                Err(e) => {
                    let key = &self.inner.manager().key;
                    // The failure itself is logged (at WARN) where the
                    // backend failed to open; this says what comes next.
                    tracing::info!(
                        database = %key.database,
                        user = %key.user,
                        error = %e,
                        retry_in = ?retry,
                        "cannot open backends for min_pool_size"
                    );
                    next_fill = Instant::now() + retry;
                    retry = (retry * 2).min(MAX_RETRY);
                }
            }
        }
    }

    /// Closes idle backends that are dead, too old, or idle too long; the
    /// last kind only while more than `min_size` backends are open.
    fn sweep(&self, tuning: &Tuning) {
        let min_size = tuning.min_size.min(tuning.size);
        let mut spare = self.inner.status().size.saturating_sub(min_size);
        let mut reasons = Vec::new();
        let now = std::time::Instant::now();
        let removed = self.inner.retain(|p, _| {
            let why = p.unfit(tuning.lifetime, now).or_else(|| {
                let idle = !tuning.idle_timeout.is_zero()
                    && now.saturating_duration_since(p.idle_since) >= tuning.idle_timeout
                    && spare > 0;
                idle.then_some("server_idle_timeout reached")
            });
            match why {
                None => true,
                Some(why) => {
                    spare = spare.saturating_sub(1);
                    reasons.push(why);
                    false
                }
            }
        });
        for (pooled, why) in removed.removed.into_iter().zip(reasons) {
            close_idle(pooled, why);
        }
    }

    /// Opens backends until `min_size` are open, the pool is busy at its
    /// size, or a shared limit is reached. deadpool hands out idle backends
    /// before it opens one, so the idle ones met on the way are held until
    /// the new ones are open.
    async fn fill(&self, min_size: usize) -> Result<(), BackendError> {
        let no_wait = Timeouts {
            wait: Some(Duration::ZERO),
            create: None,
            recycle: None,
        };
        let mut held = Vec::new();
        let manager = self.inner.manager();
        // Backends a client is opening count too: no spare one for it.
        while self.inner.status().size + manager.opening.load(Ordering::Relaxed) < min_size {
            if *self.paused.borrow() {
                break;
            }
            let Ok(permit) = self.main.clone().try_acquire_owned() else {
                break;
            };
            // Opening never waits for a shared limit: a full one stops the fill.
            match self.inner.timeout_get(&no_wait).await {
                Ok(obj) => held.push((obj, permit)),
                Err(PoolError::Backend(OpenError::Backend(e))) => return Err(e),
                // A shared limit, no free slot, or the pool closed: not a failure.
                Err(_) => break,
            }
        }
        // Each backend goes back to the pool before its permit is freed.
        drop(held);
        if *self.paused.borrow() {
            // PAUSE promises no idle backends; it may have begun meanwhile.
            self.inner.retain(|_, _| false);
        }
        Ok(())
    }
}
