//! The cancel keys pgharbor shows its clients, and where each one points.
//!
//! A client never sees a backend's real secret: it gets one of ours (with
//! the real process id in session pooling), and the slot behind it holds
//! the real key only while that client has the backend. A cancel already
//! on its way when the client lets go holds the backend back from the next
//! client until PostgreSQL confirms it (see `backend::CancelGate`).

use std::sync::{Arc, Mutex};

use rand::Rng;

use super::fleet::{self, Route};
use crate::backend::{CancelInFlight, CancelTarget};
use crate::config::InstanceId;

/// Where one client's cancel key currently points.
#[derive(Default)]
pub struct CancelSlot {
    target: Mutex<Option<Arc<CancelTarget>>>,
}

impl CancelSlot {
    /// Points the key at a backend (None: no backend attached).
    pub fn set(&self, target: Option<Arc<CancelTarget>>) {
        if let Ok(mut g) = self.target.lock() {
            *g = target;
        }
    }

    /// Takes the target for a cancel to forward. The backend's gate counts
    /// it under the slot's lock, so a hand-off that follows `set(None)`
    /// sees it and keeps the backend from other clients until the guard is
    /// confirmed or dropped.
    fn take_for_cancel(&self) -> Option<(Arc<CancelTarget>, CancelInFlight)> {
        let g = self.target.lock().ok()?;
        let target = g.clone()?;
        let in_flight = target.gate.enter();
        Some((target, in_flight))
    }
}

/// All live client keys.
#[derive(Default)]
pub struct CancelRegistry {
    keys: Mutex<foldhash::HashMap<(i32, i32), Arc<CancelSlot>>>,
    /// `listen.instance_id` at start-up, in every secret issued (see [`fleet`]).
    instance: Option<InstanceId>,
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
    /// A registry whose keys carry `instance` (None: outside a fleet).
    pub fn new(instance: Option<InstanceId>) -> CancelRegistry {
        CancelRegistry {
            keys: Mutex::default(),
            instance,
        }
    }

    /// What to do with a CancelRequest's secret: ours to look up, or
    /// another instance's to forward.
    pub fn route(&self, secret: i32) -> Route {
        fleet::route(self.instance, secret)
    }

    /// Issues a fresh key: `pid` is the real backend's process id in
    /// session pooling (so pg_backend_pid(), pg_terminate_backend and
    /// NOTIFY sender pids agree with what the driver was told), else a
    /// random one; the secret is always the pooler's own, carrying the
    /// instance id in a fleet.
    pub fn issue(self: &Arc<Self>, pid: Option<i32>) -> CancelKey {
        let slot = Arc::new(CancelSlot::default());
        let mut rng = rand::thread_rng();
        let mut keys = match self.keys.lock() {
            Ok(k) => k,
            Err(p) => p.into_inner(),
        };
        loop {
            // Positive pids, like real ones, so tools that print them are not confused.
            let pid = pid.unwrap_or_else(|| rng.gen_range(1..i32::MAX));
            let secret = fleet::mark(self.instance, rng.gen());
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

    /// Registers a key another process issued (a client handed over in a
    /// takeover keeps the key it was shown); None when it is taken here.
    pub fn adopt(self: &Arc<Self>, pid: i32, secret: i32) -> Option<CancelKey> {
        let slot = Arc::new(CancelSlot::default());
        let mut keys = match self.keys.lock() {
            Ok(k) => k,
            Err(p) => p.into_inner(),
        };
        match keys.entry((pid, secret)) {
            std::collections::hash_map::Entry::Occupied(_) => None,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(slot.clone());
                Some(CancelKey {
                    pid,
                    secret,
                    slot,
                    registry: self.clone(),
                })
            }
        }
    }

    /// The backend to cancel for a key a client presented (its secret as
    /// [`Route::Local`] gives it), if the key is live and its client holds
    /// a backend; keep the guard until the cancel is delivered.
    pub fn lookup(&self, pid: i32, secret: i32) -> Option<(Arc<CancelTarget>, CancelInFlight)> {
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
