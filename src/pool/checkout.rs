//! Checking a backend out: a place in the pool (first come, first served,
//! then the reserve), then an idle backend or a new one, all within
//! `query_wait_timeout` and never while the pool is paused.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use deadpool::managed::{Object, PoolError, Timeouts};
use tokio::sync::OwnedSemaphorePermit;

use super::limits::Prepaid;
use super::shelf::Ticket;
use super::waiters::Turn;
use super::{BackendManager, Lease, OpenError, Pool, Tuning};
use crate::backend::BackendError;
use crate::registry::ClientEntry;

/// Why no backend could be had.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    /// Every backend stayed busy for `query_wait_timeout`.
    #[error("no server connection available within {0:?}")]
    WaitTimeout(Duration),
    /// Opening a new backend failed.
    #[error("{0}")]
    Backend(#[from] BackendError),
    /// The pool is shutting down.
    #[error("pool is closed")]
    Closed,
}

/// deadpool's checkout of an idle backend only: no waiting (opening one is
/// for the slow path, which waits its turn for a place first).
const IDLE_ONLY: Timeouts = Timeouts {
    wait: Some(Duration::ZERO),
    create: None,
    recycle: None,
};

/// A backend, and the place in the pool it is held under.
type Checkout = (Object<BackendManager>, OwnedSemaphorePermit);

/// What a checkout of [`IDLE_ONLY`] found: a backend that passed the
/// checkout checks, or `None` (none idle, or none passed: the slow path
/// decides).
fn idle_backend(
    got: Result<Object<BackendManager>, PoolError<OpenError>>,
) -> Result<Option<Object<BackendManager>>, AcquireError> {
    match got {
        Ok(obj) => Ok(Some(obj)),
        Err(PoolError::Backend(OpenError::Backend(e))) => Err(AcquireError::Backend(e)),
        Err(PoolError::Closed) => Err(AcquireError::Closed),
        Err(_) => Ok(None),
    }
}

impl Pool {
    /// Waits (first come, first served, and not while paused) for a clean
    /// backend for `client`, at most `query_wait_timeout`. Only a client
    /// that has to wait has its wait recorded (in its registry entry, for
    /// SHOW CLIENTS and SHOW POOLS, and in the lease, for SHOW STATS).
    pub async fn acquire(
        self: &Arc<Self>,
        client: &ClientEntry,
        app_name: Option<&str>,
    ) -> Result<Lease, AcquireError> {
        self.acquire_for(Some(client), app_name).await
    }

    /// A backend for the pooler's own work (an `auth.query` lookup): no
    /// client waits for it in SHOW CLIENTS.
    pub async fn acquire_own(self: &Arc<Self>) -> Result<Lease, AcquireError> {
        self.acquire_for(None, None).await
    }

    async fn acquire_for(
        self: &Arc<Self>,
        client: Option<&ClientEntry>,
        app_name: Option<&str>,
    ) -> Result<Lease, AcquireError> {
        if let Ok(mut hint) = self.inner.manager().app_name_hint.lock() {
            if hint.as_deref() != app_name {
                *hint = app_name.map(str::to_string);
            }
        }
        // One deadline for the whole checkout, fast path included: the
        // checkout checks may talk to the server (server_check_query), and
        // a server that stops answering must not keep a client past
        // query_wait_timeout. Set once something has to wait.
        let tuning = self.tuning();
        let timed_out = AcquireError::WaitTimeout(tuning.wait_timeout);
        let mut deadline = None;
        let fast = match self.main.clone().try_acquire_owned() {
            Ok(permit) if !self.is_paused() => {
                self.idle_now(permit, &tuning, &mut deadline).await?
            }
            _ => None,
        };
        let (mut obj, permit, waited) = match fast {
            Some((obj, permit)) => (obj, permit, Duration::ZERO),
            None => {
                let started = Instant::now();
                let deadline = deadline.unwrap_or_else(|| {
                    tokio::time::Instant::from_std(started) + tuning.wait_timeout
                });
                let _wait = client.map(|c| c.waiting(started));
                let ((obj, permit), now) = self.wait_turn(deadline).await?.ok_or(timed_out)?;
                let now = now.unwrap_or_else(Instant::now);
                (obj, permit, now.saturating_duration_since(started))
            }
        };
        obj.clean = false;
        // A reload may have changed it since the backend opened.
        obj.backend.set_command_timeout(tuning.command_timeout);
        // 0: the pooler itself (client ids start at 1).
        obj.backend.lent_to(client.map_or(0, ClientEntry::id));
        Ok(Lease {
            obj: Some(obj),
            pool: self.clone(),
            permit: Some(permit),
            waited,
        })
    }

    /// The fast path, taken by most transactions in transaction pooling
    /// when no client waits: with a place already (tokio's fair semaphore
    /// has none free while anyone waits, so this cannot jump the queue),
    /// a backend idle in deadpool. No clock is read and no timer
    /// registered unless deadpool's checkout has to wait (a
    /// `server_check_query`); the checkout's `deadline` is set then.
    /// `None`: nothing idle, or nothing that passed the checks (the slow
    /// path decides, within the same deadline).
    async fn idle_now(
        &self,
        permit: OwnedSemaphorePermit,
        tuning: &Tuning,
        deadline: &mut Option<tokio::time::Instant>,
    ) -> Result<Option<Checkout>, AcquireError> {
        let limit = tuning.wait_timeout;
        if self.inner.status().available == 0 {
            return Ok(None);
        }
        // deadpool's checkout is awaited here directly: wrapped in an async
        // fn of ours, its state would be held twice.
        let mut get = std::pin::pin!(self.inner.timeout_get(&IDLE_ONLY));
        let got = match std::future::poll_fn(|cx| Poll::Ready(get.as_mut().poll(cx))).await {
            Poll::Ready(got) => got,
            Poll::Pending => {
                let until = *deadline.insert(tokio::time::Instant::now() + limit);
                match tokio::time::timeout_at(until, get).await {
                    Err(_) => return Err(AcquireError::WaitTimeout(limit)),
                    Ok(got) => got,
                }
            }
        };
        Ok(idle_backend(got)?.map(|obj| (obj, permit)))
    }

