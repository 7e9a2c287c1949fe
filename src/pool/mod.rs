//! Pools of authenticated backend sessions, keyed by (database, user), built
//! on deadpool.
//!
//! deadpool runs `Manager::recycle` when a backend is checked *out*, so any
//! reset done there would land on the next client's login time — the figure
//! the overhead report measures. Here the reset runs when a session is
//! *released* ([`Lease::release`]), in its own task, and `recycle` is only a
//! cheap "broken or dirty?" check: the reset flag, `server_lifetime`, a
//! non-blocking look at the socket, and — only for a backend idle longer
//! than `server_check_delay` — `server_check_query`, which PgBouncer runs at
//! the same point.
//!
//! Who gets a backend, in order:
//! - a client first takes one of the pool's `pool_size` places (a fair
//!   semaphore: first come, first served), or, once it has waited
//!   `reserve_pool_timeout`, one of `reserve_pool_size` extra places; it
//!   keeps the place until its backend is back in the pool or closed;
//! - then deadpool gives it an idle backend, or opens one (deadpool's size
//!   is pool + reserve) within the shared `max_db_connections` and
//!   `max_user_connections` limits ([`limits`]);
//! - a maintenance task ([`janitor`]) keeps `min_pool_size` backends open
//!   and closes idle ones that are dead, too old or idle too long.

mod from_config;
mod janitor;
mod lease;
mod limits;
mod manager;
mod params;
mod reconnect;
mod registry;
mod servers;
mod tuning;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use deadpool::managed::{self, Object, PoolError, Timeouts};
use deadpool::Runtime;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

pub use from_config::{pool_key, NoPool};
pub use lease::Lease;
pub use limits::LimitGroup;
use limits::Prepaid;
pub use manager::{BackendManager, OpenError, Pooled};
pub use params::ParamCache;
pub use registry::PoolRegistry;
pub use servers::{ServerInfo, ServerRegistry, ServerState};
pub use tuning::Tuning;

use crate::auth::SaltedPasswordCache;
use crate::auth::ScramCredential;
use crate::backend::{BackendError, BackendIds, Credentials, HostRoute};
use crate::registry::ClientEntry;
use crate::stats::Stats;

/// Identifies one pool.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolKey {
    /// Database name as the client asked for it.
    pub database: String,
    /// Role the backends log in as.
    pub user: String,
}

/// What a credential change does with the SCRAM keys clients lent a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LentKeys {
    /// Keep them: the secret they were proved against is unchanged.
    Keep,
    /// Forget them: the next SCRAM login lends keys for the new secret.
    Drop,
}

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

/// One (database, user) pool.
pub struct Pool {
    /// Which pool this is.
    pub key: PoolKey,
    inner: managed::Pool<BackendManager>,
    /// One permit per `pool_size` backend a client may hold.
    main: Arc<Semaphore>,
    /// One permit per reserve backend; only after `reserve_timeout`.
    reserve: Arc<Semaphore>,
    /// The settings in force; a reload sends new ones ([`Pool::retune`]),
    /// which the manager and the maintenance task read too.
    tuning: watch::Sender<Arc<Tuning>>,
    /// Clients waiting for a backend right now.
    waiting: AtomicUsize,
    /// True while PAUSEd: no backend is handed out.
    paused: watch::Sender<bool>,
    /// Cancelled by KILL: every session on this pool ends. A child of
    /// `sessions_end`.
    kill: Mutex<CancellationToken>,
    /// The pooler's "every session ends" token, parent of `kill`.
    sessions_end: CancellationToken,
    /// Stops the maintenance task.
    stop: CancellationToken,
}

/// Settings for a new pool.
pub struct PoolSettings {
    /// What a reload may change later.
    pub tuning: Tuning,
    /// Shared limits (`max_db_connections`, `max_user_connections`), from
    /// [`PoolRegistry::limits_for`].
    pub limits: Vec<Arc<LimitGroup>>,
    /// Extra startup parameters for every backend (from the conninfo).
    pub startup_params: Vec<(String, String)>,
    /// Where connects and closes are counted.
    pub stats: Arc<Stats>,
    /// Where backend ids come from (one source per pooler).
    pub backend_ids: Arc<BackendIds>,
    /// Cancelled when every session must end (the pool's KILL token is
    /// its child).
    pub sessions_end: CancellationToken,
}

