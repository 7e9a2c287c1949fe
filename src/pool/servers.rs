//! The open backends of one pool, for SHOW SERVERS, SHOW POOLS and the
//! metrics. Each entry is the link's own published status ([`LinkStatus`]),
//! not a copy the pool keeps: the map changes only at connect and close.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::backend::Link;
pub use crate::backend::{LinkStatus, ServerInfo, ServerState};

/// The open backends of one pool.
#[derive(Debug, Default)]
pub struct ServerRegistry(Mutex<BTreeMap<u64, Arc<LinkStatus>>>);

impl ServerRegistry {
    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<u64, Arc<LinkStatus>>) -> R) -> R {
        match self.0.lock() {
            Ok(mut m) => f(&mut m),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    /// Records a newly opened backend.
    pub fn opened(&self, b: &Link) {
        let status = b.status().clone();
        self.with(|m| m.insert(b.id(), status));
    }

    /// Forgets a closed backend.
    pub fn closed(&self, id: u64) {
        self.with(|m| m.remove(&id));
    }

    /// A copy of every entry.
    pub fn list(&self) -> Vec<ServerInfo> {
        self.with(|m| m.values().map(|s| s.snapshot()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listener::Transport;

    #[test]
    fn lists_what_each_link_publishes_until_closed() {
        let r = ServerRegistry::default();
        let status = Arc::new(LinkStatus::new(1, 101, Transport::Unix, None));
        r.with(|m| m.insert(1, status.clone()));
        assert_eq!(r.list()[0].state, ServerState::Idle);
        r.closed(1);
        assert!(r.list().is_empty());
    }
}
