//! The cancel keys pgharbor shows its clients, and where each one points.
//!
//! A client never sees a backend's real key: it gets one of ours, and the
//! slot behind it holds the real key only while that client has the backend,
//! so a late cancel cannot hit the backend's next client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rand::Rng;

use crate::backend::CancelTarget;

/// Where one client's cancel key currently points.
#[derive(Default)]
pub struct CancelSlot(Mutex<Option<CancelTarget>>);

impl CancelSlot {
    /// Points the key at a backend (None: no backend attached).
    pub fn set(&self, target: Option<CancelTarget>) {
        if let Ok(mut g) = self.0.lock() {
            *g = target;
        }
    }

    /// The backend the key points at now.
    pub fn get(&self) -> Option<CancelTarget> {
        self.0.lock().ok().and_then(|g| g.clone())
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

    /// The backend to cancel for a key a client presented, if the key is live.
    pub fn lookup(&self, pid: i32, secret: i32) -> Option<CancelTarget> {
        let keys = self.keys.lock().ok()?;
        keys.get(&(pid, secret)).and_then(|s| s.get())
    }
}

impl Drop for CancelKey {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.registry.keys.lock() {
            keys.remove(&(self.pid, self.secret));
        }
    }
}
