//! Backends given back while clients wait, kept out of deadpool for the
//! next client in line.
//!
//! In transaction pooling with more clients than backends, nearly every
//! transaction's backend comes back while another client waits. Returned
//! to deadpool, it would be taken out again at once: deadpool's own
//! semaphore, its slot lock, the recycle hooks and two clock readings, a
//! third of the checkout's instructions (callgrind). On the shelf it goes
//! straight to whoever holds the next place: the place, freed right after
//! the shelving, wakes the first waiter (tokio's semaphore is fair), and
//! every holder of a new place looks at the shelf before deadpool.
//!
//! A backend stays on the shelf only briefly: the client it was meant for
//! may have left meanwhile, so the pool's maintenance task puts whatever
//! it finds there back into deadpool at each sweep, and PAUSE, KILL and
//! closing empty it first. To deadpool a shelved backend is still lent
//! out, so its count of open backends and its size limit hold throughout.

use std::sync::Mutex;

use deadpool::managed::Object;

use super::manager::BackendManager;

/// The shelf of one pool.
#[derive(Default)]
pub(super) struct Shelf {
    items: Mutex<Vec<Object<BackendManager>>>,
}

impl Shelf {
    /// Keeps `obj` (clean, and checked for retirement) for the next place holder.
    pub fn put(&self, obj: Object<BackendManager>) {
        match self.items.lock() {
            Ok(mut items) => items.push(obj),
            // A poisoned lock: deadpool takes it back as it is dropped.
            Err(_) => drop(obj),
        }
    }

    /// The backend shelved last, if any.
    pub fn take(&self) -> Option<Object<BackendManager>> {
        self.items.lock().ok()?.pop()
    }

    /// How many backends are shelved now.
    pub fn len(&self) -> usize {
        self.items.lock().map_or(0, |items| items.len())
    }

    /// Gives every shelved backend back to deadpool, as idle.
    pub fn clear(&self) {
        let items = match self.items.lock() {
            Ok(mut items) => std::mem::take(&mut *items),
            Err(_) => return,
        };
        // Dropped outside the lock: each drop takes deadpool's.
        drop(items);
    }
}
