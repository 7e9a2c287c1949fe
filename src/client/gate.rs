//! Polling a future only when its own waker fired.
//!
//! `select!` polls every branch whenever the task wakes. The relay waits
//! on the client socket, the server socket and the session's stop signal
//! at once, and each wake is for one of them: polling the other two costs
//! a readiness check and a waiter-list lock apiece (callgrind: about a
//! fifth of the relay's instructions per message). A [`Gated`] future
//! hands its inner future a waker of its own (from a [`Gate`] the client
//! keeps between relays) and skips the poll until that waker is used, as
//! `FuturesUnordered` does for its members.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::signal::Signal;

pin_project_lite::pin_project! {
    /// `inner`, polled only on its first poll and after it asked to be
    /// woken.
    pub struct Gated<'g, F> {
        #[pin]
        inner: F,
        gate: &'g Gate,
        first: bool,
    }
}

/// A gate's wake record and the waker that sets it. A client keeps one per
/// relay direction and lends it to each relay in turn, so a transaction's
/// relay allocates nothing for its gates.
pub struct Gate {
    /// Raised when the inner future's waker is used; its waiter is who
    /// polls the gate.
    woken: Arc<Signal>,
    waker: Waker,
}

impl Default for Gate {
    fn default() -> Self {
        let woken = Arc::new(Signal::default());
        Gate {
            waker: Waker::from(woken.clone()),
            woken,
        }
    }
}

impl<'g, F: Future> Gated<'g, F> {
    /// Wraps `inner` behind `gate`, which no other future may use while
    /// this one lives (a wake left over from an earlier one costs one poll).
    pub fn new(inner: F, gate: &'g Gate) -> Gated<'g, F> {
        Gated {
            inner,
            gate,
            first: true,
        }
    }
}

impl<F: Future> Future for Gated<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let woken = this.gate.woken.poll_take(cx).is_ready();
        if !std::mem::take(this.first) && !woken {
            return Poll::Pending;
        }
        this.inner.poll(&mut Context::from_waker(&this.gate.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    use crate::test_waker::counting_waker;

    /// Counts its polls; ready once told.
    struct Probe {
        polls: Arc<AtomicUsize>,
        ready: Arc<AtomicBool>,
        waker: Arc<Mutex<Option<Waker>>>,
    }

    impl Future for Probe {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.ready.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[tokio::test]
    async fn the_inner_future_is_polled_only_after_its_waker_fired() {
        let polls = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(Mutex::new(None));
        let probe = Probe {
            polls: polls.clone(),
            ready: ready.clone(),
            waker: waker.clone(),
        };
        let gate = Gate::default();
        let mut gated = Box::pin(Gated::new(probe, &gate));
        let (outer_wakes, outer) = counting_waker();
        let mut cx = Context::from_waker(&outer);
        assert!(gated.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            polls.load(Ordering::SeqCst),
            1,
            "the first poll goes through"
        );
        for _ in 0..3 {
            assert!(gated.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1, "woken by others: skipped");
        ready.store(true, Ordering::SeqCst);
        let inner = waker.lock().unwrap().take().unwrap();
        inner.wake();
        assert_eq!(outer_wakes.get(), 1, "the outer task was woken");
        assert!(gated.as_mut().poll(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_gate_lent_again_lets_the_next_future_start() {
        let gate = Gate::default();
        let (_, outer) = counting_waker();
        let mut cx = Context::from_waker(&outer);
        for round in 1..=2 {
            let polls = Arc::new(AtomicUsize::new(0));
            let probe = Probe {
                polls: polls.clone(),
                ready: Arc::new(AtomicBool::new(false)),
                waker: Arc::new(Mutex::new(None)),
            };
            let mut gated = Box::pin(Gated::new(probe, &gate));
            assert!(gated.as_mut().poll(&mut cx).is_pending());
            assert!(gated.as_mut().poll(&mut cx).is_pending());
            assert_eq!(polls.load(Ordering::SeqCst), 1, "round {round}");
        }
    }
}
