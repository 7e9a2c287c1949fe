//! A wake-up one direction of the relay gives the other.
//!
//! tokio's `Notify` takes its waiter list's lock at every poll of a
//! registered `Notified`, and the server → client direction polls its
//! signal at every wake, once a statement or more (callgrind: about 150
//! instructions a poll, with `select!`'s random start). Both directions run
//! in one task, so a flag and one waker slot are all a signal needs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;

/// A raised-or-not flag with one waiter: raising it before anyone waits
/// is kept, as `Notify::notify_one` keeps a permit.
#[derive(Default)]
pub(super) struct Signal {
    raised: AtomicBool,
    waiter: AtomicWaker,
}

impl Signal {
    /// Raises the flag and wakes the waiter, if one waits.
    pub(super) fn raise(&self) {
        self.raised.store(true, Ordering::Release);
        self.waiter.wake();
    }

    /// Ready (and lowered) if the flag was raised; otherwise the waker is
    /// kept for the next [`Signal::raise`].
    pub(super) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.raised.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        self.waiter.register(cx.waker());
        // A raise between the check and the registration woke nobody.
        if self.raised.swap(false, Ordering::AcqRel) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Waits for the flag and lowers it.
    pub(super) async fn taken(&self) {
        std::future::poll_fn(|cx| self.poll_take(cx)).await
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
