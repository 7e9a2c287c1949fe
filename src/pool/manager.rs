//! The deadpool manager: opens backends ([`super::open`]) and vets
//! them on checkout.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use deadpool::managed::{self, Metrics, RecycleError, RecycleResult, WeakPool};
use tokio::sync::{watch, OwnedSemaphorePermit};

use super::limits::LimitGroup;
use super::open::ConnectPacer;
use super::params::ParamCache;
use super::servers::ServerRegistry;
use super::tuning::Tuning;
use super::PoolKey;
use crate::auth::SaltedPasswordCache;
use crate::backend::{
    still_fits, BackendError, BackendIds, Credentials, HostRoute, Link, PoolerStatement,
};
use crate::config::TargetSessionAttrs;
use crate::stats::Stats;
use crate::stream::Stream;

/// A pooled backend plus what the pool needs to know about it.
pub struct Pooled {
    /// The connection, boxed: deadpool moves its objects several times per
    /// checkout and return, and a link is over 500 bytes.
    pub backend: Box<Link>,
    /// Set only by a successful reset at release; `recycle` refuses anything else.
    pub(super) clean: bool,
    /// When it last went idle (opened, released or handed back).
    pub(super) idle_since: Instant,
    /// Its share of `max_db_connections` / `max_user_connections`, given
    /// back when it closes.
    _limits: Vec<OwnedSemaphorePermit>,
}

impl Pooled {
    /// A backend just opened, holding `limits` until it closes.
    pub(super) fn opened(backend: Link, limits: Vec<OwnedSemaphorePermit>) -> Pooled {
        Pooled {
            backend: Box::new(backend),
            clean: true,
            idle_since: Instant::now(),
            _limits: limits,
        }
    }
}

/// Why [`managed::Manager::create`] gave no backend.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Opening or logging in failed.
    #[error("{0}")]
    Backend(#[from] BackendError),
    /// A shared limit is reached. Opening never waits for one: a client
    /// waits in its checkout ([`BackendManager::wait_for_limits`]), the
    /// maintenance task filling `min_pool_size` stops.
    #[error("connection limit reached")]
    Limit,
}

/// Creates backends for one pool and vets them on checkout.
pub struct BackendManager {
    pub(super) key: PoolKey,
    /// The conninfo's hosts, and which of them a backend may go to.
    pub(super) route: HostRoute,
    pub(super) creds: RwLock<Credentials>,
    pub(super) cache: Arc<SaltedPasswordCache>,
    /// The pool's settings in force (timeouts, lifetime, check query).
    pub(super) tuning: watch::Receiver<Arc<Tuning>>,
    pub(super) startup_params: Vec<(String, String)>,
    pub(super) stats: Arc<Stats>,
    /// Every open backend of this pool, for SHOW SERVERS.
    pub(super) servers: Arc<ServerRegistry>,
    /// application_name of the client waiting now. A backend opened with it
    /// in its startup packet comes back to it after every DISCARD ALL, so
    /// clients of one application need no SET at login (PgBouncer does the
    /// same). Only a hint: a client with another name still gets its SET.
    pub(super) app_name_hint: Mutex<Option<String>>,
    /// Shared limits every backend of this pool counts against.
    pub(super) limits: Vec<Arc<LimitGroup>>,
    /// The pool itself, to see whether it has an idle backend.
    pub(super) this: OnceLock<WeakPool<BackendManager>>,
    /// Backends connecting or logging in right now.
    pub(super) opening: AtomicUsize,
    /// Parameter defaults and accepted values, for logins without a backend.
    pub(super) params: Arc<ParamCache>,
    /// Paces connect attempts while the server fails.
    pub(super) pacer: ConnectPacer,
    /// Limit permits that waiting clients took for the backend they are
    /// about to open. deadpool's `create` takes no argument, so they are
    /// handed over here; any create may use any set (they are alike), and a
    /// set its client did not need goes back ([`BackendManager::refund`]).
    pub(super) prepaid: Mutex<Vec<Vec<OwnedSemaphorePermit>>>,
    /// Ids for the backends it opens, shared by every pool of the pooler.
    pub(super) ids: Arc<BackendIds>,
    /// RECONNECT: backends with an id up to this one are closed instead of
    /// being handed out again (ids only grow, so one number marks them all).
    pub(super) reconnect_upto: AtomicU64,
}

