//! From configuration to pools: which pool serves a (database, user), with
//! what route, credentials and settings, and what a reload changes for the
//! pools that exist. The configuration and auth file are passed in (one
//! snapshot per login or reload), never read from a shared place here.

use std::sync::Arc;

use super::{LentKeys, Pool, PoolKey, PoolRegistry, PoolSettings, Tuning};
use crate::auth::{AuthFile, ScramCredential, ScramSuccess, Secret};
use crate::backend::{BackendTarget, Credentials, Host, HostRoute};
use crate::config::Config;
use crate::tls::BackendTls;

/// Why no pool serves a login.
#[derive(Debug, thiserror::Error)]
pub enum NoPool {
    /// The client asked for a database the configuration does not have.
    #[error("database \"{0}\" does not exist")]
    UnknownDatabase(String),
    /// The pool could not be built (its route or TLS setup).
    #[error("{0}")]
    Create(String),
}

/// The key of the pool a client of `user` on `database` belongs to under
/// `config` (None for a database it does not have): a conninfo with `user`
/// puts every client of the entry in that user's pool.
pub fn pool_key(config: &Config, database: &str, user: &str) -> Option<PoolKey> {
    config
        .database(database)
        .map(|db| key_of(db, database, user))
}

fn key_of(db: &crate::config::DatabaseConfig, database: &str, user: &str) -> PoolKey {
    PoolKey {
        database: database.to_string(),
        user: backend_user(db, user).to_string(),
    }
}

/// The role the backends of `user`'s pool log in as: the entry's conninfo
/// user if it names one, else the client's own.
fn backend_user<'a>(db: &'a crate::config::DatabaseConfig, user: &'a str) -> &'a str {
    db.conninfo.user.as_deref().unwrap_or(user)
}

impl PoolRegistry {
    /// The pool serving `user` on `database` under `config`, created on first use.
    pub fn pool_for(
        &self,
        config: &Config,
        auth: Option<&AuthFile>,
        database: &str,
        user: &str,
    ) -> Result<Arc<Pool>, NoPool> {
        let Some(db) = config.database(database) else {
            return Err(NoPool::UnknownDatabase(database.to_string()));
        };
        let backend_user = backend_user(db, user);
        self.get_or_create((database, backend_user), |key| {
            let password = db.conninfo.password.as_deref();
            let creds = credentials_for(auth, backend_user, password);
            let route = host_route(config, database, backend_user)?;
            let limits = self.limits_for(
                key,
                config.max_db_connections_for(database),
                config.max_user_connections_for(backend_user),
            );
            let settings = PoolSettings {
                tuning: Tuning::for_database(config, database),
                limits,
                stats: self.stats.clone(),
                backend_ids: self.backend_ids.clone(),
                startup_params: db.conninfo.startup_params(),
            };
            Pool::new(
                key.clone(),
                route,
                creds,
                self.scram_cache.clone(),
                settings,
            )
        })
        .map_err(NoPool::Create)
    }

    /// Creates the pools `min_pool_size` keeps warm whose backend user is
    /// known before any client comes: those of databases whose conninfo
    /// names a `user`. Other pools start at their user's first login.
    pub fn prewarm(&self, config: &Config, auth: Option<&AuthFile>) {
        for (name, db) in &config.databases {
            let Some(user) = &db.conninfo.user else {
                continue;
            };
            if config.min_pool_size_for(name) == 0 {
                continue;
            }
            if let Err(e) = self.pool_for(config, auth, name, user) {
                tracing::warn!(database = %name, error = %e, "cannot create pool for min_pool_size");
            }
        }
    }

    /// Gives every existing pool the credentials of a reloaded config and
    /// auth file, for the backends it opens from now on (open ones stay
    /// logged in). SCRAM keys lent by a client's proof are kept only while
    /// the auth file still holds the secret they were proved against.
    pub fn refresh_credentials(
        &self,
        config: &Config,
        old_auth: Option<&AuthFile>,
        new_auth: Option<&AuthFile>,
    ) {
        for pool in self.all() {
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
            let creds = credentials_for(new_auth, user, db.conninfo.password.as_deref());
            let old = old_auth.and_then(|f| f.get(user));
            let new = new_auth.and_then(|f| f.get(user));
            let lent = match (old, new) {
                (Some(Secret::Scram(a)), Some(Secret::Scram(b))) if a == b => LentKeys::Keep,
                _ => LentKeys::Drop,
            };
            pool.replace_credentials(creds, lent);
        }
    }

