//! A backend lent to one client, and how it comes back.

use std::sync::Arc;

use deadpool::managed::Object;

use super::manager::BackendManager;
use super::servers::ServerState;
use super::Pool;
use crate::backend::Backend;

/// A backend lent to one client. Give it back with [`Lease::release`];
/// dropping it without release closes the backend (it may be mid-query).
pub struct Lease {
    pub(super) obj: Option<Object<BackendManager>>,
    pub(super) pool: Arc<Pool>,
}

impl Lease {
    /// The backend.
    pub fn backend(&mut self) -> &mut Backend {
        // Invariant: `obj` is Some until release/discard consume the lease.
        &mut self.obj.as_mut().expect("lease used after release").backend
    }

    /// The pool the backend belongs to.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Returns the backend: `reusable` says the client left it at a message
    /// boundary. The reset runs in the background so the next client's login
    /// does not wait for it; a failed reset closes the backend.
    pub fn release(mut self, reusable: bool) {
        let Some(mut obj) = self.obj.take() else {
            return;
        };
        if !reusable {
            discard(obj, "client left the server connection mid-message");
            return;
        }
        let reset_query = self.pool.reset_query.clone();
        let servers = self.pool.servers().clone();
        servers.set_state(obj.backend.id, ServerState::Resetting, None);
        tokio::spawn(async move {
            match obj.backend.reset(&reset_query).await {
                Ok(()) => {
                    obj.clean = true;
                    servers.set_state(obj.backend.id, ServerState::Idle, None);
                }
                Err(e) => discard(obj, &e.to_string()),
            }
        });
    }
}

impl Lease {
    /// Returns a backend that is idle at a message boundary without running
    /// the reset query: in transaction and statement mode the next client
    /// must find the session state (prepared statements, parameters) the
    /// pooler keeps track of, and a reset per transaction would double the
    /// round trips.
    pub fn hand_back(mut self) {
        let Some(mut obj) = self.obj.take() else {
            return;
        };
        obj.clean = true;
        self.pool
            .servers()
            .set_state(obj.backend.id, ServerState::Idle, None);
        drop(obj);
    }
}

/// Closes a backend for good instead of pooling it.
pub(super) fn discard(obj: Object<BackendManager>, why: &str) {
    // `take` detaches it from the pool (see BackendManager::detach); dropping
    // the backend closes the socket.
    let pooled = Object::take(obj);
    tracing::info!(backend = pooled.backend.id, reason = why, "backend closed");
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(obj) = self.obj.take() {
            discard(obj, "session ended without a clean release");
        }
    }
}