impl Pool {
    /// A pool that opens backends on `route`'s hosts with `creds`, and its
    /// maintenance task (which needs a tokio runtime).
    pub fn new(
        key: PoolKey,
        route: HostRoute,
        creds: Credentials,
        cache: Arc<SaltedPasswordCache>,
        settings: PoolSettings,
    ) -> Result<Pool, String> {
        let tuning = watch::channel(Arc::new(settings.tuning)).0;
        let manager = BackendManager {
            key: key.clone(),
            route,
            creds: RwLock::new(creds),
            cache,
            tuning: tuning.subscribe(),
            startup_params: settings.startup_params,
            stats: settings.stats,
            servers: Arc::new(ServerRegistry::default()),
            app_name_hint: Mutex::new(None),
            limits: settings.limits.clone(),
            this: OnceLock::new(),
            opening: AtomicUsize::new(0),
            params: Arc::new(ParamCache::default()),
            pacer: Default::default(),
            prepaid: Mutex::default(),
            ids: settings.backend_ids,
            reconnect_upto: AtomicU64::new(0),
        };
        let now = tuning.borrow().clone();
        let inner = managed::Pool::builder(manager)
            .max_size(now.size + now.reserve())
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| format!("cannot build pool: {e}"))?;
        let _ = inner.manager().this.set(inner.weak());
        for group in &settings.limits {
            group.join(key.clone(), inner.weak());
        }
        let main = Arc::new(Semaphore::new(now.size));
        let paused = watch::channel(false).0;
        let stop = CancellationToken::new();
        let janitor = janitor::Janitor {
            inner: inner.clone(),
            main: main.clone(),
            paused: paused.subscribe(),
            stop: stop.clone(),
            tuning: tuning.subscribe(),
        };
        tokio::spawn(janitor.run());
        Ok(Pool {
            key,
            inner,
            main,
            reserve: Arc::new(Semaphore::new(now.reserve())),
            tuning,
            waiting: AtomicUsize::new(0),
            paused,
            kill: Mutex::new(settings.sessions_end.child_token()),
            sessions_end: settings.sessions_end,
            stop,
        })
    }

    /// Credentials for backends opened from now on (a reload changed the
    /// config or the auth file); `lent` says what becomes of SCRAM keys a
    /// client's proof lent the pool.
    pub fn replace_credentials(&self, mut creds: Credentials, lent: LentKeys) {
        if let Ok(mut c) = self.inner.manager().creds.write() {
            if lent == LentKeys::Keep {
                creds.scram = c.scram.take();
            }
            *c = creds;
        }
    }

    /// Records SCRAM keys a client's proof revealed, for backends opened from now on.
    pub fn lend_scram_keys(&self, keys: ScramCredential) {
        if let Ok(mut c) = self.inner.manager().creds.write() {
            c.scram = Some(keys);
        }
    }

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
        // the future before its deadline).
        let fast = match self.main.clone().try_acquire_owned() {
            Ok(permit) if !self.is_paused() => {
                match tokio::time::timeout_at(deadline, self.idle_backend()).await {
                    Err(_) => return Err(timed_out),
                    Ok(got) => got?.map(|obj| (obj, permit)),
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
                let got = tokio::time::timeout_at(deadline, self.checkout()).await;
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

    /// An idle backend that passes the checkout checks without waiting or
    /// opening one (`None` otherwise: the slow path decides).
    async fn idle_backend(&self) -> Result<Option<Object<BackendManager>>, AcquireError> {
        if self.inner.status().available == 0 {
            return Ok(None);
        }
        let zero = Timeouts {
            wait: Some(Duration::ZERO),
            create: None,
            recycle: None,
        };
        match self.inner.timeout_get(&zero).await {
            Ok(obj) => Ok(Some(obj)),
            Err(PoolError::Backend(OpenError::Backend(e))) => Err(AcquireError::Backend(e)),
            Err(PoolError::Closed) => Err(AcquireError::Closed),
            Err(_) => Ok(None),
        }
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

    /// Why a backend coming back must be closed rather than pooled:
    /// past `server_lifetime`, or its server no longer fits
    /// `target_session_attrs`.
    fn retire_reason(&self, obj: &Pooled) -> Option<&'static str> {
        let manager = self.inner.manager();
        if manager.close_needed(obj.backend.id()) {
            return Some(manager::RECONNECTED);
        }
        obj.past_lifetime(self.tuning().lifetime)
            .or_else(|| manager.misfit(&obj.backend))
    }

    /// Clients waiting for a backend now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Backends connecting or logging in right now.
    pub fn logging_in(&self) -> usize {
        self.inner.manager().opening.load(Ordering::Relaxed)
    }

    /// Parameter defaults and accepted values (logins without a backend).
    pub fn param_cache(&self) -> &ParamCache {
        &self.inner.manager().params
    }

    /// The open backends of this pool.
    pub fn servers(&self) -> &Arc<ServerRegistry> {
        &self.inner.manager().servers
    }

    /// Stops handing out backends (clients wait, within query_wait_timeout),
    /// closes the idle ones, and resolves once no backend is lent out.
    pub async fn pause(&self) {
        self.paused.send_replace(true);
        loop {
            self.close_idle();
            if self
                .servers()
                .list()
                .iter()
                .all(|s| s.state == ServerState::Idle)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Hands out backends again after [`Pool::pause`].
    pub fn resume(&self) {
        self.paused.send_replace(false);
    }

    /// True while paused.
    pub fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Ends every session on this pool (their clients get 57P01) and closes
    /// its backends; new clients are served by fresh backends.
    pub fn kill(&self) {
        let fresh = self.sessions_end.child_token();
        let old = match self.kill.lock() {
            Ok(mut k) => std::mem::replace(&mut *k, fresh),
            Err(p) => std::mem::replace(&mut *p.into_inner(), fresh),
        };
        old.cancel();
        self.close_idle();
    }

    /// Cancelled when the pool is KILLed or every session must end.
    pub fn kill_token(&self) -> CancellationToken {
        match self.kill.lock() {
            Ok(k) => k.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Closes the backends sitting idle in the pool.
    fn close_idle(&self) {
        self.inner.retain(|_, _| false);
    }

    /// Backends open and idle in the pool, and `pool_size` (the reserve
    /// comes on top).
    pub fn status(&self) -> (usize, usize, usize) {
        let s = self.inner.status();
        (s.size, s.available, self.tuning().size)
    }

    /// Stops handing out backends, drops the idle ones and ends the
    /// maintenance task.
    pub fn close(&self) {
        self.stop.cancel();
        self.main.close();
        self.reserve.close();
        self.inner.close();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
