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
//! - a backend given back while clients wait goes on the [`shelf`], and
//!   the first of them gets a ticket for it with its place ([`waiters`]);
//!   otherwise the client with a place gets an idle backend from
//!   deadpool, or deadpool opens one (deadpool's size is pool + reserve)
//!   within the shared `max_db_connections` and `max_user_connections`
//!   limits ([`limits`]);
//! - a maintenance task ([`janitor`]) keeps `min_pool_size` backends open
//!   and closes idle ones that are dead, too old or idle too long.

mod checkout;
mod from_config;
mod janitor;
mod lease;
mod limits;
mod manager;
mod open;
mod params;
mod reconnect;
mod registry;
mod servers;
mod shelf;
mod tuning;
mod waiters;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use deadpool::managed;
use deadpool::Runtime;
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

pub use checkout::AcquireError;
pub use from_config::{pool_key, NoPool};
pub use lease::Lease;
pub use limits::LimitGroup;
pub use manager::{BackendManager, OpenError, Pooled};
pub use params::ParamCache;
pub use registry::PoolRegistry;
pub use servers::{ServerInfo, ServerRegistry, ServerState};
pub use tuning::Tuning;

use crate::auth::SaltedPasswordCache;
use crate::auth::ScramCredential;
use crate::backend::{BackendIds, Credentials, HostRoute};
use crate::stats::Stats;

/// Identifies one pool. It hashes as its two strings do (see `Hash`), so
/// the pool registry can be searched with borrowed ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PoolKey {
    /// Database name as the client asked for it.
    pub database: String,
    /// Role the backends log in as.
    pub user: String,
}

impl std::hash::Hash for PoolKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // The pair of strings, exactly as the registry's borrowed view
        // hashes it: a derived hash is not promised to stay the same.
        (self.database.as_str(), self.user.as_str()).hash(h);
    }
}

/// What a credential change does with the SCRAM keys clients lent a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LentKeys {
    /// Keep them: the secret they were proved against is unchanged.
    Keep,
    /// Forget them: the next SCRAM login lends keys for the new secret.
    Drop,
}

/// One (database, user) pool.
pub struct Pool {
    /// Which pool this is.
    pub key: PoolKey,
    inner: managed::Pool<BackendManager>,
    /// One permit per `pool_size` backend a client may hold.
    main: Arc<Semaphore>,
    /// Places a reload's smaller `pool_size` has yet to take back from
    /// their holders (see `tuning::resize`): none is handed over meanwhile.
    main_owed: Arc<AtomicUsize>,
    /// One permit per reserve backend; only after `reserve_timeout`.
    reserve: Arc<Semaphore>,
    /// The settings in force; a reload sends new ones ([`Pool::retune`]),
    /// which the manager and the maintenance task read too.
    tuning: watch::Sender<Arc<Tuning>>,
    /// Clients waiting for a backend right now.
    waiting: AtomicUsize,
    /// True while PAUSEd: no backend is handed out.
    paused: watch::Sender<bool>,
    /// The clients waiting, to whom backends given back are handed over.
    waiters: Arc<waiters::Waiters<shelf::Ticket>>,
    /// Backends handed over, until their waiters run.
    shelf: Arc<shelf::Shelf>,
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
            .queue_mode(managed::QueueMode::Lifo)
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
        let waiters = Arc::new(waiters::Waiters::<shelf::Ticket>::default());
        tokio::spawn(waiters.clone().watch(stop.clone()));
        Ok(Pool {
            key,
            inner,
            main,
            main_owed: Arc::default(),
            reserve: Arc::new(Semaphore::new(now.reserve())),
            tuning,
            waiting: AtomicUsize::new(0),
            paused,
            waiters,
            shelf: Arc::default(),
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

    /// Why a backend coming back must be closed rather than pooled:
    /// past `server_lifetime`, or its server no longer fits
    /// `target_session_attrs`.
    fn retire_reason(&self, obj: &Pooled, now: std::time::Instant) -> Option<&'static str> {
        let manager = self.inner.manager();
        if manager.close_needed(obj.backend.id()) {
            return Some(manager::RECONNECTED);
        }
        obj.past_lifetime(self.tuning().lifetime, now)
            .or_else(|| manager.misfit(&obj.backend))
    }

    /// True while more backends are open than a reload's smaller size
    /// allows: deadpool closes those that come back until it fits.
    fn over_size(&self) -> bool {
        let s = self.inner.status();
        s.size > s.max_size
    }

    /// True when a backend coming back under `permit` goes straight to a
    /// waiting client (see [`waiters`]): clients wait, the place is one of
    /// the pool's `pool_size` (a reserve place goes back to the reserve),
    /// and the pool is not paused, nor over or shrinking to a reload's
    /// smaller size.
    fn hands_over(&self, permit: &tokio::sync::OwnedSemaphorePermit) -> bool {
        self.waiting() > 0
            && Arc::ptr_eq(permit.semaphore(), &self.main)
            && !self.is_paused()
            && self.main_owed.load(Ordering::Relaxed) == 0
            && !self.over_size()
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

    /// KILL: closes the backends idle in the pool; the sessions on it are
    /// ended through the client registry ([`crate::pooler::Pooler::kill_pool`]).
    /// New clients are served by fresh backends.
    pub fn kill(&self) {
        self.close_idle();
    }

    /// The pool's identity while it lives (its address, never 0), by which
    /// the client registry knows which sessions a KILL ends.
    pub fn identity(&self) -> usize {
        self as *const Pool as usize
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
        self.waiters.clear();
        self.inner.close();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