impl managed::Manager for BackendManager {
    type Type = Pooled;
    type Error = OpenError;

    async fn create(&self) -> Result<Pooled, OpenError> {
        // Boxed: deadpool's checkout future holds this one inline, and
        // every checkout's future (a part of every transaction's) would
        // otherwise carry room for the rare open, copied each time.
        Box::pin(self.open()).await
    }

    /// Runs at checkout, so it stays cheap: flags and a non-blocking peek at
    /// the socket, plus `server_check_query` only for a backend that sat idle
    /// longer than `server_check_delay`. A refused backend is closed and
    /// deadpool tries the next one (or opens one).
    async fn recycle(&self, obj: &mut Pooled, _: &Metrics) -> RecycleResult<OpenError> {
        if !obj.clean {
            return Err(RecycleError::message("backend was not reset cleanly"));
        }
        let tuning = self.tuning.borrow().clone();
        // One reading of the clock for every check (one costs about as
        // much as the rest of them).
        let now = Instant::now();
        if let Some(why) = self.refusal(obj, tuning.lifetime, now) {
            tracing::info!(backend = obj.backend.id(), reason = why, "backend closed");
            return Err(RecycleError::message(why));
        }
        let idle = now.saturating_duration_since(obj.idle_since);
        if !tuning.check_query.is_empty() && idle >= tuning.check_delay {
            // Boxed, as `create` is: the check is rare.
            Box::pin(self.check(obj, &tuning.check_query)).await?;
        }
        Ok(())
    }

    /// deadpool calls this on every way out of the pool (discarded at
    /// release, closed while idle, refused by `recycle`), so the books are
    /// kept in one place.
    fn detach(&self, obj: &mut Pooled) {
        let b = &obj.backend;
        self.stats.backend_closed(b.class(), b.clients_served());
        self.servers.closed(b.id());
    }
}

impl BackendManager {
    /// `server_check_query` on a backend idle past `server_check_delay`,
    /// and whether its server still fits `target_session_attrs`.
    async fn check(&self, obj: &mut Pooled, check_query: &str) -> RecycleResult<OpenError> {
        let query = [check_query];
        let check = obj.backend.run_queries(&query, PoolerStatement::Check);
        if let Err(e) = check.await {
            tracing::info!(
                backend = obj.backend.id(),
                reason = "server_check_query failed",
                error = %e,
                "backend closed"
            );
            return Err(RecycleError::message("server_check_query failed"));
        }
        // The check's ReadyForQuery brought any changed in_hot_standby
        // or default_transaction_read_only with it.
        if let Some(why) = self.misfit(&obj.backend) {
            tracing::info!(backend = obj.backend.id(), reason = why, "backend closed");
            return Err(RecycleError::message(why));
        }
        Ok(())
    }
}

/// Why a backend marked by RECONNECT is closed.
pub(super) const RECONNECTED: &str = "RECONNECT";

impl BackendManager {
    /// Why an idle backend must not be handed out as of `now`: RECONNECT
    /// marked it, or [`Pooled::unfit`] (deadpool's recycle asks).
    pub(super) fn refusal(
        &self,
        obj: &Pooled,
        lifetime: Duration,
        now: Instant,
    ) -> Option<&'static str> {
        if self.close_needed(obj.backend.id()) {
            return Some(RECONNECTED);
        }
        obj.unfit(lifetime, now)
    }

    /// True when RECONNECT marked backend `id` to be closed at its release.
    pub(super) fn close_needed(&self, id: u64) -> bool {
        id <= self.reconnect_upto.load(Ordering::Relaxed)
    }

    /// Why `link`'s server no longer fits `target_session_attrs`, if it
    /// does not (a standby promoted under `standby`, a primary made
    /// read-only under `read-write`): read from what the server last
    /// reported, so it costs no query.
    pub(super) fn misfit(&self, link: &Link) -> Option<&'static str> {
        let attrs = self.route.attrs();
        if attrs == TargetSessionAttrs::Any {
            return None;
        }
        still_fits(attrs, link.role()).err()
    }

    /// Whether this pool holds an idle backend right now.
    pub(super) fn has_idle(&self) -> bool {
        self.this
            .get()
            .and_then(|w| w.upgrade())
            .is_some_and(|p| p.retain(|_, _| true).retained > 0)
    }
}

