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
use std::hash::BuildHasher;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::signals::{End, Signals, MOVING};
use crate::listener::{PeerAddr, Transport};
use crate::tls::label::Label;

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
    /// What its TLS session negotiated, if it uses TLS.
    pub tls: Option<Label>,
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

/// A client logging in, as [`ClientRegistry::register_login`] takes it:
/// borrowed from the login, since the registry keeps its own (interned)
/// copies.
#[derive(Debug, Clone, Copy)]
pub struct NewClient<'a> {
    /// Connection id.
    pub id: u64,
    /// Role it logged in as.
    pub user: &'a str,
    /// Database it asked for.
    pub database: &'a str,
    /// How it reached the pooler.
    pub transport: Transport,
    /// What its TLS session negotiated, if it uses TLS.
    pub tls: Option<Label>,
    /// When it logged in.
    pub connected_at: SystemTime,
    /// What it is doing.
    pub state: ClientState,
    /// The backend it holds, if any.
    pub backend: Option<u64>,
    /// The `application_name` of its startup packet, if it sent one.
    pub application_name: Option<&'a str>,
}

/// One client's entry: what it logged in with, and what it is doing now,
/// updated without the registry's lock. The session reads its user and
/// database here too, so each is kept once per client. Every idle client
/// keeps one: it is 112 bytes, jemalloc's 128-byte class with the Arc's
/// counts (a unit test keeps it there).
#[derive(Debug)]
struct Live {
    id: u64,
    /// Interned: thousands of clients share a few (role, database,
    /// application_name) triples, and one thin pointer is all they cost.
    login: Arc<Login>,
    transport: Transport,
    tls: Option<Label>,
    peer: Peer,
    /// When it logged in, in µs since the Unix epoch.
    connected_at: u64,
    state: AtomicU8,
    /// Backend id, 0 for none (ids start at 1).
    backend: AtomicU64,
    /// When its wait for a backend began, in ns after the registry's
    /// epoch plus one (0: not waiting).
    wait_since: AtomicU64,
    /// What tells the session to end or move.
    signals: Signals,
    /// The pool the session draws its backends from (see
    /// [`ClientEntry::attach`]), 0 before it has one.
    pool: AtomicUsize,
}

impl Live {
    fn store(&self, state: ClientState, backend: Option<u64>) {
        self.state.store(state as u8, Ordering::Relaxed);
        self.backend.store(backend.unwrap_or(0), Ordering::Relaxed);
    }

    fn info(&self, epoch: Instant, now: Instant) -> ClientInfo {
        ClientInfo {
            id: self.id,
            user: self.login.user.to_string(),
            database: self.login.database.to_string(),
            transport: self.transport,
            tls: self.tls,
            peer: match &self.peer {
                Peer::V4(a) => a.to_string(),
                Peer::V6(a) => a.to_string(),
                Peer::Named(n) | Peer::Socket(n) => n.to_string(),
            },
            connected_at: UNIX_EPOCH + Duration::from_micros(self.connected_at),
            state: ClientState::from_u8(self.state.load(Ordering::Relaxed)),
            backend: Some(self.backend.load(Ordering::Relaxed)).filter(|b| *b != 0),
            application_name: self.login.application_name.as_deref().map(str::to_string),
            wait: match self.wait_since.load(Ordering::Relaxed) {
                0 => None,
                since => {
                    let waited = now.saturating_duration_since(epoch);
                    Some(waited.saturating_sub(Duration::from_nanos(since - 1)))
                }
            },
        }
    }
}

/// The role a client logged in as, the database it asked for, and the
/// `application_name` of its startup packet.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Login<S = Box<str>> {
    user: S,
    database: S,
    application_name: Option<S>,
}

impl Login {
    /// The borrowed view it is interned by.
    fn key(&self) -> Login<&str> {
        Login {
            user: &self.user,
            database: &self.database,
            application_name: self.application_name.as_deref(),
        }
    }
}

/// Where a client is: a TCP address kept as one (no string per client), or
/// a name: a Unix socket's path, which its listener shares with every
/// client it accepts, or whatever a takeover brought (interned here).
#[derive(Debug)]
enum Peer {
    V4(SocketAddrV4),
    /// Boxed: an IPv6 address is 28 bytes, and would widen every entry.
    V6(Box<SocketAddrV6>),
    /// Interned in [`Entries::names`].
    Named(Arc<str>),
    /// The listener's own string for its socket.
    Socket(Arc<str>),
}

