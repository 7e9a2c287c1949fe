//! The running pooler's shared state: the snapshot a reload replaces
//! (configuration, auth file, TLS acceptor), the pools, the registries the
//! sessions share, the client limit and the shutdown signals. One value per
//! pooler, passed by `Arc` (no globals, so tests can run several).
//!
//! It sits below `client` and `admin`, which both hold it; the binary wires
//! the listener to `client` (see `client::accept`).

use std::collections::BTreeSet;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::hba::{Hba, HbaError, IdentMaps};
use crate::auth::{new_mock_seed, AuthFile};
use crate::config::Config;
use crate::pool::{NoPool, Pool, PoolRegistry};
use crate::protocol::BufStash;
use crate::registry::{CancelRegistry, ClientRegistry, SecretCache, StatementRegistry};
use crate::stats::Stats;
use crate::tls::{build_acceptor, Acceptor, TlsError};

/// Why the pooler could not start or reload.
#[derive(Debug, thiserror::Error)]
pub enum PoolerError {
    /// The auth file could not be read or parsed.
    #[error("auth.auth_file: {0}")]
    AuthFile(String),
    /// The hba or ident file has a bad line (the error names file:line).
    #[error("{0}")]
    Hba(#[from] HbaError),
    /// The certificate or key could not be loaded.
    #[error("{0}")]
    Tls(#[from] TlsError),
}

/// What one reload replaces, as one value: a login that reads a snapshot
/// sees a configuration, the auth file it names and the acceptor built from
/// its certificate, never a mix of two reloads.
pub struct Snapshot {
    /// The configuration.
    pub config: Arc<Config>,
    /// The auth file `config` names, if any.
    pub auth_file: Option<Arc<AuthFile>>,
    /// The acceptor for client handshakes, if `config` has a certificate.
    pub tls_acceptor: Option<Acceptor>,
    /// The parsed `auth.hba_file` (with its ident maps), if one is set.
    pub hba: Option<Arc<Hba>>,
    /// `auth.ident_file` read for `tls.client_cert_map`, if that is set.
    pub cert_map: Option<Arc<IdentMaps>>,
    /// When that certificate expires (Unix time), read once per load.
    pub cert_not_after: Option<i64>,
}

impl Snapshot {
    /// Loads what `config` names: the auth file (off the async workers, as
    /// plain passwords cost a PBKDF2 each) and the certificate.
    pub async fn load(config: Config) -> Result<Snapshot, PoolerError> {
        let auth_file = load_auth_file(&config).await?;
        let hba = load_hba(&config).await?;
        let cert_map = load_cert_map(&config).await?;
        let tls_acceptor = build_acceptor(&config.tls)?;
        crate::tls::check_databases(&config)?;
        let cert_not_after = tls_acceptor
            .as_deref()
            .and_then(crate::tls::certificate_not_after);
        Ok(Snapshot {
            config: Arc::new(config),
            auth_file,
            tls_acceptor,
            hba,
            cert_map,
            cert_not_after,
        })
    }

    /// The auth file's secret of `user`, if the auth file has one.
    pub fn secret(&self, user: &str) -> Option<&crate::auth::Secret> {
        self.auth_file.as_ref().and_then(|f| f.get(user))
    }
}

/// Shared state of one running pooler.
pub struct Pooler {
    current: RwLock<Arc<Snapshot>>,
    /// Held for a whole reload, so two reloads (SIGHUP and RELOAD) cannot
    /// interleave their credential refreshes.
    reloading: tokio::sync::Mutex<()>,
    /// Pools by (database, user).
    pub pools: PoolRegistry,
    /// Client cancel keys.
    pub cancels: Arc<CancelRegistry>,
    /// The overhead report's counters.
    pub stats: Arc<Stats>,
    /// Logged-in clients, for SHOW CLIENTS.
    pub clients: Arc<ClientRegistry>,
    /// One permit per allowed client (`max_client_conn`).
    pub client_slots: Arc<Semaphore>,
    /// How many permits `client_slots` started with (`max_client_conn` at
    /// start-up: a reload does not change it).
    pub client_slots_total: usize,
    mock_seed: [u8; 32],
    /// Cancelled on SIGTERM/SIGINT: stop accepting.
    pub stop_accepting: CancellationToken,
    /// Cancelled when sessions must end now (57P01).
    terminate: CancellationToken,
    /// Every client task, so shutdown can wait for them.
    pub tasks: TaskTracker,
    /// Prepared statement ids shared by all clients (transaction pooling).
    pub statements: StatementRegistry,
    /// Read buffers shed by idle clients, for the next read of any client.
    pub buffers: Arc<BufStash>,
    /// Databases DISABLEd on the admin console: their new logins are refused.
    disabled: Mutex<BTreeSet<String>>,
    /// Admin console sessions open now (SHOW LISTS counts them as clients).
    pub console_sessions: AtomicUsize,
    /// What `auth.query` found, and the bound on lookups at once.
    pub secrets: SecretCache,
    /// Where a CancelRequest with a key unknown here goes: set after a
    /// takeover, to the draining process whose clients hold such keys;
    /// returns false once that process is gone.
    pub cancel_elsewhere: OnceLock<CancelElsewhere>,
    /// Connection ids: accepted clients and clients handed over by a
    /// takeover's old process draw from the same counter.
    pub client_ids: std::sync::atomic::AtomicU64,
    /// After a takeover, where this (old) process hands its idle
    /// transaction-pooling clients to the new one.
    pub handoff: crate::takeover::Outbox,
}

/// Passes a cancel key (pid, secret) on to another process.
pub type CancelElsewhere = Box<dyn Fn(i32, i32) -> bool + Send + Sync>;

/// Loads the auth file off the async workers (plain passwords cost a PBKDF2 each).
pub async fn load_auth_file(config: &Config) -> Result<Option<Arc<AuthFile>>, PoolerError> {
    let Some(path) = config.auth.auth_file.clone() else {
        return Ok(None);
    };
    let loaded = tokio::task::spawn_blocking(move || AuthFile::load(&path))
        .await
        .map_err(|e| PoolerError::AuthFile(e.to_string()))?;
    loaded
        .map(|f| Some(Arc::new(f)))
        .map_err(|e| PoolerError::AuthFile(e.to_string()))
}

/// Loads the hba and ident files off the async workers (blocking reads);
/// any bad line fails the load, so a reload keeps the rules it had.
pub async fn load_hba(config: &Config) -> Result<Option<Arc<Hba>>, PoolerError> {
    let Some(hba_file) = config.auth.hba_file.clone() else {
        return Ok(None);
    };
    let ident_file = config.auth.ident_file.clone();
    let loaded = tokio::task::spawn_blocking(move || Hba::load(&hba_file, ident_file.as_deref()))
        .await
        .map_err(|e| PoolerError::AuthFile(e.to_string()))?;
    let hba = loaded?;
    crate::tls::verify::check_hba(&hba, &config.tls)?;
    Ok(Some(Arc::new(hba)))
}

/// Loads the ident file for `tls.client_cert_map` off the async workers.
pub async fn load_cert_map(config: &Config) -> Result<Option<Arc<IdentMaps>>, PoolerError> {
    if config.tls.client_cert_map.is_none() {
        return Ok(None);
    }
    let (tls, ident_file) = (config.tls.clone(), config.auth.ident_file.clone());
    let loaded = tokio::task::spawn_blocking(move || {
        crate::tls::verify::load_client_cert_map(&tls, ident_file.as_deref())
    })
    .await
    .map_err(|e| PoolerError::AuthFile(e.to_string()))?;
    Ok(loaded?.map(Arc::new))
}

impl Pooler {
    /// Builds the shared state for a validated config.
    pub async fn new(config: Config) -> Result<Arc<Pooler>, PoolerError> {
        let snapshot = Snapshot::load(config).await?;
        let stats = Arc::new(Stats::new());
        let terminate = CancellationToken::new();
        let secrets = SecretCache::new(snapshot.config.auth.lookup.concurrency);
        // Restart-only: the keys already handed out carry it.
        let instance_id = snapshot.config.listen.instance_id;
        let pooler = Arc::new(Pooler {
            client_slots: Arc::new(Semaphore::new(snapshot.config.pool.max_client_conn)),
            client_slots_total: snapshot.config.pool.max_client_conn,
            current: RwLock::new(Arc::new(snapshot)),
            reloading: tokio::sync::Mutex::new(()),
            pools: PoolRegistry::new(stats.clone()),
            cancels: Arc::new(CancelRegistry::new(instance_id)),
            stats,
            clients: Arc::new(ClientRegistry::default()),
            mock_seed: new_mock_seed(),
            stop_accepting: CancellationToken::new(),
            terminate,
            tasks: TaskTracker::new(),
            statements: Default::default(),
            secrets,
            buffers: Arc::default(),
            disabled: Mutex::default(),
            console_sessions: AtomicUsize::new(0),
            cancel_elsewhere: OnceLock::new(),
            client_ids: std::sync::atomic::AtomicU64::new(1),
            handoff: Default::default(),
        });
        let snap = pooler.snapshot();
        pooler
            .pools
            .prewarm(&snap.config, snap.auth_file.as_deref());
        Ok(pooler)
    }

    /// The configuration, auth file and acceptor in force now, as one value.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The current configuration (for a single read; a login reads a
    /// [`Snapshot`] instead).
    pub fn config(&self) -> Arc<Config> {
        self.snapshot().config.clone()
    }

    /// Swaps in a new configuration with its auth file and acceptor in one
    /// step (new logins use them), then gives the existing pools the new
    /// credentials and pool settings, and warns of each changed key that
    /// only a restart applies. A file that fails to load keeps the old
    /// snapshot whole.
    pub async fn reload(&self, config: Config) -> Result<(), PoolerError> {
        self.reload_from(|_| Ok::<_, PoolerError>(config)).await
    }

    /// [`Pooler::reload`] with a configuration `make` builds from the one in
    /// force, under the reload lock, so no other reload slips in between
    /// (the console's SET).
    pub async fn reload_from<E: From<PoolerError>>(
        &self,
        make: impl FnOnce(&Config) -> Result<Config, E>,
    ) -> Result<(), E> {
        let _one_at_a_time = self.reloading.lock().await;
        let config = make(&self.config())?;
        let next = Arc::new(Snapshot::load(config).await?);
        let old = match self.current.write() {
            Ok(mut c) => std::mem::replace(&mut *c, next.clone()),
            Err(p) => std::mem::replace(&mut *p.into_inner(), next.clone()),
        };
        let (old_auth, new_auth) = (old.auth_file.as_deref(), next.auth_file.as_deref());
        self.pools
            .refresh_credentials(&next.config, old_auth, new_auth);
        self.pools.retune(&old.config, &next.config);
        // The query, its database or its user may have changed.
        self.secrets.clear();
        for key in crate::config::keys::restart_changes(&old.config, &next.config) {
            tracing::warn!("{key} changed: takes effect after a restart");
        }
        self.pools.prewarm(&next.config, new_auth);
        Ok(())
    }

    /// The pool serving `user` on `database` under the current snapshot.
    pub fn pool_for(&self, database: &str, user: &str) -> Result<Arc<Pool>, NoPool> {
        let snap = self.snapshot();
        self.pool_in(&snap, database, user)
    }

    /// The pool serving `user` on `database` under `snap` (a login's own snapshot).
    pub fn pool_in(
        &self,
        snap: &Snapshot,
        database: &str,
        user: &str,
    ) -> Result<Arc<Pool>, NoPool> {
        let auth = snap.auth_file.as_deref();
        self.pools.pool_for(&snap.config, auth, database, user)
    }

    /// DISABLE (`true`) or ENABLE (`false`) new logins to `database`;
    /// false when it already was so.
    pub fn set_disabled(&self, database: &str, disabled: bool) -> bool {
        let mut set = match self.disabled.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        if disabled {
            set.insert(database.to_string())
        } else {
            set.remove(database)
        }
    }

    /// True while `database` is DISABLEd.
    pub fn is_disabled(&self, database: &str) -> bool {
        match self.disabled.lock() {
            Ok(s) => s.contains(database),
            Err(p) => p.into_inner().contains(database),
        }
    }

    /// Seed for mock SCRAM salts of unknown users.
    pub fn mock_seed(&self) -> &[u8; 32] {
        &self.mock_seed
    }

    /// KILL of `pool`: its sessions end (57P01) and its idle backends close.
    pub fn kill_pool(&self, pool: &Pool) {
        self.clients.end_pool(pool.identity());
        pool.kill();
    }

    /// A fresh connection id.
    pub fn next_client_id(&self) -> u64 {
        self.client_ids
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Token cancelled when sessions must be closed now.
    pub fn terminate_token(&self) -> CancellationToken {
        self.terminate.clone()
    }

    /// Ends every session with 57P01.
    pub fn terminate_sessions(&self) {
        self.stop_accepting.cancel();
        self.terminate.cancel();
        self.clients.end_all(crate::registry::End::Shutdown);
        self.pools.close_all();
    }
}