    /// Puts a reloaded config's pool settings in force in every existing
    /// pool (logged at INFO, per pool), and warns of a database whose
    /// server settings changed: its existing pools keep the server they
    /// have (only a new password reaches them) until a restart.
    pub fn retune(&self, old: &Config, new: &Config) {
        let mut warned = Vec::new();
        for pool in self.all() {
            let database = &pool.key.database;
            let Some(db) = new.database(database) else {
                continue;
            };
            let changes = pool.retune(Tuning::for_database(new, database));
            if !changes.is_empty() {
                tracing::info!(
                    database = %database,
                    user = %pool.key.user,
                    changes = %changes.join(", "),
                    "reload: pool settings applied to an existing pool"
                );
            }
            let moved = old
                .database(database)
                .is_some_and(|o| o.conninfo.redacted() != db.conninfo.redacted());
            if moved && !warned.contains(database) {
                tracing::warn!(
                    "databases.{database}.conninfo changed: existing pools keep their server settings; takes effect after a restart"
                );
                warned.push(database.clone());
            }
        }
    }
}

impl Pool {
    /// After a SCRAM login against a pg_authid secret, lets the pool log in to
    /// PostgreSQL with the client's ClientKey (no plaintext anywhere).
    /// Keys are lent only to a pool whose backends log in as the client's own user.
    pub fn lend_client_keys(
        &self,
        client_user: &str,
        secret: Option<&Secret>,
        success: &ScramSuccess,
    ) {
        let Some(Secret::Scram(s)) = secret else {
            return;
        };
        if self.key.user != client_user {
            return;
        }
        self.lend_scram_keys(ScramCredential::passthrough(s, success.client_key));
    }

    /// Whether backends log in only with SCRAM keys a client's login lent
    /// (no password or md5 hash configured).
    pub fn logs_in_with_lent_keys(&self) -> bool {
        self.inner
            .manager()
            .creds
            .read()
            .is_ok_and(|c| c.password.is_none() && c.md5_hash.is_none() && c.scram.is_some())
    }

    /// The ClientKey a login by `user` lent this pool, when its backends
    /// log in with nothing else: a takeover's new process needs it to open
    /// backends for that user's handed-over clients.
    pub fn lent_client_key(&self, user: &str) -> Option<[u8; 32]> {
        if self.key.user != user || !self.logs_in_with_lent_keys() {
            return None;
        }
        match &self.inner.manager().creds.read().ok()?.scram {
            Some(ScramCredential::Keys { keys, .. }) => Some(keys.client_key),
            _ => None,
        }
    }

    /// Takes a ClientKey the old process of a takeover lent for `user`,
    /// if it proves itself against this process's secret for that user
    /// (StoredKey = H(ClientKey)): an auth file changed in the takeover
    /// gets no stale key. True when taken.
    pub fn take_lent_client_key(
        &self,
        user: &str,
        secret: Option<&Secret>,
        client_key: [u8; 32],
    ) -> bool {
        let Some(Secret::Scram(s)) = secret else {
            return false;
        };
        if self.key.user != user || !s.proves(&client_key) {
            return false;
        }
        self.lend_scram_keys(ScramCredential::passthrough(s, client_key));
        true
    }

    /// A secret `auth.query` found for `client_user`: an md5 hash logs
    /// backends of this pool in as it is, when the configuration gave them
    /// nothing better (a SCRAM secret needs a client's keys instead, see
    /// [`Pool::lend_client_keys`]).
    pub fn lend_looked_up(&self, client_user: &str, secret: &Secret) {
        let Secret::Md5 { hash } = secret else {
            return;
        };
        if self.key.user != client_user {
            return;
        }
        if let Ok(mut c) = self.inner.manager().creds.write() {
            if c.password.is_none() && c.md5_hash.as_deref() != Some(hash.as_str()) {
                c.md5_hash = Some(hash.clone());
            }
        }
    }
}

/// What the pooler can show PostgreSQL for `user`: the conninfo password,
/// else the auth file's secret. A SCRAM-only secret needs a client's keys.
fn credentials_for(
    auth: Option<&AuthFile>,
    user: &str,
    conninfo_password: Option<&str>,
) -> Credentials {
    let mut creds = Credentials::default();
    if let Some(pw) = conninfo_password {
        creds.password = Some(pw.to_string());
        return creds;
    }
    match auth.and_then(|f| f.get(user).cloned()) {
        Some(Secret::Plain { password, .. }) => creds.password = Some(password),
        Some(Secret::Md5 { hash }) => creds.md5_hash = Some(hash),
        Some(Secret::Scram(_)) | None => {}
    }
    creds
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
    Ok(HostRoute::new(
        hosts,
        info.target_session_attrs,
        info.load_balance_hosts,
        info.connect_timeout,
    ))
}
