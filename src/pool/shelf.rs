//! Backends handed over to waiting clients, kept until the client runs.
//!
//! A backend given back while clients wait goes on the shelf, and the
//! first waiter gets a [`Ticket`] for one (see [`super::waiters`]). The
//! waiter takes the backend shelved *last* when it runs, not the one its
//! ticket came with: several backends often come back in one turn of the
//! event loop, and the waiters woken for them run in the order they
//! waited. Taken last-in first-out, the backend whose server process
//! answered most recently gets the next query, while that process is most
//! likely still running and its memory still in the CPU's caches.
//! Handed out first-in first-out, select-only transaction pooling at 64
//! clients over 20 backends ran 7–10% fewer transactions a second at the
//! same pooler CPU (a backend woken from sleep costs the sender's kernel
//! time), the same reason deadpool's idle queue is last-in first-out.
//!
//! Every ticket stands for one shelved backend: a ticket claimed takes
//! one off, a ticket dropped unclaimed (its waiter gave up meanwhile, or
//! nobody waited any more) gives one back to deadpool. To deadpool a
//! shelved backend is still lent out, so its count of open backends and
//! its size limit hold.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use deadpool::managed::Object;
use tokio::sync::OwnedSemaphorePermit;

use super::manager::BackendManager;

/// The shelf of one pool.
#[derive(Default)]
pub(super) struct Shelf {
    items: Mutex<Vec<Object<BackendManager>>>,
}

impl Shelf {
    /// Shelves `obj` (clean, and checked) for a waiter; the ticket for it,
    /// with the place (`permit`) it is held under and when it came back.
    pub fn put(
        self: &Arc<Self>,
        obj: Object<BackendManager>,
        permit: OwnedSemaphorePermit,
        at: Instant,
    ) -> Ticket {
        match self.items.lock() {
            Ok(mut items) => items.push(obj),
            // A poisoned lock: deadpool takes it back as it is dropped,
            // and the ticket finds no backend.
            Err(_) => drop(obj),
        }
        Ticket {
            shelf: self.clone(),
            permit: Some(permit),
            at,
        }
    }

    /// The backend shelved last, if any.
    fn take(&self) -> Option<Object<BackendManager>> {
        self.items.lock().ok()?.pop()
    }
}

/// A claim on one shelved backend, with the place it is held under.
pub(super) struct Ticket {
    shelf: Arc<Shelf>,
    permit: Option<OwnedSemaphorePermit>,
    at: Instant,
}

impl Ticket {
    /// The backend shelved last, the place, and when the backend its
    /// ticket stood for came back (the clock reading its checks used);
    /// `None` only if the shelf's lock was poisoned.
    pub fn claim(mut self) -> Option<(Object<BackendManager>, OwnedSemaphorePermit, Instant)> {
        let obj = self.shelf.take()?;
        let permit = self.permit.take()?;
        Some((obj, permit, self.at))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            // Unclaimed: a backend back to deadpool before its place goes.
            drop(self.shelf.take());
            drop(permit);
        }
    }
}
