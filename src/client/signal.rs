//! A flag with one waiter, for wake-ups inside a client's task: the
//! relay's directions signal each other with it, and a [`super::gate::Gate`]
//! records with it that its future's waker was used.
//!
//! tokio's `Notify` takes its waiter list's lock at every poll of a
//! registered `Notified`, and the relay polls its signals at every wake,
//! once a statement or more (callgrind: about 150 instructions a poll,
//! with `select!`'s random start). Within one task a flag and one waker
//! slot are all a signal needs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake};

use atomic_waker::AtomicWaker;

/// A raised-or-not flag with one waiter: raising it before anyone waits
/// is kept, as `Notify::notify_one` keeps a permit.
#[derive(Default)]
pub(crate) struct Signal {
    raised: AtomicBool,
    waiter: AtomicWaker,
}

impl Signal {
    /// Raises the flag and wakes the waiter, if one waits.
    #[inline]
    pub(crate) fn raise(&self) {
        self.raised.store(true, Ordering::Release);
        self.waiter.wake();
    }

    /// Ready (and lowered) if the flag was raised. The waker is kept for
    /// the next [`Signal::raise`] either way: registered before the flag
    /// is read, so a raise in between is seen now or wakes it.
    #[inline]
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.waiter.register(cx.waker());
        if self.raised.swap(false, Ordering::AcqRel) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// A signal as a waker: using it raises the signal.
impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.raise();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.raise();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_waker::counting_waker;

    #[test]
    fn a_raise_before_the_wait_is_kept_once() {
        let s = Signal::default();
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        s.raise();
        assert!(s.poll_take(&mut cx).is_ready());
        assert!(s.poll_take(&mut cx).is_pending());
        assert_eq!(wakes.get(), 0);
    }

    #[test]
    fn a_raise_wakes_the_waiter_once() {
        let s = Signal::default();
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(s.poll_take(&mut cx).is_pending());
        s.raise();
        assert_eq!(wakes.get(), 1);
        // Twice raised before the poll is one take.
        s.raise();
        assert!(s.poll_take(&mut cx).is_ready());
        assert!(s.poll_take(&mut cx).is_pending());
    }
}
