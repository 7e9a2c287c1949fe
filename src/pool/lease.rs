//! A backend lent to one client, and how it comes back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool::managed::Object;
use tokio::sync::OwnedSemaphorePermit;

use super::manager::BackendManager;
use super::Pool;
use crate::backend::{Departure, HandOff, Link};

/// A backend lent to one client. Give it back with [`Lease::finish`];
/// dropping it without that closes the backend (it may be mid-query).
pub struct Lease {
    pub(super) obj: Option<Object<BackendManager>>,
    pub(super) pool: Arc<Pool>,
    /// The client's place among the pool's `pool_size` (or reserve)
    /// backends. Given up only once the backend is back in the pool or
    /// closed, so the next client in line cannot open one more meanwhile.
    pub(super) permit: Option<OwnedSemaphorePermit>,
    /// How long the client waited for it (zero when one was idle at once).
    pub(super) waited: Duration,
}

impl Lease {
    /// The backend.
    pub fn backend(&mut self) -> &mut Link {
        // Invariant: `obj` is Some until `finish` or drop consume the lease.
        &mut self.obj.as_mut().expect("lease used after finish").backend
    }

    /// How long the client waited for this backend (zero when an idle one
    /// was free at once; the checkout read no clock then).
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The pool the backend belongs to.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Gives the backend back as [`Link::hand_off`] decides: reused at
    /// once, closed, or (when the server still owes replies, a transaction
    /// is open or session state must go) drained and reset in the
    /// background, so the client's next step does not wait for it.
    /// `server_lifetime` and `target_session_attrs` are checked here,
    /// never while a client holds it.
    pub fn finish(mut self, how: Departure) {
        let Some(mut obj) = self.obj.take() else {
            return;
        };
        let permit = self.permit.take();
        match obj.backend.release(how) {
            HandOff::Close(why) => {
                discard(obj, &why);
                return;
            }
            HandOff::Reuse => {
                repool(&self.pool, obj, permit);
                return;
            }
            HandOff::Drain | HandOff::Reset => {}
        }
        let pool = self.pool.clone();
        obj.backend.settling();
        tokio::spawn(async move {
            let tuning = pool.tuning();
            let settled = obj
                .backend
                .settle(how, tuning.drain_timeout, &tuning.reset_query)
                .await;
            match settled {
                Ok(()) => repool(&pool, obj, permit),
                Err(why) => discard(obj, &why),
            }
        });
    }
}

/// Puts a clean backend back in the pool, idle from now, unless it must
/// retire ([`Pool::retire_reason`]): on the shelf, with a ticket for it
/// and its place handed to the first client waiting (see
/// [`super::waiters`] and [`super::shelf`]), else in deadpool (as `obj`
/// drops), which closes it instead when a reload shrank the pool below
/// its open backends. The backend goes back before its place does, so
/// whoever gets the place finds it idle.
fn repool(pool: &Pool, mut obj: Object<BackendManager>, permit: Option<OwnedSemaphorePermit>) {
    let now = Instant::now();
    if let Some(why) = pool.retire_reason(&obj, now) {
        discard(obj, why);
        return;
    }
    obj.clean = true;
    obj.idle_since = now;
    obj.backend.pooled();
    let Some(permit) = permit else { return };
    if !pool.hands_over(&permit) {
        drop(obj);
        return;
    }
    // The rest of the checks deadpool's recycle would make as the waiter
    // took it (RECONNECT and server_lifetime were asked above).
    if let Some(why) = obj.not_quiet(now) {
        discard(obj, why);
        return;
    }
    // Nobody waits any more: the ticket gives the backend back as it drops.
    let ticket = pool.shelf.put(obj, permit, now);
    drop(pool.waiters.hand(ticket));
}

/// Closes a backend for good instead of pooling it.
pub(super) fn discard(obj: Object<BackendManager>, why: &str) {
    // `take` detaches it from the pool (see BackendManager::detach); dropping
    // the backend closes the socket.
    let pooled = Object::take(obj);
    tracing::info!(
        backend = pooled.backend.id(),
        reason = why,
        "backend closed"
    );
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(obj) = self.obj.take() {
            discard(obj, "session ended without a clean release");
        }
        // `permit` drops after this, once the backend is out of the pool.
    }
}
