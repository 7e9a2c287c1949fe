//! The cancel keys pgharbor shows its clients, and where each one points.
//!
//! A client never sees a backend's real key: it gets one of ours, and the
//! slot behind it holds the real key only while that client has the backend,
//! so a late cancel cannot hit the backend's next client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use rand::Rng;

use crate::backend::CancelTarget;

/// Where one client's cancel key currently points.
#[derive(Default)]
pub struct CancelSlot {
    target: Mutex<Option<CancelTarget>>,
    /// Cancels taken from this slot and not yet delivered.
    in_flight: AtomicUsize,
    delivered: Notify,
}

impl CancelSlot {
    /// Points the key at a backend (None: no backend attached).
    pub fn set(&self, target: Option<CancelTarget>) {
        if let Ok(mut g) = self.target.lock() {
            *g = target;
        }
    }

    /// The backend the key points at now.
    pub fn get(&self) -> Option<CancelTarget> {
        self.target.lock().ok().and_then(|g| g.clone())
    }

    /// Takes the target for a cancel to forward; the backend is not given to
    /// another client until the returned guard is dropped (see
    /// [`CancelSlot::wait_delivered`]).
    fn take_for_cancel(self: &Arc<Self>) -> Option<(CancelTarget, InFlight)> {
        let g = self.target.lock().ok()?;
        let target = g.clone()?;
        // Counted under the lock, so a `set(None)` that follows sees it.
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Some((target, InFlight(self.clone())))
    }

    /// Waits (at most `limit`) for cancels already on their way to the
    /// backend, so that one sent for this client's query cannot hit the
    /// next client's. Call after `set(None)`.
    pub async fn wait_delivered(&self, limit: Duration) {
        let wait = async {
            loop {
                let notified = self.delivered.notified();
                if self.in_flight.load(Ordering::Acquire) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }

    /// True when no cancel is on its way (the common case: no wait needed).
    pub fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }
}

/// A cancel on its way to a backend.
pub struct InFlight(Arc<CancelSlot>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.delivered.notify_waiters();
    }
}

/// All live client keys.
#[derive(Default)]
pub struct CancelRegistry {
    keys: Mutex<HashMap<(i32, i32), Arc<CancelSlot>>>,
}

/// Removes a key from the registry when the client session ends.
pub struct CancelKey {
    /// Process id shown to the client.
    pub pid: i32,
    /// Secret shown to the client.
    pub secret: i32,
    /// Where it points.
    pub slot: Arc<CancelSlot>,
    registry: Arc<CancelRegistry>,
}

impl CancelRegistry {
    /// Issues a fresh random key.
    pub fn issue(self: &Arc<Self>) -> CancelKey {
        let slot = Arc::new(CancelSlot::default());
        let mut rng = rand::thread_rng();
        let mut keys = match self.keys.lock() {
            Ok(k) => k,
            Err(p) => p.into_inner(),
        };
        loop {
            // Positive pids, like real ones, so tools that print them are not confused.
            let pid = rng.gen_range(1..i32::MAX);
            let secret: i32 = rng.gen();
            if let std::collections::hash_map::Entry::Vacant(e) = keys.entry((pid, secret)) {
                e.insert(slot.clone());
                return CancelKey {
                    pid,
                    secret,
                    slot,
                    registry: self.clone(),
                };
            }
        }
    }

    /// The backend to cancel for a key a client presented, if the key is
    /// live and its client holds a backend; keep the guard until the cancel
    /// is delivered.
    pub fn lookup(&self, pid: i32, secret: i32) -> Option<(CancelTarget, InFlight)> {
        let slot = {
            let keys = self.keys.lock().ok()?;
            keys.get(&(pid, secret))?.clone()
        };
        slot.take_for_cancel()
    }
}

impl Drop for CancelKey {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.registry.keys.lock() {
            keys.remove(&(self.pid, self.secret));
        }
    }
}
