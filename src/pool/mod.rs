//! Pools of authenticated backend sessions, keyed by (database, user), built
//! on deadpool.
//!
//! deadpool runs `Manager::recycle` when a backend is checked *out*, so any
//! reset done there would land on the next client's login time — the figure
//! the overhead report measures. Here the reset runs when a session is
//! *released* ([`Lease::release`]), in its own task, and `recycle` is only a
//! cheap "was it reset cleanly?" check.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use deadpool::managed::{self, Metrics, Object, PoolError, RecycleError, RecycleResult, Timeouts};
use deadpool::Runtime;

use crate::auth::SaltedPasswordCache;
use crate::backend::{Backend, BackendError, BackendTarget, Credentials, ScramPassthrough};
use crate::stats::{Class, Stats};
use crate::tls::connector::Opening;
use crate::tls::BackendTls;

/// Identifies one pool.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    /// Database name as the client asked for it.
    pub database: String,
    /// Role the backends log in as.
    pub user: String,
}

/// A pooled backend plus whether its last reset succeeded.
pub struct Pooled {
    /// The connection.
    pub backend: Backend,
    /// Set only by a successful reset at release; `recycle` refuses anything else.
    clean: bool,
}

/// Creates backends for one pool and vets them on checkout.
pub struct BackendManager {
    target: Arc<BackendTarget>,
    tls: BackendTls,
    creds: RwLock<Credentials>,
    cache: Arc<SaltedPasswordCache>,
    connect_timeout: Duration,
    startup_params: Vec<(String, String)>,
    stats: Arc<Stats>,
}

impl managed::Manager for BackendManager {
    type Type = Pooled;
    type Error = BackendError;

    async fn create(&self) -> Result<Pooled, BackendError> {
        let creds = self.creds.read().map(|c| c.clone()).unwrap_or_default();
        let connect = Backend::connect(
            self.target.clone(),
            &self.tls,
            &creds,
            &self.startup_params,
            &self.cache,
        );
        let result = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(r) => r,
            Err(_) => Err(BackendError::Timeout(self.target.describe())),
        };
        match result {
            Ok(backend) => {
                self.stats
                    .backend_connect(backend.class(), &backend.connect_phases());
                tracing::info!(
                    backend = backend.id,
                    server = %self.target.describe(),
                    user = %self.target.user,
                    database = %self.target.dbname,
                    pid = backend.cancel.pid,
                    "backend connected"
                );
                Ok(Pooled {
                    backend,
                    clean: true,
                })
            }
            Err(e) => {
                let tls = self.tls.opening() == Opening::Require;
                self.stats
                    .backend_failed(Class::backend(self.target.transport(), tls));
                Err(e)
            }
        }
    }

    async fn recycle(&self, obj: &mut Pooled, _: &Metrics) -> RecycleResult<BackendError> {
        if obj.clean {
            Ok(())
        } else {
            Err(RecycleError::message("backend was not reset cleanly"))
        }
    }
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
    /// Client logins that reused a backend (for the amortisation figure).
    pub reused_logins: AtomicU64,
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
            reused_logins: AtomicU64::new(0),
        })
    }

    /// Records SCRAM keys a client's proof revealed, for backends opened from now on.
    pub fn lend_scram_keys(&self, keys: ScramPassthrough) {
        if let Ok(mut c) = self.inner.manager().creds.write() {
            c.scram = Some(keys);
        }
    }

    /// True when backends can be opened without a client's SCRAM keys.
    pub fn has_credentials(&self) -> bool {
        self.inner
            .manager()
            .creds
            .read()
            .map(|c| c.password.is_some() || c.md5_hash.is_some() || c.scram.is_some())
            .unwrap_or(false)
    }

    /// Waits (first come, first served) for a clean backend.
    pub async fn acquire(self: &Arc<Self>) -> Result<Lease, AcquireError> {
        let timeouts = Timeouts {
            wait: Some(self.wait_timeout),
            create: None,
            recycle: None,
        };
        match self.inner.timeout_get(&timeouts).await {
            Ok(mut obj) => {
                obj.clean = false;
                obj.backend.clients_served += 1;
                if obj.backend.clients_served > 1 {
                    self.reused_logins.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Lease {
                    obj: Some(obj),
                    pool: self.clone(),
                })
            }
            Err(PoolError::Timeout(_)) => Err(AcquireError::WaitTimeout(self.wait_timeout)),
            Err(PoolError::Backend(e)) => Err(AcquireError::Backend(e)),
            Err(PoolError::Closed) => Err(AcquireError::Closed),
            Err(e) => Err(AcquireError::Backend(BackendError::Protocol(e.to_string()))),
        }
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

/// A backend lent to one client. Give it back with [`Lease::release`];
/// dropping it without release closes the backend (it may be mid-query).
pub struct Lease {
    obj: Option<Object<BackendManager>>,
    pool: Arc<Pool>,
}

impl Lease {
    /// The backend.
    pub fn backend(&mut self) -> &mut Backend {
        // Invariant: `obj` is Some until release/discard consume the lease.
        &mut self.obj.as_mut().expect("lease used after release").backend
    }

    /// Returns the backend: `reusable` says the client left it at a message
    /// boundary. The reset runs in the background so the next client's login
    /// does not wait for it; a failed reset closes the backend.
    pub fn release(mut self, reusable: bool) {
        let Some(mut obj) = self.obj.take() else {
            return;
        };
        if !reusable {
            discard(obj, "client left the server connection mid-message");
            return;
        }
        let reset_query = self.pool.reset_query.clone();
        tokio::spawn(async move {
            match obj.backend.reset(&reset_query).await {
                Ok(()) => obj.clean = true,
                Err(e) => discard(obj, &e.to_string()),
            }
        });
    }
}

fn discard(obj: Object<BackendManager>, why: &str) {
    let stats = Object::pool(&obj).map(|p| p.manager().stats.clone());
    let pooled = Object::take(obj);
    let b = &pooled.backend;
    if let Some(stats) = stats {
        stats.backend_closed(b.class(), b.clients_served);
    }
    tracing::info!(backend = b.id, reason = why, "backend closed");
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(obj) = self.obj.take() {
            discard(obj, "session ended without a clean release");
        }
    }
}

/// Every pool, created on first use.
#[derive(Default)]
pub struct PoolRegistry {
    pools: Mutex<HashMap<PoolKey, Arc<Pool>>>,
}

impl PoolRegistry {
    /// The pool for `key`, created by `make` if it does not exist yet.
    pub fn get_or_create(
        &self,
        key: &PoolKey,
        make: impl FnOnce() -> Result<Pool, String>,
    ) -> Result<Arc<Pool>, String> {
        let mut pools = self
            .pools
            .lock()
            .map_err(|_| "pool registry poisoned".to_string())?;
        if let Some(p) = pools.get(key) {
            return Ok(p.clone());
        }
        let p = Arc::new(make()?);
        pools.insert(key.clone(), p.clone());
        Ok(p)
    }

    /// A snapshot of all pools.
    pub fn all(&self) -> Vec<Arc<Pool>> {
        self.pools
            .lock()
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Closes every pool.
    pub fn close_all(&self) {
        for p in self.all() {
            p.close();
        }
    }
}