impl Pooled {
    /// "server_lifetime reached" once the backend is older than `lifetime`
    /// (zero: no limit).
    pub(super) fn past_lifetime(&self, lifetime: Duration, now: Instant) -> Option<&'static str> {
        let old = !lifetime.is_zero()
            && now.saturating_duration_since(self.backend.opened_at()) >= lifetime;
        old.then_some("server_lifetime reached")
    }

    /// Why this idle backend must not be handed out again, if it must not:
    /// past `lifetime`, or the server closed it or sent something unasked
    /// (PgBouncer closes an idle server that talks, too).
    pub(super) fn unfit(&self, lifetime: Duration, now: Instant) -> Option<&'static str> {
        self.past_lifetime(lifetime, now)
            .or_else(|| self.not_quiet(now))
    }

    /// Why this idle backend is not quietly idle, if it is not: not idle
    /// by its own account, unread data, or the server closed it or sent
    /// something unasked (a real peek once idle a while, as of `now`).
    pub(super) fn not_quiet(&self, now: Instant) -> Option<&'static str> {
        let b = &self.backend;
        if b.state() != crate::backend::LinkState::Idle {
            return Some("idle server connection is not idle");
        }
        if b.has_unread() {
            return Some("idle server connection had unread data");
        }
        // A backend idle for a while gets a real peek: tokio's readiness is
        // only as fresh as the reactor's last look at epoll, and a server
        // that terminated the session meanwhile must not be handed out.
        // Hot reuse (a backend back for microseconds) keeps the free check.
        let force = now.saturating_duration_since(self.idle_since) >= FRESH_PEEK_AFTER;
        match peek(b.stream(), force) {
            Ok(Peek::Quiet) => None,
            Ok(Peek::Closed) => Some("server closed the connection"),
            // Typically PostgreSQL's FATAL before it closes (terminated, shut down).
            Ok(Peek::Data) => {
                Some("idle server connection sent data (usually an error before closing)")
            }
            Err(_) => Some("server connection failed"),
        }
    }
}

/// Idle time after which the checkout peek asks the kernel, not tokio's readiness.
const FRESH_PEEK_AFTER: Duration = Duration::from_millis(2);

/// What an idle socket has to say.
enum Peek {
    /// Nothing: healthy.
    Quiet,
    /// End of file.
    Closed,
    /// Bytes nobody asked for (an error or a TLS alert before a close).
    Data,
}

/// A non-blocking look at the socket under `stream` (through TLS too:
/// any record from an idle server is unexpected). Through tokio's
/// readiness, so the usual answer — nothing happened since the last read —
/// costs no system call; a stale "readable" costs one peek, which clears it.
fn peek(stream: &Stream, force: bool) -> io::Result<Peek> {
    let socket = match stream {
        Stream::Tcp(s) | Stream::Unix(s) => s,
        // Bytes OpenSSL already holds (decrypted or read ahead) count as data too.
        Stream::Tls(t) if crate::stream::has_pending(t.ssl()) => return Ok(Peek::Data),
        Stream::Tls(t) => t.socket(),
        Stream::Detached(_) => return Ok(Peek::Closed),
    };
    // The socket is non-blocking: a direct peek answers WouldBlock.
    let result = if force {
        socket.peek_byte_now()
    } else {
        socket.try_peek_byte()
    };
    match result {
        Ok(0) => Ok(Peek::Closed),
        Ok(_) => Ok(Peek::Data),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Peek::Quiet),
        Err(e) => Err(e),
    }
}

/// Closes a backend taken idle out of the pool (idle timeout, lifetime,
/// eviction): says Terminate first, as libpq does, so the server logs a
/// clean disconnection.
pub(super) fn close_idle(mut pooled: Pooled, why: &str) {
    tracing::info!(
        backend = pooled.backend.id(),
        reason = why,
        "backend closed"
    );
    // Room for another backend at once, not after the goodbye.
    pooled._limits.clear();
    if tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(1), pooled.backend.terminate()).await;
    });
}
