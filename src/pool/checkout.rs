//! Checking a backend out: a place in the pool (first come, first served,
//! then the reserve), then an idle backend or a new one, all within
//! `query_wait_timeout` and never while the pool is paused.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use deadpool::managed::{Object, PoolError, Timeouts};
use tokio::sync::OwnedSemaphorePermit;

use super::limits::Prepaid;
use super::{BackendManager, Lease, OpenError, Pool};
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
        // checkout checks may talk to the server (server_check_query, or
        // opening a backend when a check fails), and a server that stops
        // answering must not keep a client past query_wait_timeout.
        let tuning = self.tuning();
        let deadline = tokio::time::Instant::now() + tuning.wait_timeout;
        let timed_out = AcquireError::WaitTimeout(tuning.wait_timeout);
        // Fast path, taken by most transactions in transaction pooling: a
        // place is free (tokio's fair semaphore has none free while anyone
        // waits, so this cannot jump the queue) and a backend is idle. The
        // timer is only registered if the checkout has to wait (tokio polls
        // the future before its deadline). deadpool's checkout is awaited
        // here directly: wrapped in an async fn of ours, its state would be
        // held twice in this future.
        let fast = match self.main.clone().try_acquire_owned() {
            Ok(permit) if !self.is_paused() && self.inner.status().available > 0 => {
                match tokio::time::timeout_at(deadline, self.inner.timeout_get(&IDLE_ONLY)).await {
                    Err(_) => return Err(timed_out),
                    Ok(got) => idle_backend(got)?.map(|obj| (obj, permit)),
                }
            }
            _ => None,
        };
        let (mut obj, permit, waited) = match fast {
            Some((obj, permit)) => (obj, permit, Duration::ZERO),
            None => {
                let started = std::time::Instant::now();
                let _wait = client.map(ClientEntry::waiting);
                self.waiting.fetch_add(1, Ordering::Relaxed);
                // Boxed: only a waiting checkout pays for its state, which
                // would otherwise be part of every transaction's future.
                let got = tokio::time::timeout_at(deadline, Box::pin(self.checkout())).await;
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                match got {
                    Err(_) => return Err(timed_out),
                    Ok(got) => {
                        let (obj, permit) = got?;
                        (obj, permit, started.elapsed())
                    }
                }
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

    /// A place in the pool, then a backend.
    async fn checkout(
        &self,
    ) -> Result<(Object<BackendManager>, OwnedSemaphorePermit), AcquireError> {
        let permit = self.admit().await?;
        let mut paused = self.paused.subscribe();
        // Err only if the sender is gone, which cannot happen while `self` lives.
        let _ = paused.wait_for(|p| !*p).await;
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
