//! A backend lent to one client, and how it comes back.

use std::sync::Arc;
use std::time::Instant;

use deadpool::managed::Object;
use tokio::sync::OwnedSemaphorePermit;

use super::manager::BackendManager;
use super::servers::ServerState;
use super::Pool;
use crate::backend::Backend;

/// A backend lent to one client. Give it back with [`Lease::release`];
/// dropping it without release closes the backend (it may be mid-query).
pub struct Lease {
    pub(super) obj: Option<Object<BackendManager>>,
    pub(super) pool: Arc<Pool>,
    /// The client's place among the pool's `pool_size` (or reserve)
    /// backends. Given up only once the backend is back in the pool or
    /// closed, so the next client in line cannot open one more meanwhile.
    pub(super) permit: Option<OwnedSemaphorePermit>,
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
    /// does not wait for it; a failed reset closes the backend, and so does
    /// `server_lifetime` (checked here, never while the client holds it).
    pub fn release(mut self, reusable: bool) {
        let Some(mut obj) = self.obj.take() else {
            return;
        };
        let permit = self.permit.take();
        if !reusable {
            discard(obj, "client left the server connection mid-message");
            return;
        }
        if self.pool.past_lifetime(&obj) {
            discard(obj, "server_lifetime reached");
            return;
        }
        let reset_query = self.pool.reset_query.clone();
        let servers = self.pool.servers().clone();
        servers.set_state(obj.backend.id, ServerState::Resetting, None);
        tokio::spawn(async move {
            match obj.backend.reset(&reset_query).await {
                Ok(()) => {
                    obj.clean = true;
                    obj.idle_since = Instant::now();
                    servers.set_state(obj.backend.id, ServerState::Idle, None);
                    drop(obj);
                }
                Err(e) => discard(obj, &e.to_string()),
            }
            drop(permit);
        });
    }
}

impl Lease {
    /// Returns a backend that is idle at a message boundary without running
    /// the reset query: in transaction and statement mode the next client
    /// must find the session state (prepared statements, parameters) the
    /// pooler keeps track of, and a reset per transaction would double the
    /// round trips. A backend past `server_lifetime` is closed instead.
    pub fn hand_back(mut self) {
        let Some(mut obj) = self.obj.take() else {
            return;
        };
        let permit = self.permit.take();
        if self.pool.past_lifetime(&obj) {
            discard(obj, "server_lifetime reached");
            return;
        }
        obj.clean = true;
        obj.idle_since = Instant::now();
        self.pool
            .servers()
            .set_state(obj.backend.id, ServerState::Idle, None);
        drop(obj);
        drop(permit);
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
        // `permit` drops after this, once the backend is out of the pool.
    }
}
