//! Pools of authenticated backend sessions, keyed by (database, user), built
//! on deadpool.
//!
//! deadpool runs `Manager::recycle` when a backend is checked *out*, so any
//! reset done there would land on the next client's login time — the figure
//! the overhead report measures. Here the reset runs when a session is
//! *released* ([`Lease::release`]), in its own task, and `recycle` is only a
//! cheap "was it reset cleanly?" check.

mod lease;
mod manager;
mod registry;
mod servers;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use deadpool::managed::{self, PoolError, Timeouts};
use deadpool::Runtime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use lease::Lease;
pub use manager::{BackendManager, Pooled};
pub use registry::PoolRegistry;
pub use servers::{ServerInfo, ServerRegistry, ServerState};

use crate::auth::SaltedPasswordCache;
use crate::auth::ScramCredential;
use crate::backend::{BackendError, BackendTarget, Credentials};
use crate::stats::Stats;
use crate::tls::BackendTls;

/// Identifies one pool.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    /// Database name as the client asked for it.
    pub database: String,
    /// Role the backends log in as.
    pub user: String,
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
    wait_timeout: Duration,
    reset_query: String,
    /// Clients waiting for a backend right now.
    waiting: AtomicUsize,
    /// True while PAUSEd: no backend is handed out.
    paused: watch::Sender<bool>,
    /// Cancelled by KILL: every session on this pool ends.
    kill: Mutex<CancellationToken>,
}

/// Settings for a new pool.
pub struct PoolSettings {
    /// Most backends open at once.
    pub size: usize,
    /// Longest wait for a free backend.
    pub wait_timeout: Duration,
    /// Limit on opening one backend.
    pub connect_timeout: Duration,
    /// Run at release; "" skips it.
    pub reset_query: String,
    /// Extra startup parameters for every backend (from the conninfo).
    pub startup_params: Vec<(String, String)>,
    /// TLS toward the server.
    pub tls: BackendTls,
    /// Where connects and closes are counted.
    pub stats: Arc<Stats>,
}

impl Pool {
    /// A pool that opens backends to `target` with `creds`.
    pub fn new(
        key: PoolKey,
        target: BackendTarget,
        creds: Credentials,
        cache: Arc<SaltedPasswordCache>,
        settings: PoolSettings,
    ) -> Result<Pool, String> {
        let manager = BackendManager {
            target: Arc::new(target),
            tls: settings.tls,
            creds: RwLock::new(creds),
            cache,
            connect_timeout: settings.connect_timeout,
            startup_params: settings.startup_params,
            stats: settings.stats,
            servers: Arc::new(ServerRegistry::default()),
            app_name_hint: Mutex::new(None),
        };
        let inner = managed::Pool::builder(manager)
            .max_size(settings.size)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| format!("cannot build pool: {e}"))?;
        Ok(Pool {
            key,
            inner,
            wait_timeout: settings.wait_timeout,
            reset_query: settings.reset_query,
            waiting: AtomicUsize::new(0),
            paused: watch::channel(false).0,
            kill: Mutex::new(CancellationToken::new()),
        })
    }

    /// Records SCRAM keys a client's proof revealed, for backends opened from now on.
    pub fn lend_scram_keys(&self, keys: ScramCredential) {
        if let Ok(mut c) = self.inner.manager().creds.write() {
            c.scram = Some(keys);
        }
    }

    /// Waits (first come, first served, and not while paused) for a clean
    /// backend for client `client_id`.
    pub async fn acquire(
        self: &Arc<Self>,
        client_id: u64,
        app_name: Option<&str>,
    ) -> Result<Lease, AcquireError> {
        if let Ok(mut hint) = self.inner.manager().app_name_hint.lock() {
            if hint.as_deref() != app_name {
                *hint = app_name.map(str::to_string);
            }
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let got = tokio::time::timeout(self.wait_timeout, self.wait_and_get()).await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        let mut obj = match got {
            Err(_) | Ok(Err(PoolError::Timeout(_))) => {
                return Err(AcquireError::WaitTimeout(self.wait_timeout))
            }
            Ok(Ok(obj)) => obj,
            Ok(Err(PoolError::Backend(e))) => return Err(AcquireError::Backend(e)),
            Ok(Err(PoolError::Closed)) => return Err(AcquireError::Closed),
            Ok(Err(e)) => return Err(AcquireError::Backend(BackendError::Protocol(e.to_string()))),
        };
        obj.clean = false;
        obj.backend.clients_served += 1;
        self.servers()
            .set_state(obj.backend.id, ServerState::Active, Some(client_id));
        Ok(Lease {
            obj: Some(obj),
            pool: self.clone(),
        })
    }

    async fn wait_and_get(
        &self,
    ) -> Result<managed::Object<BackendManager>, PoolError<BackendError>> {
        let mut paused = self.paused.subscribe();
        // Err only if the sender is gone, which cannot happen while `self` lives.
        let _ = paused.wait_for(|p| !*p).await;
        let timeouts = Timeouts {
            wait: None,
            create: None,
            recycle: None,
        };
        self.inner.timeout_get(&timeouts).await
    }

    /// Clients waiting for a backend now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
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
        let old = match self.kill.lock() {
            Ok(mut k) => std::mem::take(&mut *k),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        old.cancel();
        self.close_idle();
    }

    /// Cancelled when the pool is KILLed.
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

    /// Backends open and idle in the pool, and the configured maximum.
    pub fn status(&self) -> (usize, usize, usize) {
        let s = self.inner.status();
        (s.size, s.available, s.max_size)
    }

    /// Stops handing out backends and drops the idle ones.
    pub fn close(&self) {
        self.inner.close();
    }
}
