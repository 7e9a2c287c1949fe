//! The clients waiting for a backend of one pool: a backend given back
//! while they wait is handed over, with the place in the pool it is held
//! under, to the first of them (as a [`super::shelf::Ticket`]), and each
//! wait ends at its deadline.
//!
//! In transaction pooling with more clients than backends, nearly every
//! transaction's backend comes back while another client waits. Returned
//! to deadpool and its place to the pool's semaphore, both would be taken
//! out again at once by the next client in line: the semaphore's release,
//! wake-up and re-acquire, deadpool's slot lock and recycle hooks, and a
//! boxed checkout per wait. Handed over, the place moves from one client
//! to the next in one step, and the semaphore and deadpool never see it.
//!
//! Every waiting checkout joins this queue and the semaphore's at once,
//! in the same order, and takes whichever serves it first: a ticket
//! handed over here, or a place freed by a backend that closed (then
//! deadpool gives it an idle backend or opens one). A waiter served by
//! the semaphore, or gone (its client's end), leaves a closed sender
//! behind, which the next hand-over, join or deadline check skips. A
//! ticket handed to a waiter that leaves before it reads it gives its
//! backend back to deadpool and its place to the semaphore as it drops.
//!
//! The deadlines (`query_wait_timeout`) are kept by one task per pool
//! ([`Waiters::watch`]), which sleeps until the earliest of them: a timer
//! per waiting checkout cost a registration in tokio's timer wheel and its
//! removal, each time a client waited, which at 64 clients over 20
//! backends is nearly every transaction.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a wait in the queue ends.
#[derive(Debug, PartialEq)]
pub(super) enum Turn<T> {
    /// What was handed over: a ticket for a backend given back, with its
    /// place.
    Handed(T),
    /// The deadline passed.
    Expired,
}

struct Waiter<T> {
    deadline: Instant,
    turn: oneshot::Sender<Turn<T>>,
}

struct Queue<T> {
    waiters: VecDeque<Waiter<T>>,
    /// The deadline the watching task sleeps until, if any.
    armed: Option<Instant>,
}

/// The clients of one pool waiting for a backend ([`super::shelf::Ticket`]s
/// are handed over; other types in tests), first come, first served.
pub(super) struct Waiters<T> {
    queue: Mutex<Queue<T>>,
    /// Wakes the watching task for a deadline earlier than the one it sleeps until.
    rearm: Notify,
}

impl<T> Default for Waiters<T> {
    fn default() -> Self {
        Waiters {
            queue: Mutex::new(Queue {
                waiters: VecDeque::new(),
                armed: None,
            }),
            rearm: Notify::new(),
        }
    }
}

impl<T> Waiters<T> {
    /// Joins the queue until `deadline`: how the wait ends arrives on the
    /// receiver (an error: the queue was cleared, and the waiter keeps its
    /// own deadline).
    pub fn join(&self, deadline: Instant) -> oneshot::Receiver<Turn<T>> {
        let (turn, rx) = oneshot::channel();
        let Ok(mut queue) = self.queue.lock() else {
            return rx;
        };
        while queue.waiters.front().is_some_and(|w| w.turn.is_closed()) {
            queue.waiters.pop_front();
        }
        queue.waiters.push_back(Waiter { deadline, turn });
        if queue.armed.is_none_or(|armed| deadline < armed) {
            queue.armed = Some(deadline);
            drop(queue);
            self.rearm.notify_one();
        }
        rx
    }

    /// Hands `handed` to the first client still waiting; gives it back
    /// when none is.
    pub fn hand(&self, handed: T) -> Option<T> {
        let Ok(mut queue) = self.queue.lock() else {
            return Some(handed);
        };
        let mut turn = Turn::Handed(handed);
        while let Some(w) = queue.waiters.pop_front() {
            match w.turn.send(turn) {
                Ok(()) => return None,
                Err(back) => turn = back,
            }
        }
        match turn {
            Turn::Handed(handed) => Some(handed),
            Turn::Expired => None,
        }
    }

