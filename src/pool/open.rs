//! Opening a backend for the pool: within the shared limits, with the
//! client's application_name hint, and paced while the server is failing.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::manager::{BackendManager, OpenError, Pooled};
use crate::stats::Class;
use crate::tls::connector::Opening;

/// Least time between two connect attempts while the server is failing.
const CONNECT_RETRY: Duration = Duration::from_millis(500);

/// Connect attempts after a failure: one at a time, CONNECT_RETRY apart.
#[derive(Default)]
pub struct ConnectPacer {
    failed_at: std::sync::Mutex<Option<Instant>>,
    gate: tokio::sync::Mutex<()>,
}

impl ConnectPacer {
    /// When the last attempt failed, if the server has not answered since.
    fn failing_since(&self) -> Option<Instant> {
        self.failed_at.lock().ok().and_then(|f| *f)
    }

    /// Waits for this attempt's turn; hold the guard while connecting.
    async fn wait_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        let guard = self.gate.lock().await;
        if let Some(at) = self.failing_since() {
            let due = at + CONNECT_RETRY;
            tokio::time::sleep_until(due.into()).await;
        }
        guard
    }

    fn failed(&self) {
        if let Ok(mut f) = self.failed_at.lock() {
            *f = Some(Instant::now());
        }
    }

    fn succeeded(&self) {
        if let Ok(mut f) = self.failed_at.lock() {
            *f = None;
        }
    }
}

impl BackendManager {
    /// Opens and logs in one backend within the shared limits.
    pub(super) async fn open(&self) -> Result<Pooled, OpenError> {
        let limits = self.limits_now()?;
        // While the server is failing (down, restarting), attempts go one
        // at a time and at least CONNECT_RETRY apart instead of a stampede
        // of every waiting client.
        let _pacing = match self.pacer.failing_since() {
            Some(_) => Some(self.pacer.wait_turn().await),
            None => None,
        };
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
        // Each host's attempt is bounded inside the route (libpq's
        // connect_timeout is per host).
        self.opening.fetch_add(1, Ordering::Relaxed);
        let id = self.ids.next();
        let tuning = self.tuning.borrow().clone();
        // Not boxed here: the manager's `create` boxes this whole open.
        let result = self
            .route
            .connect(&creds, &params, &self.cache, id, tuning.connect_timeout)
            .await;
        self.opening.fetch_sub(1, Ordering::Relaxed);
        match result {
            Ok(mut backend) => {
                self.pacer.succeeded();
                backend.set_hinted_app_name(hinted);
                backend.set_command_timeout(tuning.command_timeout);
                self.params.set_base_once(backend.ledger_ref().params());
                self.stats
                    .backend_connect(backend.class(), &backend.connect_phases());
                self.servers.opened(&backend);
                tracing::info!(
                    backend = backend.id(),
                    server = %backend.target().describe(),
                    user = %backend.target().user,
                    database = %backend.target().dbname,
                    pid = backend.cancel().pid,
                    role = backend.role().as_str(),
                    "backend connected"
                );
                Ok(Pooled::opened(backend, limits))
            }
            Err(e) => {
                self.pacer.failed();
                // Once per failed attempt, here: the clients that waited for
                // it end at INFO, so a dead server is one WARN per attempt
                // (paced by CONNECT_RETRY), not one per client.
                let servers: Vec<String> = self
                    .route
                    .hosts()
                    .iter()
                    .map(|h| h.target.describe())
                    .collect();
                tracing::warn!(
                    database = %self.key.database,
                    user = %self.key.user,
                    server = %servers.join(","),
                    error = %e,
                    "backend connect failed"
                );
                // Counted against the first host: no backend says which.
                if let Some(host) = self.route.hosts().first() {
                    let tls = host.tls.opening() == Opening::Require;
                    self.stats
                        .backend_failed(Class::backend(host.target.transport(), tls));
                }
                Err(e.into())
            }
        }
    }
}
