//! What tells a session to end or to move, kept in its registry entry.
//!
//! Shutdown, KILL of a pool, KILL_CLIENT and a takeover's hand-over reach
//! thousands of sessions at once but happen a few times in a process's
//! life. Each session used to watch them through cancellation tokens: a
//! token of its own (about 110 bytes on the heap, two per client) and a
//! waiter node inline in its future for as long as it lived. Here the
//! event's sender walks the registry instead, sets a bit in each entry it
//! concerns and wakes that entry's task; the session's poll is an atomic
//! load (and, while nothing is set, the registration of its task's waker).

use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;

/// Why a session must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The pooler is shutting down.
    Shutdown,
    /// `KILL` of the session's database.
    PoolKilled,
    /// `KILL_CLIENT` named the session.
    KillClient,
}

impl End {
    /// Every reason, most important first: the one reported when several hold.
    const BY_PRECEDENCE: [End; 3] = [End::Shutdown, End::PoolKilled, End::KillClient];

    pub(super) fn bit(self) -> u8 {
        match self {
            End::Shutdown => 1,
            End::PoolKilled => 1 << 1,
            End::KillClient => 1 << 2,
        }
    }

    /// The reason as the session's log line and error name it.
    pub fn reason(self) -> &'static str {
        match self {
            End::Shutdown => "shutdown",
            End::PoolKilled => "killed",
            End::KillClient => "KILL_CLIENT",
        }
    }
}

/// A takeover's hand-over has started: idle sessions may move.
pub(super) const MOVING: u8 = 1 << 3;

/// One session's signals and the task to wake for them.
#[derive(Debug, Default)]
pub struct Signals {
    bits: AtomicU8,
    waker: AtomicWaker,
}

impl Signals {
    /// Signals with `bits` already raised (see [`Signals::bits`]).
    pub(super) fn with(bits: u8) -> Signals {
        Signals {
            bits: AtomicU8::new(bits),
            waker: AtomicWaker::new(),
        }
    }

    /// Tells the session to end for `why`.
    pub fn end(&self, why: End) {
        self.raise(why.bit());
    }

    /// Tells the session that a hand-over has started.
    pub fn start_moving(&self) {
        self.raise(MOVING);
    }

    pub(super) fn raise(&self, bits: u8) {
        self.bits.fetch_or(bits, Ordering::AcqRel);
        self.waker.wake();
    }

    /// Why the session must end, if it must.
    pub fn ended(&self) -> Option<End> {
        let bits = self.bits.load(Ordering::Acquire);
        End::BY_PRECEDENCE.into_iter().find(|e| bits & e.bit() != 0)
    }

    /// Ready once the session must end; until then the task is woken when
    /// it must.
    pub fn poll_end(&self, cx: &mut Context<'_>) -> Poll<End> {
        self.poll_for(cx, |s| s.ended())
    }

    /// Ready once a hand-over has started.
    pub fn poll_moving(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_for(cx, |s| {
            (s.bits.load(Ordering::Acquire) & MOVING != 0).then_some(())
        })
    }

    /// Resolves once the session must end.
    pub async fn end_wait(&self) -> End {
        std::future::poll_fn(|cx| self.poll_end(cx)).await
    }

    fn poll_for<T>(&self, cx: &mut Context<'_>, check: impl Fn(&Self) -> Option<T>) -> Poll<T> {
        if let Some(t) = check(self) {
            return Poll::Ready(t);
        }
        // Registered first, then checked again: a signal raised in between
        // either is seen now or wakes the waker just registered.
        self.waker.register(cx.waker());
        match check(self) {
            Some(t) => Poll::Ready(t),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_waker::counting_waker as waker;

    #[test]
    fn a_raised_end_wakes_the_session_and_the_most_important_reason_wins() {
        let s = Signals::default();
        let (woken, w) = waker();
        let mut cx = Context::from_waker(&w);
        assert_eq!(s.poll_end(&mut cx), Poll::Pending);
        s.end(End::KillClient);
        assert_eq!(woken.get(), 1);
        assert_eq!(s.poll_end(&mut cx), Poll::Ready(End::KillClient));
        s.end(End::Shutdown);
        assert_eq!(s.ended(), Some(End::Shutdown));
        assert_eq!(End::PoolKilled.reason(), "killed");
    }

    #[test]
    fn moving_wakes_the_session_but_does_not_end_it() {
        let s = Signals::default();
        let (woken, w) = waker();
        let mut cx = Context::from_waker(&w);
        assert_eq!(s.poll_moving(&mut cx), Poll::Pending);
        assert_eq!(s.poll_end(&mut cx), Poll::Pending);
        s.start_moving();
        assert_eq!(woken.get(), 1);
        assert_eq!(s.poll_moving(&mut cx), Poll::Ready(()));
        assert_eq!(s.poll_end(&mut cx), Poll::Pending);
        assert_eq!(s.ended(), None);
    }

    #[test]
    fn signals_raised_before_registration_are_there_from_the_start() {
        let s = Signals::with(End::Shutdown.bit() | MOVING);
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        assert_eq!(s.poll_end(&mut cx), Poll::Ready(End::Shutdown));
        assert_eq!(s.poll_moving(&mut cx), Poll::Ready(()));
    }
}