    /// Forgets every waiter: those still waiting go on with deadlines of
    /// their own (the last waiter left, or the pool closes).
    pub fn clear(&self) {
        let waiters = match self.queue.lock() {
            Ok(mut queue) => std::mem::take(&mut queue.waiters),
            Err(_) => return,
        };
        drop(waiters);
    }

    /// Ends the waits whose deadline is past `now`, forgets ended waiters,
    /// and arms the earliest deadline left.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let Ok(mut queue) = self.queue.lock() else {
            return None;
        };
        let mut next: Option<Instant> = None;
        let mut expired = Vec::new();
        for w in std::mem::take(&mut queue.waiters) {
            if w.turn.is_closed() {
                continue;
            }
            if w.deadline <= now {
                expired.push(w.turn);
                continue;
            }
            next = Some(next.map_or(w.deadline, |n| n.min(w.deadline)));
            queue.waiters.push_back(w);
        }
        queue.armed = next;
        drop(queue);
        for turn in expired {
            // Err: the waiter left meanwhile.
            let _ = turn.send(Turn::Expired);
        }
        next
    }

    /// Ends each wait at its deadline, until `stop`.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let next = self.expire(Instant::now());
            let rearmed = self.rearm.notified();
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = rearmed => {}
                _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test]
    async fn hands_over_to_the_first_client_still_waiting() {
        let w = Waiters::<u32>::default();
        let far = Instant::now() + ms(60_000);
        let gone = w.join(far);
        let mut first = w.join(far);
        let mut second = w.join(far);
        drop(gone);
        assert_eq!(w.hand(1), None);
        assert_eq!(first.try_recv(), Ok(Turn::Handed(1)));
        assert!(second.try_recv().is_err(), "the second waits on");
        assert_eq!(w.hand(2), None);
        assert_eq!(second.try_recv(), Ok(Turn::Handed(2)));
        assert_eq!(w.hand(3), Some(3), "nobody waits: given back");
    }

    #[tokio::test]
    async fn each_wait_ends_at_its_own_deadline() {
        let w = Arc::new(Waiters::<u32>::default());
        let stop = CancellationToken::new();
        let watch = tokio::spawn(w.clone().watch(stop.clone()));
        let start = Instant::now();
        let late = w.join(start + ms(60_000));
        // An earlier deadline than the one the watch sleeps until.
        let early = w.join(start + ms(50));
        let at = tokio::time::timeout(ms(10_000), early).await;
        assert_eq!(
            at.expect("ended long before the later deadline"),
            Ok(Turn::Expired)
        );
        assert!(Instant::now() >= start + ms(50));
        assert_eq!(w.hand(7), None);
        assert_eq!(late.await, Ok(Turn::Handed(7)));
        stop.cancel();
        watch.await.unwrap();
    }

    #[tokio::test]
    async fn a_wait_handed_over_is_not_expired_later() {
        let w = Arc::new(Waiters::<u32>::default());
        let stop = CancellationToken::new();
        tokio::spawn(w.clone().watch(stop.clone()));
        let start = Instant::now();
        let served = w.join(start + ms(20));
        let next = w.join(start + ms(60));
        assert_eq!(w.hand(1), None);
        tokio::time::sleep(ms(30)).await;
        assert_eq!(served.await, Ok(Turn::Handed(1)));
        assert_eq!(next.await, Ok(Turn::Expired));
        assert!(Instant::now() >= start + ms(60));
        stop.cancel();
    }

    #[tokio::test]
    async fn clearing_leaves_waiters_to_their_own_deadlines() {
        let w = Waiters::<u32>::default();
        let rx = w.join(Instant::now() + ms(60_000));
        w.clear();
        assert!(rx.await.is_err());
        assert_eq!(w.hand(1), Some(1));
    }
}