impl Peer {
    /// A TCP peer's address, kept as one.
    fn of(addr: SocketAddr) -> Peer {
        match addr {
            SocketAddr::V4(addr) => Peer::V4(addr),
            SocketAddr::V6(addr) => Peer::V6(Box::new(addr)),
        }
    }
}

/// The entries, the names they share, and the signals every session gets,
/// including the ones that register later.
#[derive(Debug, Default)]
struct Entries {
    by_id: BTreeMap<u64, Arc<Live>>,
    /// Logins by the hash of what they hold (see [`Login`]); a rare
    /// collision shares a bucket.
    logins: foldhash::HashMap<u64, Vec<Arc<Login>>>,
    hasher: foldhash::fast::RandomState,
    names: foldhash::HashSet<Arc<str>>,
    everyone: u8,
}

impl Entries {
    /// `name`, shared with every entry that has it.
    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.names.get(name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        self.names.insert(n.clone());
        n
    }

    /// The login `key` names, shared with every entry that has it.
    fn login(&mut self, key: Login<&str>) -> Arc<Login> {
        let bucket = self.logins.entry(self.hasher.hash_one(&key)).or_default();
        if let Some(l) = bucket.iter().find(|l| l.key() == key) {
            return l.clone();
        }
        let login = Arc::new(Login {
            user: key.user.into(),
            database: key.database.into(),
            application_name: key.application_name.map(Into::into),
        });
        bucket.push(login.clone());
        login
    }

    /// Forgets `login` once no entry but the departing one has it.
    fn release_login(&mut self, login: &Arc<Login>) {
        // The map's reference and the departing entry's.
        if Arc::strong_count(login) > 2 {
            return;
        }
        let hash = self.hasher.hash_one(login.key());
        if let Some(bucket) = self.logins.get_mut(&hash) {
            bucket.retain(|l| !Arc::ptr_eq(l, login));
            if bucket.is_empty() {
                self.logins.remove(&hash);
            }
        }
    }

    /// Forgets `name` once no entry but the departing one (`live`) has it.
    fn release(&mut self, name: &Arc<str>) {
        // The set's reference and the departing entry's.
        if Arc::strong_count(name) <= 2 {
            self.names.remove(name);
        }
    }

    fn remove(&mut self, live: &Live) {
        self.by_id.remove(&live.id);
        self.release_login(&live.login);
        if let Peer::Named(n) = &live.peer {
            self.release(n);
        }
    }
}

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
    /// Its user, database, peer and application_name are kept here (the
    /// session reads them from the entry); its state and backend come from
    /// `info` too, the rest of `info` is ignored.
    pub fn register(self: &Arc<Self>, info: ClientInfo) -> ClientEntry {
        let new = NewClient {
            id: info.id,
            user: &info.user,
            database: &info.database,
            transport: info.transport,
            tls: info.tls,
            connected_at: info.connected_at,
            state: info.state,
            backend: info.backend,
            application_name: info.application_name.as_deref(),
        };
        self.insert(new, |m| match info.peer.parse() {
            Ok(addr) => Peer::of(addr),
            Err(_) => Peer::Named(m.intern(&info.peer)),
        })
    }

    /// Adds a client that logged in over `peer`, as its listener accepted
    /// it: nothing is formatted, parsed or copied but its login's names.
    pub fn register_login(self: &Arc<Self>, new: NewClient<'_>, peer: &PeerAddr) -> ClientEntry {
        self.insert(new, |_| match peer {
            PeerAddr::Tcp(addr) => Peer::of(*addr),
            PeerAddr::Path(path) => Peer::Socket(path.clone()),
        })
    }

    fn insert(
        self: &Arc<Self>,
        new: NewClient<'_>,
        peer: impl FnOnce(&mut Entries) -> Peer,
    ) -> ClientEntry {
        let id = new.id;
        let live = |m: &mut Entries| Live {
            id,
            login: m.login(Login {
                user: new.user,
                database: new.database,
                application_name: new.application_name,
            }),
            transport: new.transport,
            tls: new.tls,
            peer: peer(m),
            connected_at: new
                .connected_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64),
            state: AtomicU8::new(new.state as u8),
            backend: AtomicU64::new(new.backend.unwrap_or(0)),
            wait_since: AtomicU64::new(0),
            signals: Signals::with(m.everyone),
            pool: AtomicUsize::new(0),
        };
        // Made under the lock: a signal to everyone is either in `everyone`
        // already or raised on this entry by the walk that follows it.
        let live = self.with(|m| {
            let live = Arc::new(live(m));
            m.by_id.insert(id, live.clone());
            live
        });
        ClientEntry {
            registry: self.clone(),
            live,
        }
    }

    /// KILL_CLIENT: tells client `id`'s session to end; false when no such
    /// client is logged in.
    pub fn kill(&self, id: u64) -> bool {
        let live = self.with(|m| m.by_id.get(&id).cloned());
        live.map(|l| l.signals.end(End::KillClient)).is_some()
    }

    /// Tells every session, and every one that logs in from now on, to end
    /// (shutdown).
    pub fn end_all(&self, why: End) {
        self.signal_all(why.bit());
    }

    /// Tells every session, and every one that logs in from now on, that a
    /// takeover's hand-over has started.
    pub fn start_moving_all(&self) {
        self.signal_all(MOVING);
    }

    fn signal_all(&self, bits: u8) {
        self.with(|m| {
            m.everyone |= bits;
            for live in m.by_id.values() {
                live.signals.raise(bits);
            }
        });
    }

    /// KILL of a pool: tells the sessions attached to pool `pool` (see
    /// [`ClientEntry::attach`]) to end; those that attach later are not.
    pub fn end_pool(&self, pool: usize) {
        self.with(|m| {
            for live in m.by_id.values() {
                if live.pool.load(Ordering::Acquire) == pool {
                    live.signals.end(End::PoolKilled);
                }
            }
        });
    }

    /// How many clients are logged in.
    pub fn len(&self) -> usize {
        self.with(|m| m.by_id.len())
    }

    /// Whether no client is logged in.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of one entry as the registry keeps it (the shared names not
    /// counted), for SHOW MEM.
    pub fn entry_size() -> usize {
        // The Arc's two counts, and the map's key and pointer.
        std::mem::size_of::<Live>() + 16 + 16
    }

    /// A copy of every entry, with waits as of now.
    pub fn list(&self) -> Vec<ClientInfo> {
        let now = Instant::now();
        self.with(|m| {
            m.by_id
                .values()
                .map(|live| live.info(self.epoch, now))
                .collect()
        })
    }
}

