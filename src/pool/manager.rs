//! The deadpool manager: opens backends and vets them on checkout.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};

use super::servers::ServerRegistry;
use crate::auth::SaltedPasswordCache;
use crate::backend::{Backend, BackendError, BackendTarget, Credentials};
use crate::stats::{Class, Stats};
use crate::tls::connector::Opening;
use crate::tls::BackendTls;

/// A pooled backend plus whether its last reset succeeded.
pub struct Pooled {
    /// The connection.
    pub backend: Backend,
    /// Set only by a successful reset at release; `recycle` refuses anything else.
    pub(super) clean: bool,
}

/// Creates backends for one pool and vets them on checkout.
pub struct BackendManager {
    pub(super) target: Arc<BackendTarget>,
    pub(super) tls: BackendTls,
    pub(super) creds: RwLock<Credentials>,
    pub(super) cache: Arc<SaltedPasswordCache>,
    pub(super) connect_timeout: Duration,
    pub(super) startup_params: Vec<(String, String)>,
    pub(super) stats: Arc<Stats>,
    /// Every open backend of this pool, for SHOW SERVERS.
    pub(super) servers: Arc<ServerRegistry>,
    /// application_name of the client waiting now. A backend opened with it
    /// in its startup packet comes back to it after every DISCARD ALL, so
    /// clients of one application need no SET at login (PgBouncer does the
    /// same). Only a hint: a client with another name still gets its SET.
    pub(super) app_name_hint: Mutex<Option<String>>,
}

impl managed::Manager for BackendManager {
    type Type = Pooled;
    type Error = BackendError;

    async fn create(&self) -> Result<Pooled, BackendError> {
        let creds = self.creds.read().map(|c| c.clone()).unwrap_or_default();
        let mut params = self.startup_params.clone();
        let hint = self.app_name_hint.lock().ok().and_then(|h| h.clone());
        let mut hinted = false;
        if let Some(name) = hint {
            if !params.iter().any(|(k, _)| k == "application_name") {
                params.push(("application_name".into(), name));
                hinted = true;
            }
        }
        let connect =
            Backend::connect(self.target.clone(), &self.tls, &creds, &params, &self.cache);
        let result = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(r) => r,
            Err(_) => Err(BackendError::Timeout(self.target.describe())),
        };
        match result {
            Ok(mut backend) => {
                backend.hinted_app_name = hinted;
                self.stats
                    .backend_connect(backend.class(), &backend.connect_phases());
                self.servers.opened(&backend);
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

    /// deadpool calls this on every way out of the pool (discarded at
    /// release, closed while idle, refused by `recycle`), so the books are
    /// kept in one place.
    fn detach(&self, obj: &mut Pooled) {
        let b = &obj.backend;
        self.stats.backend_closed(b.class(), b.clients_served);
        self.servers.closed(b.id);
    }
}