    /// A waiting checkout, until `deadline` (`None`: it passed): in the
    /// queue of clients a ticket for a backend given back is handed to (see
    /// [`super::waiters`], which also keeps the deadline) and in the
    /// semaphore's, the same order in both, until either serves it. With a
    /// ticket comes the clock reading of its backend's checks.
    async fn wait_turn(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<Option<(Checkout, Option<Instant>)>, AcquireError> {
        let Queued {
            count: _count,
            mut turn,
        } = Queued::join(self, deadline);
        let mut admit = std::pin::pin!(self.admit());
        let permit = tokio::select! {
            biased;
            t = &mut turn => match t {
                Ok(Turn::Handed(ticket)) => {
                    let (obj, permit, at) = ticket.claim().ok_or(AcquireError::Closed)?;
                    return Ok(Some(((obj, permit), Some(at))));
                }
                Ok(Turn::Expired) => return Ok(None),
                // Out of the queue (it was cleared): a timer of its own.
                Err(_) => match tokio::time::timeout_at(deadline, admit).await {
                    Ok(permit) => permit?,
                    Err(_) => return Ok(None),
                },
            },
            permit = &mut admit => permit?,
        };
        // Served by a freed place: a backend handed over from now on goes
        // to the next client in line.
        drop(turn);
        // Boxed: only a checkout that found no backend handed over pays for
        // deadpool's state, which would otherwise be part of every
        // transaction's future. Out of the queue, its deadline is its own.
        match tokio::time::timeout_at(deadline, Box::pin(self.checkout(permit))).await {
            Ok(checkout) => Ok(Some((checkout?, None))),
            Err(_) => Ok(None),
        }
    }

    /// A backend for the holder of a place (`permit`): one idle in
    /// deadpool, or a new one (not while the pool is paused).
    async fn checkout(&self, permit: OwnedSemaphorePermit) -> Result<Checkout, AcquireError> {
        if self.is_paused() {
            let mut paused = self.paused.subscribe();
            // Err only if the sender is gone, which cannot happen while `self` lives.
            let _ = paused.wait_for(|p| !*p).await;
        }
        let timeouts = Timeouts {
            wait: None,
            create: None,
            recycle: None,
        };
        let manager = self.inner.manager();
        let mut paid = Prepaid::new(manager);
        loop {
            let got = self.inner.timeout_get(&timeouts).await;
            paid.settle(&got);
            let err = match got {
                Ok(obj) => return Ok((obj, permit)),
                // Opening waits for no shared limit; this client does, then
                // hands what it took to the backend it opens next.
                Err(PoolError::Backend(OpenError::Limit)) => {
                    // None: a backend of this pool went idle meanwhile; take it.
                    if let Some(set) = manager.wait_for_limits().await {
                        paid.pay(set);
                    }
                    continue;
                }
                Err(PoolError::Backend(OpenError::Backend(e))) => AcquireError::Backend(e),
                Err(PoolError::Closed) => AcquireError::Closed,
                Err(e) => AcquireError::Backend(BackendError::Protocol(e.to_string())),
            };
            return Err(err);
        }
    }

    /// One of the `pool_size` places, or a reserve place once this client
    /// has waited `reserve_timeout`; FIFO in both queues (tokio's semaphore
    /// is fair, and the main-queue place is kept while the reserve is tried).
    async fn admit(&self) -> Result<OwnedSemaphorePermit, AcquireError> {
        let main = self.main.clone().acquire_owned();
        tokio::pin!(main);
        let tuning = self.tuning();
        let permit = if tuning.reserve() == 0 {
            main.await
        } else {
            tokio::select! {
                biased;
                p = &mut main => p,
                _ = tokio::time::sleep(tuning.reserve_timeout) => tokio::select! {
                    biased;
                    p = &mut main => p,
                    p = self.reserve.clone().acquire_owned() => {
                        tracing::info!(
                            database = %self.key.database,
                            user = %self.key.user,
                            "taking a backend from the reserve pool"
                        );
                        p
                    }
                },
            }
        };
        permit.map_err(|_| AcquireError::Closed)
    }
}

/// A waiting checkout: counted in [`Pool::waiting`] until it ends, however
/// it ends (with a backend, a timeout, or dropped by its client's select),
/// and in the queue backends are handed over to.
struct Queued<'p> {
    count: Counted<'p>,
    turn: tokio::sync::oneshot::Receiver<Turn<Ticket>>,
}

impl<'p> Queued<'p> {
    fn join(pool: &'p Pool, deadline: tokio::time::Instant) -> Queued<'p> {
        // Counted first: a backend given back sees the waiter before it is queued.
        pool.waiting.fetch_add(1, Ordering::Relaxed);
        let count = Counted(pool);
        Queued {
            count,
            turn: pool.waiters.join(deadline),
        }
    }
}

/// One client in [`Pool::waiting`].
struct Counted<'p>(&'p Pool);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        // The last waiter gone: the queue holds only ended waiters now.
        if self.0.waiting.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.waiters.clear();
        }
    }
}
