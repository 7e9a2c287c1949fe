//! Who is connected and what each client is doing, for SHOW CLIENTS.
//! The list changes at login and at the end; what a client is doing changes
//! per transaction in transaction pooling, so that part is atomics of the
//! client's own, read when the admin asks, never a global lock.
//!
//! A client that has to wait for a backend records when it started (only
//! when it does wait: a checkout that finds an idle backend at once reads
//! no clock), so SHOW CLIENTS `wait` and SHOW POOLS `maxwait` are computed
//! when they are asked for.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::listener::Transport;

/// Where a client is in its life; reported by the admin console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ClientState {
    /// Reading startup packets (SSL/GSS requests, StartupMessage).
    Negotiating,
    /// Proving who it is.
    Authenticating,
    /// Logged in, waiting for a backend.
    WaitingForBackend,
    /// Holding a backend and relaying.
    Active,
    /// Logged in, holding no backend between transactions (transaction pooling).
    Idle,
    /// Ending.
    Closing,
}

impl ClientState {
    /// Every state, in the order a client's life goes through them.
    pub const ALL: [ClientState; 6] = [
        ClientState::Negotiating,
        ClientState::Authenticating,
        ClientState::WaitingForBackend,
        ClientState::Active,
        ClientState::Idle,
        ClientState::Closing,
    ];

    /// The state stored as `state as u8` (unknown values read as Closing).
    pub fn from_u8(v: u8) -> ClientState {
        ClientState::ALL
            .into_iter()
            .find(|s| *s as u8 == v)
            .unwrap_or(ClientState::Closing)
    }
}

/// One logged-in client.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    /// Connection id.
    pub id: u64,
    /// Role it logged in as.
    pub user: String,
    /// Database it asked for.
    pub database: String,
    /// How it reached the pooler.
    pub transport: Transport,
    /// Whether TLS is in use.
    pub tls: bool,
    /// Peer address or socket path.
    pub peer: String,
    /// When it logged in.
    pub connected_at: SystemTime,
    /// What it is doing.
    pub state: ClientState,
    /// The backend it holds, if any.
    pub backend: Option<u64>,
    /// The `application_name` of its startup packet, if it sent one.
    pub application_name: Option<String>,
    /// How long it has been waiting for a backend, while it is.
    pub wait: Option<Duration>,
}

/// What a client is doing now, updated without the registry's lock.
#[derive(Debug)]
struct Live {
    state: AtomicU8,
    /// Backend id, 0 for none (ids start at 1).
    backend: AtomicU64,
    /// Cancelled by KILL_CLIENT: the session ends (57P01).
    kill: CancellationToken,
    /// The token the session watches once it has a pool (see
    /// [`ClientEntry::attach`]); KILL_CLIENT cancels it too.
    session: Mutex<Option<CancellationToken>>,
    /// When its wait for a backend began, in ns after `epoch` plus one
    /// (0: not waiting).
    wait_since: AtomicU64,
    epoch: Instant,
}

impl Live {
    fn kill(&self) {
        // The login token first: an attach that runs after this sees it.
        self.kill.cancel();
        if let Some(t) = lock(&self.session).as_ref() {
            t.cancel();
        }
    }

    fn store(&self, state: ClientState, backend: Option<u64>) {
        self.state.store(state as u8, Ordering::Relaxed);
        self.backend.store(backend.unwrap_or(0), Ordering::Relaxed);
    }

    fn fill(&self, info: &mut ClientInfo, now: Instant) {
        info.state = ClientState::from_u8(self.state.load(Ordering::Relaxed));
        info.backend = Some(self.backend.load(Ordering::Relaxed)).filter(|b| *b != 0);
        info.wait = match self.wait_since.load(Ordering::Relaxed) {
            0 => None,
            since => {
                let waited = now.saturating_duration_since(self.epoch);
                Some(waited.saturating_sub(Duration::from_nanos(since - 1)))
            }
        };
    }
}

type Entries = BTreeMap<u64, (ClientInfo, Arc<Live>)>;

/// Every logged-in client.
#[derive(Debug)]
pub struct ClientRegistry {
    entries: Mutex<Entries>,
    /// The clock origin of every client's wait.
    epoch: Instant,
}

impl Default for ClientRegistry {
    fn default() -> Self {
        ClientRegistry {
            entries: Mutex::default(),
            epoch: Instant::now(),
        }
    }
}