/// A client's place in the registry, for as long as the session lives.
pub struct ClientEntry {
    registry: Arc<ClientRegistry>,
    live: Arc<Live>,
}

impl ClientEntry {
    /// What the client logged in with and is doing now.
    pub fn info(&self) -> ClientInfo {
        self.live.info(self.registry.epoch, Instant::now())
    }

    /// The role the client logged in as.
    pub fn user(&self) -> &str {
        &self.live.login.user
    }

    /// The database the client asked for.
    pub fn database(&self) -> &str {
        &self.live.login.database
    }

    /// Records what the client is doing now.
    pub fn set(&self, state: ClientState, backend: Option<u64>) {
        self.live.store(state, backend);
    }

    /// What tells the session to end or to move.
    pub fn signals(&self) -> &Signals {
        &self.live.signals
    }

    /// Records the pool the session draws its backends from (an identity
    /// the pool gives, never 0): a KILL of that pool ends the session.
    pub fn attach(&self, pool: usize) {
        self.live.pool.store(pool, Ordering::Release);
    }

    /// The client's connection id.
    pub fn id(&self) -> u64 {
        self.live.id
    }

    /// Records that the client started waiting for a backend at `since`
    /// (the checkout's own clock reading); the wait ends when the returned
    /// guard is dropped (got one, gave up, or the checkout was cancelled).
    pub fn waiting(&self, since: Instant) -> Waiting<'_> {
        let ns = since
            .saturating_duration_since(self.registry.epoch)
            .as_nanos() as u64
            + 1;
        self.live.wait_since.store(ns, Ordering::Relaxed);
        Waiting(self)
    }
}

/// A client's wait for a backend, in progress (see [`ClientEntry::waiting`]).
pub struct Waiting<'e>(&'e ClientEntry);

impl Waiting<'_> {
    /// How long the wait has lasted so far.
    pub fn elapsed(&self) -> Duration {
        let since = self.0.live.wait_since.load(Ordering::Relaxed);
        self.0
            .registry
            .epoch
            .elapsed()
            .saturating_sub(Duration::from_nanos(since.saturating_sub(1)))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.live.wait_since.store(0, Ordering::Relaxed);
    }
}

