//! What ends a session from outside (shutdown, KILL of its pool,
//! KILL_CLIENT): the signals of its registry entry, which the sender of
//! each event raises (see [`crate::registry::signals`]).

use std::future::Future;
use std::task::{Context, Poll};

use crate::pool::Pool;
use crate::registry::{ClientEntry, End};

/// The session's stop signal.
pub(super) struct Stop<'e>(&'e ClientEntry);

impl<'e> Stop<'e> {
    /// Watches `entry`'s signals, with the session attached to `pool` so
    /// that a KILL of the pool reaches it.
    pub(super) fn new(pool: &Pool, entry: &'e ClientEntry) -> Stop<'e> {
        Stop::attach(pool, entry);
        Stop::watching(entry)
    }

    /// Attaches the session to `pool`, so that a KILL of the pool reaches
    /// it, without watching yet.
    pub(super) fn attach(pool: &Pool, entry: &ClientEntry) {
        entry.attach(pool.identity());
    }

    /// Watches `entry`'s signals, already attached to its pool.
    pub(super) fn watching(entry: &'e ClientEntry) -> Stop<'e> {
        Stop(entry)
    }

    /// Resolves once the session must end, with why. Polling it is an
    /// atomic load while nothing is raised, so the relay polls it at every
    /// wake without a gate.
    pub(super) fn stopped(&self) -> impl Future<Output = &'static str> + Unpin + Send + 'e {
        let stop = Stop(self.0);
        std::future::poll_fn(move |cx| stop.poll(cx))
    }

    /// Why the session must end, once it must; until then the task is woken
    /// when it must.
    pub(super) fn poll(&self, cx: &mut Context<'_>) -> Poll<&'static str> {
        self.0.signals().poll_end(cx).map(End::reason)
    }

    /// Whether the session must end.
    pub(super) fn is_stopped(&self) -> bool {
        self.0.signals().ended().is_some()
    }
}