impl ClientRegistry {
    fn with<R>(&self, f: impl FnOnce(&mut Entries) -> R) -> R {
        match self.entries.lock() {
            Ok(mut m) => f(&mut m),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    /// Adds a client; it is removed when the returned entry is dropped.
    pub fn register(self: &Arc<Self>, info: ClientInfo) -> ClientEntry {
        let id = info.id;
        let live = Arc::new(Live {
            state: AtomicU8::new(info.state as u8),
            backend: AtomicU64::new(info.backend.unwrap_or(0)),
            kill: CancellationToken::new(),
            session: Mutex::default(),
            wait_since: AtomicU64::new(0),
            epoch: self.epoch,
        });
        self.with(|m| m.insert(id, (info, live.clone())));
        ClientEntry {
            registry: self.clone(),
            id,
            live,
        }
    }

    /// KILL_CLIENT: tells client `id`'s session to end; false when no such
    /// client is logged in.
    pub fn kill(&self, id: u64) -> bool {
        let live = self.with(|m| m.get(&id).map(|(_, live)| live.clone()));
        live.map(|l| l.kill()).is_some()
    }

    /// A copy of every entry, with waits as of now.
    pub fn list(&self) -> Vec<ClientInfo> {
        let now = Instant::now();
        self.with(|m| {
            m.values()
                .map(|(info, live)| {
                    let mut info = info.clone();
                    live.fill(&mut info, now);
                    info
                })
                .collect()
        })
    }
}

/// A client's place in the registry, for as long as the session lives.
pub struct ClientEntry {
    registry: Arc<ClientRegistry>,
    id: u64,
    live: Arc<Live>,
}

impl ClientEntry {
    /// What the client logged in with (its peer, application_name...).
    pub fn info(&self) -> Option<ClientInfo> {
        self.registry
            .with(|m| m.get(&self.id).map(|(info, _)| info.clone()))
    }

    /// Records what the client is doing now.
    pub fn set(&self, state: ClientState, backend: Option<u64>) {
        self.live.store(state, backend);
    }

    /// Cancelled when KILL_CLIENT names this client.
    pub fn kill_token(&self) -> &CancellationToken {
        &self.live.kill
    }

    /// One token for the rest of the session, cancelled by KILL_CLIENT and
    /// by whatever cancels `parent` (the pool's KILL token, itself a child
    /// of shutdown): the relay then watches one token instead of three.
    pub fn attach(&self, parent: &CancellationToken) -> CancellationToken {
        let token = parent.child_token();
        *lock(&self.live.session) = Some(token.clone());
        if self.live.kill.is_cancelled() {
            token.cancel();
        }
        token
    }

    /// The client's connection id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Records that the client starts waiting for a backend now; the wait
    /// ends when the returned guard is dropped (got one, gave up, or the
    /// checkout was cancelled).
    pub fn waiting(&self) -> Waiting<'_> {
        let ns = self.live.epoch.elapsed().as_nanos() as u64 + 1;
        self.live.wait_since.store(ns, Ordering::Relaxed);
        Waiting(&self.live)
    }
}

/// A client's wait for a backend, in progress (see [`ClientEntry::waiting`]).
pub struct Waiting<'e>(&'e Live);

impl Waiting<'_> {
    /// How long the wait has lasted so far.
    pub fn elapsed(&self) -> Duration {
        let since = self.0.wait_since.load(Ordering::Relaxed).saturating_sub(1);
        self.0
            .epoch
            .elapsed()
            .saturating_sub(Duration::from_nanos(since))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.wait_since.store(0, Ordering::Relaxed);
    }
}

impl Drop for ClientEntry {
    fn drop(&mut self) {
        self.registry.with(|m| m.remove(&self.id));
    }
}

/// A poisoned lock still guards a usable token.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_update_and_vanish_with_the_session() {
        let r = Arc::new(ClientRegistry::default());
        let entry = r.register(ClientInfo {
            id: 3,
            user: "u".into(),
            database: "d".into(),
            transport: Transport::Unix,
            tls: false,
            peer: "/tmp/.s.PGSQL.6432".into(),
            connected_at: SystemTime::now(),
            state: ClientState::WaitingForBackend,
            backend: None,
            application_name: Some("app".into()),
            wait: None,
        });
        assert_eq!(r.list()[0].state, ClientState::WaitingForBackend);
        assert_eq!(r.list()[0].wait, None);
        let waiting = entry.waiting();
        std::thread::sleep(Duration::from_millis(20));
        let wait = r.list()[0].wait.unwrap_or_default();
        assert!(wait >= Duration::from_millis(20), "{wait:?}");
        assert!(waiting.elapsed() >= wait);
        drop(waiting);
        assert_eq!(r.list()[0].wait, None);
        assert_eq!(r.list()[0].application_name.as_deref(), Some("app"));
        entry.set(ClientState::Active, Some(9));
        assert_eq!(r.list()[0].backend, Some(9));
        assert_eq!(r.list()[0].state, ClientState::Active);
        entry.set(ClientState::Idle, None);
        assert_eq!(
            (r.list()[0].state, r.list()[0].backend),
            (ClientState::Idle, None)
        );
        for s in ClientState::ALL {
            assert_eq!(ClientState::from_u8(s as u8), s);
        }
        assert!(!entry.kill_token().is_cancelled());
        assert!(!r.kill(4), "no client 4");
        assert!(r.kill(3));
        assert!(entry.kill_token().is_cancelled());
        drop(entry);
        assert!(r.list().is_empty());
        assert!(!r.kill(3), "gone");
    }

    #[test]
    fn the_attached_token_ends_with_its_parent_or_kill_client() {
        let r = Arc::new(ClientRegistry::default());
        let info = |id| ClientInfo {
            id,
            user: "u".into(),
            database: "d".into(),
            transport: Transport::Unix,
            tls: false,
            peer: "127.0.0.1:1".into(),
            connected_at: SystemTime::now(),
            state: ClientState::Idle,
            backend: None,
            application_name: None,
            wait: None,
        };
        let pool = CancellationToken::new();
        let a = r.register(info(1));
        let b = r.register(info(2));
        let (ta, tb) = (a.attach(&pool), b.attach(&pool));
        assert!(r.kill(1));
        assert!(ta.is_cancelled() && !tb.is_cancelled() && !pool.is_cancelled());
        pool.cancel();
        assert!(tb.is_cancelled());
        // Killed before its pool was known: the token it attaches is born cancelled.
        let c = r.register(info(3));
        assert!(r.kill(3));
        assert!(c.attach(&CancellationToken::new()).is_cancelled());
    }
}
