//! The running pooler's shared state: configuration snapshot, credentials,
//! pools, cancel keys, client limit and shutdown signals. One value per
//! pooler, passed by `Arc` (no globals, so tests can run several).

use std::sync::{Arc, RwLock};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::{
    new_mock_seed, AuthFile, SaltedPasswordCache, ScramCredential, ScramSuccess, Secret,
};
use crate::backend::{BackendTarget, Credentials, Host, HostRoute};
use crate::client::cancel::CancelRegistry;
use crate::client::registry::ClientRegistry;
use crate::client::ClientError;
use crate::config::Config;
use crate::pool::{LentKeys, Pool, PoolKey, PoolRegistry, PoolSettings};
use crate::protocol::PgError;
use crate::stats::Stats;
use crate::tls::{build_acceptor, Acceptor, BackendTls, TlsError};

/// Why the pooler could not start or reload.
#[derive(Debug, thiserror::Error)]
pub enum PoolerError {
    /// The auth file could not be read or parsed.
    #[error("auth.auth_file: {0}")]
    AuthFile(String),
    /// The certificate or key could not be loaded.
    #[error("{0}")]
    Tls(#[from] TlsError),
}

/// Shared state of one running pooler.
pub struct Pooler {
    config: RwLock<Arc<Config>>,
    auth_file: RwLock<Option<Arc<AuthFile>>>,
    tls: RwLock<Option<Acceptor>>,
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
    mock_seed: [u8; 32],
    scram_cache: Arc<SaltedPasswordCache>,
    /// Cancelled on SIGTERM/SIGINT: stop accepting.
    pub stop_accepting: CancellationToken,
    /// Cancelled when sessions must end now (57P01).
    terminate: CancellationToken,
    /// Every client task, so shutdown can wait for them.
    pub tasks: TaskTracker,
    /// Prepared statement ids shared by all clients (transaction pooling).
    pub statements: crate::client::StatementRegistry,
}

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

impl Pooler {
    /// Builds the shared state for a validated config.
    pub async fn new(config: Config) -> Result<Arc<Pooler>, PoolerError> {
        let auth_file = load_auth_file(&config).await?;
        let tls = build_acceptor(&config.tls)?;
        crate::tls::check_databases(&config)?;
        let pooler = Arc::new(Pooler {
            tls: RwLock::new(tls),
            client_slots: Arc::new(Semaphore::new(config.pool.max_client_conn)),
            config: RwLock::new(Arc::new(config)),
            auth_file: RwLock::new(auth_file),
            pools: PoolRegistry::default(),
            cancels: Arc::new(CancelRegistry::default()),
            stats: Arc::new(Stats::new()),
            clients: Arc::new(ClientRegistry::default()),
            mock_seed: new_mock_seed(),
            scram_cache: Arc::new(SaltedPasswordCache::new(1024)),
            stop_accepting: CancellationToken::new(),
            terminate: CancellationToken::new(),
            tasks: TaskTracker::new(),
            statements: Default::default(),
        });
        pooler.prewarm();
        Ok(pooler)
    }

    /// Creates the pools `min_pool_size` keeps warm whose backend user is
    /// known before any client comes: those of databases whose conninfo
    /// names a `user`. Other pools start at their user's first login.
    fn prewarm(&self) {
        let config = self.config();
        for (name, db) in &config.databases {
            let Some(user) = &db.conninfo.user else {
                continue;
            };
            if config.min_pool_size_for(name) == 0 {
                continue;
            }
            if let Err(e) = self.pool_for(name, user) {
                tracing::warn!(database = %name, error = %e, "cannot create pool for min_pool_size");
            }
        }
    }

