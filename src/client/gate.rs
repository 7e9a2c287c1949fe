//! Polling a future only when its own waker fired.
//!
//! `select!` polls every branch whenever the task wakes. The relay waits
//! on the client socket, the server socket and the session's stop signal
//! at once, and each wake is for one of them: polling the other two costs
//! a readiness check and a waiter-list lock apiece (callgrind: about a
//! fifth of the relay's instructions per message). A [`Gated`] future keeps
//! a waker of its own and skips the poll until that waker is used, as
//! `FuturesUnordered` does for its members.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use atomic_waker::AtomicWaker;
use std::task::{Context, Poll, Wake, Waker};

pin_project_lite::pin_project! {
    /// `inner`, polled only on its first poll and after it asked to be
    /// woken (or at every poll, for a gate left open).
    pub struct Gated<F> {
        #[pin]
        inner: F,
        gate: Option<Gate>,
    }
}

/// The inner future's own waker and what it recorded.
struct Gate {
    state: Arc<GateState>,
    waker: Waker,
    first: bool,
}

/// What the inner future's waker records.
struct GateState {
    /// The inner future's waker was used since its last poll.
    woken: AtomicBool,
    /// Who polls the gate.
    outer: AtomicWaker,
}

impl Wake for GateState {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.outer.wake();
    }
}

impl<F: Future> Gated<F> {
    /// Wraps `inner`.
    pub fn new(inner: F) -> Gated<F> {
        let state = Arc::new(GateState {
            woken: AtomicBool::new(false),
            outer: AtomicWaker::new(),
        });
        let gate = Gate {
            waker: Waker::from(state.clone()),
            state,
            first: true,
        };
        Gated {
            inner,
            gate: Some(gate),
        }
    }

    /// [`Gated::new`] when `gated`, else [`Gated::open`].
    pub fn with_gate(gated: bool, inner: F) -> Gated<F> {
        if gated {
            Gated::new(inner)
        } else {
            Gated::open(inner)
        }
    }

    /// Wraps `inner` with the gate open: polled at every poll, no
    /// allocation (for futures that live a single exchange, where the
    /// gate's own waker would cost more than the polls it saves).
    pub fn open(inner: F) -> Gated<F> {
        Gated { inner, gate: None }
    }
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Some(gate) = this.gate.as_mut() else {
            return this.inner.poll(cx);
        };
        gate.state.outer.register(cx.waker());
        if !std::mem::take(&mut gate.first) && !gate.state.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.inner.poll(&mut Context::from_waker(&gate.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
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
        let mut gated = Box::pin(Gated::new(probe));
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
}