impl Drop for ClientEntry {
    fn drop(&mut self) {
        self.registry.with(|m| m.remove(&self.live));
    }
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
            tls: None,
            peer: "/tmp/.s.PGSQL.6432".into(),
            connected_at: SystemTime::now(),
            state: ClientState::WaitingForBackend,
            backend: None,
            application_name: Some("app".into()),
            wait: None,
        });
        assert_eq!(r.list()[0].state, ClientState::WaitingForBackend);
        assert_eq!(r.list()[0].wait, None);
        let waiting = entry.waiting(Instant::now());
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
        assert_eq!(entry.signals().ended(), None);
        assert!(!r.kill(4), "no client 4");
        assert!(r.kill(3));
        assert_eq!(entry.signals().ended(), Some(End::KillClient));
        drop(entry);
        assert!(r.list().is_empty());
        assert!(!r.kill(3), "gone");
    }

    #[test]
    fn kill_of_a_pool_reaches_its_sessions_and_shutdown_reaches_everyone() {
        let r = Arc::new(ClientRegistry::default());
        let info = |id| ClientInfo {
            id,
            user: "u".into(),
            database: "d".into(),
            transport: Transport::Unix,
            tls: None,
            peer: "127.0.0.1:1".into(),
            connected_at: SystemTime::now(),
            state: ClientState::Idle,
            backend: None,
            application_name: None,
            wait: None,
        };
        let (a, b, c) = (
            r.register(info(1)),
            r.register(info(2)),
            r.register(info(3)),
        );
        a.attach(10);
        b.attach(20);
        assert!(r.kill(3));
        r.end_pool(10);
        let ended = |e: &ClientEntry| e.signals().ended();
        assert_eq!(ended(&a), Some(End::PoolKilled));
        assert_eq!(ended(&b), None);
        assert_eq!(ended(&c), Some(End::KillClient));
        // Attached after the KILL: the fresh backends serve it.
        let d = r.register(info(4));
        d.attach(10);
        assert_eq!(ended(&d), None);
        r.start_moving_all();
        assert_eq!(ended(&d), None, "moving is no reason to end");
        r.end_all(End::Shutdown);
        for e in [&a, &b, &c, &d] {
            assert_eq!(ended(e), Some(End::Shutdown));
        }
        // Logged in after the shutdown began: ended from the start.
        let late = r.register(info(5));
        assert_eq!(ended(&late), Some(End::Shutdown));
        assert_eq!((late.user(), late.database(), late.id()), ("u", "d", 5));
    }

    #[test]
    fn names_are_kept_once_and_forgotten_with_their_last_client() {
        let r = Arc::new(ClientRegistry::default());
        let info = |id, peer: &str| ClientInfo {
            id,
            user: "alice".into(),
            database: "app".into(),
            transport: Transport::LoopbackTcp,
            tls: None,
            peer: peer.into(),
            connected_at: SystemTime::now(),
            state: ClientState::Idle,
            backend: None,
            application_name: None,
            wait: None,
        };
        let a = r.register(info(1, "127.0.0.1:5000"));
        let b = r.register(info(2, "[::1]:6000"));
        let c = r.register(info(3, "/tmp/.s.PGSQL.6432"));
        let names = || r.with(|m| m.names.len() + m.logins.values().map(Vec::len).sum::<usize>());
        assert_eq!(names(), 2, "alice at app, and the socket path");
        let peers: Vec<_> = r.list().into_iter().map(|i| i.peer).collect();
        assert_eq!(
            peers,
            ["127.0.0.1:5000", "[::1]:6000", "/tmp/.s.PGSQL.6432"]
        );
        drop(c);
        assert_eq!(names(), 1);
        drop(a);
        assert_eq!(names(), 1, "b still has them");
        assert_eq!((b.user(), b.database()), ("alice", "app"));
        drop(b);
        assert_eq!(names(), 0);
    }

    /// A login registers its peer as the listener accepted it: the same
    /// text in SHOW CLIENTS as a registration by text, a socket's path
    /// shared with the listener rather than interned, and its names
    /// shared with a client registered by text.
    #[test]
    fn a_login_registers_its_peer_as_accepted() {
        let r = Arc::new(ClientRegistry::default());
        let path: Arc<str> = Arc::from("/tmp/.s.PGSQL.6432");
        let new = |id| NewClient {
            id,
            user: "alice",
            database: "app",
            transport: Transport::Unix,
            tls: None,
            connected_at: SystemTime::now(),
            state: ClientState::WaitingForBackend,
            backend: None,
            application_name: Some("psql"),
        };
        let peers = [
            PeerAddr::Tcp("127.0.0.1:5000".parse().unwrap()),
            PeerAddr::Tcp("[::1]:6000".parse().unwrap()),
            PeerAddr::Path(path.clone()),
        ];
        let entries: Vec<_> = (1..)
            .zip(&peers)
            .map(|(id, peer)| r.register_login(new(id), peer))
            .collect();
        let by_text = r.register(ClientInfo {
            id: 9,
            user: "alice".into(),
            database: "app".into(),
            transport: Transport::Unix,
            tls: None,
            peer: "/tmp/.s.PGSQL.6432".into(),
            connected_at: SystemTime::now(),
            state: ClientState::Idle,
            backend: None,
            application_name: Some("psql".into()),
            wait: None,
        });
        let list = r.list();
        let shown: Vec<_> = list.iter().map(|i| i.peer.as_str()).collect();
        assert_eq!(
            shown,
            [
                "127.0.0.1:5000",
                "[::1]:6000",
                "/tmp/.s.PGSQL.6432",
                "/tmp/.s.PGSQL.6432"
            ]
        );
        assert!(list
            .iter()
            .all(|i| i.application_name.as_deref() == Some("psql")));
        assert_eq!(list[0].state, ClientState::WaitingForBackend);
        // One login for all four; one interned name, the text's.
        let counts = || {
            r.with(|m| {
                (
                    m.logins.values().map(Vec::len).sum::<usize>(),
                    m.names.len(),
                )
            })
        };
        assert_eq!(counts(), (1, 1));
        assert_eq!(
            Arc::strong_count(&path),
            3,
            "the test's, the peer's and the entry's"
        );
        drop(by_text);
        assert_eq!(counts(), (1, 0));
        drop(entries);
        assert_eq!(counts(), (0, 0));
        assert_eq!(Arc::strong_count(&path), 2);
    }

    #[test]
    fn logins_are_shared_per_role_database_and_application_name() {
        let r = Arc::new(ClientRegistry::default());
        let info = |id, user: &str, database: &str, app: Option<&str>| ClientInfo {
            id,
            user: user.into(),
            database: database.into(),
            transport: Transport::LoopbackTcp,
            tls: None,
            peer: "[::1]:5000".into(),
            connected_at: UNIX_EPOCH + Duration::from_micros(1_765_000_000_123_456),
            state: ClientState::Idle,
            backend: None,
            application_name: app.map(str::to_string),
            wait: None,
        };
        let a = r.register(info(1, "alice", "app", None));
        let b = r.register(info(2, "alice", "app", None));
        let c = r.register(info(3, "alice", "other", None));
        let d = r.register(info(4, "bob", "app", None));
        let e = r.register(info(5, "alice", "app", Some("psql")));
        let f = r.register(info(6, "alice", "app", Some("")));
        assert!(Arc::ptr_eq(&a.live.login, &b.live.login));
        for other in [&c, &d, &e, &f] {
            assert!(!Arc::ptr_eq(&a.live.login, &other.live.login));
        }
        let logins = || r.with(|m| m.logins.values().map(Vec::len).sum::<usize>());
        assert_eq!(logins(), 5);
        assert_eq!(
            (c.user(), c.database(), d.user(), d.database()),
            ("alice", "other", "bob", "app")
        );
        let shown: Vec<_> = r
            .list()
            .into_iter()
            .map(|i| (i.id, i.application_name, i.peer, i.connected_at))
            .collect();
        let at = UNIX_EPOCH + Duration::from_micros(1_765_000_000_123_456);
        assert_eq!(
            shown[4],
            (5, Some("psql".to_string()), "[::1]:5000".to_string(), at)
        );
        assert_eq!(
            shown[5].1.as_deref(),
            Some(""),
            "an empty name is not no name"
        );
        assert_eq!(shown[0].1, None);
        drop((a, d, e));
        assert_eq!(logins(), 3, "b keeps alice at app");
        drop((b, c, f));
        assert_eq!(logins(), 0);
        assert!(r.with(|m| m.logins.is_empty()));
    }

    /// Every idle client keeps an entry: 112 bytes and the Arc's two
    /// counts fill jemalloc's 128-byte class.
    #[test]
    fn an_entry_fits_jemallocs_128_byte_class() {
        let size = std::mem::size_of::<Live>() + 16;
        assert!(size <= 128, "a registry entry takes {size} bytes");
    }
}