    /// The current configuration.
    pub fn config(&self) -> Arc<Config> {
        match self.config.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The current auth file, if one is configured.
    pub fn auth_file(&self) -> Option<Arc<AuthFile>> {
        match self.auth_file.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Swaps in a new configuration and auth file (new logins use them).
    pub async fn reload(&self, config: Config) -> Result<(), PoolerError> {
        let auth_file = load_auth_file(&config).await?;
        let tls = build_acceptor(&config.tls)?;
        if let Ok(mut t) = self.tls.write() {
            *t = tls;
        }
        let old_auth = match self.auth_file.write() {
            Ok(mut a) => std::mem::replace(&mut *a, auth_file),
            Err(_) => None,
        };
        if let Ok(mut c) = self.config.write() {
            *c = Arc::new(config);
        }
        self.refresh_credentials(old_auth.as_deref());
        self.prewarm();
        Ok(())
    }

    /// Gives every existing pool the credentials of the reloaded config and
    /// auth file, for the backends it opens from now on (open ones stay
    /// logged in). SCRAM keys lent by a client's proof are kept only while
    /// the auth file still holds the secret they were proved against.
    fn refresh_credentials(&self, old_auth: Option<&AuthFile>) {
        let config = self.config();
        let new_auth = self.auth_file();
        for pool in self.pools.all() {
            // A database removed by the reload, or whose conninfo now names
            // another user, leaves this pool to its current clients: it
            // keeps what it had (new clients get another pool).
            let Some(db) = config.database(&pool.key.database) else {
                continue;
            };
            let user = &pool.key.user;
            if db.conninfo.user.as_ref().is_some_and(|u| u != user) {
                continue;
            }
            let creds = self.credentials_for(user, db.conninfo.password.as_deref());
            let old = old_auth.and_then(|f| f.get(user));
            let new = new_auth.as_ref().and_then(|f| f.get(user));
            let lent = match (old, new) {
                (Some(Secret::Scram(a)), Some(Secret::Scram(b))) if a == b => LentKeys::Keep,
                _ => LentKeys::Drop,
            };
            pool.replace_credentials(creds, lent);
        }
    }

    /// The TLS acceptor for client handshakes, if a certificate is configured.
    pub fn tls_acceptor(&self) -> Option<Acceptor> {
        match self.tls.read() {
            Ok(t) => t.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Seed for mock SCRAM salts of unknown users.
    pub fn mock_seed(&self) -> &[u8; 32] {
        &self.mock_seed
    }

    /// Token cancelled when sessions must be closed now.
    pub fn terminate_token(&self) -> CancellationToken {
        self.terminate.clone()
    }

    /// Ends every session with 57P01.
    pub fn terminate_sessions(&self) {
        self.stop_accepting.cancel();
        self.terminate.cancel();
        self.pools.close_all();
    }

    /// The pool serving `user` on `database`; 3D000 if the database is unknown.
    pub fn pool_for(&self, database: &str, user: &str) -> Result<Arc<Pool>, ClientError> {
        let config = self.config();
        let Some(db) = config.database(database) else {
            return Err(ClientError::Refused(PgError::fatal(
                "3D000",
                format!("database \"{database}\" does not exist"),
            )));
        };
        let backend_user = db.conninfo.user.clone().unwrap_or_else(|| user.to_string());
        let key = PoolKey {
            database: database.to_string(),
            user: backend_user.clone(),
        };
        self.pools
            .get_or_create(&key, || {
                let creds = self.credentials_for(&backend_user, db.conninfo.password.as_deref());
                let route = host_route(&config, database, &backend_user)?;
                let p = &config.pool;
                let limits = self.pools.limits_for(
                    &key,
                    config.max_db_connections_for(database),
                    config.max_user_connections_for(&backend_user),
                );
                Pool::new(
                    key.clone(),
                    route,
                    creds,
                    self.scram_cache.clone(),
                    PoolSettings {
                        size: config.pool_size_for(database),
                        min_size: config.min_pool_size_for(database),
                        reserve_size: config.reserve_pool_size_for(database),
                        reserve_timeout: p.reserve_pool_timeout,
                        wait_timeout: p.query_wait_timeout,
                        command_timeout: p.server_command_timeout,
                        reset_query: p.server_reset_query.clone(),
                        drain_timeout: p.server_drain_timeout,
                        idle_timeout: p.server_idle_timeout,
                        lifetime: p.server_lifetime,
                        check_delay: p.server_check_delay,
                        check_query: p.server_check_query.clone(),
                        limits,
                        stats: self.stats.clone(),
                        startup_params: db.conninfo.startup_params(),
                    },
                )
            })
            .map_err(|e| ClientError::Refused(PgError::fatal("XX000", e)))
    }

    /// What the pooler can show PostgreSQL for `user`: the conninfo password,
    /// else the auth file's secret. A SCRAM-only secret needs a client's keys.
    fn credentials_for(&self, user: &str, conninfo_password: Option<&str>) -> Credentials {
        let mut creds = Credentials::default();
        if let Some(pw) = conninfo_password {
            creds.password = Some(pw.to_string());
            return creds;
        }
        match self.auth_file().as_ref().and_then(|f| f.get(user).cloned()) {
            Some(Secret::Plain { password, .. }) => creds.password = Some(password),
            Some(Secret::Md5 { hash }) => creds.md5_hash = Some(hash),
            Some(Secret::Scram(_)) | None => {}
        }
        creds
    }

    /// After a SCRAM login against a pg_authid secret, lets the pool log in to
    /// PostgreSQL with the client's ClientKey (no plaintext anywhere).
    /// Keys are lent only to a pool whose backends log in as the client's own user.
    pub fn lend_scram_keys(
        &self,
        pool: &Pool,
        client_user: &str,
        secret: Option<&Secret>,
        success: &ScramSuccess,
    ) {
        let Some(Secret::Scram(s)) = secret else {
            return;
        };
        if pool.key.user != client_user {
            return;
        }
        pool.lend_scram_keys(ScramCredential::passthrough(s, success.client_key));
    }
}

/// The hosts of `database`'s conninfo as a route for backends logging in
/// as `user`: one target and one TLS setup per host, each attempt bounded
/// by libpq's `connect_timeout` (no longer than `server_connect_timeout`).
fn host_route(config: &Config, database: &str, user: &str) -> Result<HostRoute, String> {
    let Some(db) = config.database(database) else {
        return Err(format!("database \"{database}\" is not configured"));
    };
    let info = &db.conninfo;
    let tls =
        BackendTls::for_hosts(info).map_err(|e| format!("databases.{database}.conninfo: {e}"))?;
    let dbname = info.dbname.clone().unwrap_or_else(|| database.to_string());
    let hosts = info
        .hosts
        .iter()
        .zip(tls)
        .map(|(spec, tls)| Host {
            target: Arc::new(BackendTarget {
                host: spec.host.clone(),
                port: spec.port,
                dbname: dbname.clone(),
                user: user.to_string(),
                tcp: info.tcp,
            }),
            tls,
        })
        .collect();
    let server = config.pool.server_connect_timeout;
    let per_host = info.connect_timeout.map_or(server, |t| t.min(server));
    Ok(HostRoute::new(
        hosts,
        info.target_session_attrs,
        info.load_balance_hosts,
        per_host,
    ))
}
