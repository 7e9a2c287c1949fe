//! Where connection cost goes: establishment phases and transfer, grouped by
//! transport class and TLS, for clients and for backends.
//!
//! Cheap on the hot path: a connection keeps its own counters and merges
//! them here once per login, per backend connect, and when a session ends or
//! has been relaying for [`FLUSH_INTERVAL`] — one short lock each, never one
//! per message or per transaction. A session's counters go to its client
//! and backend classes (SHOW OVERHEAD) and to its database (SHOW STATS) in
//! that one lock.

mod class;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

pub use class::{AuthKind, Class, Side};

/// How often a long session hands its transfer counters over.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// A response at least this large counts as a bulk transfer.
pub const BULK_BYTES: u64 = 1 << 20;

/// Client establishment phases, in the order they happen.
pub const CLIENT_PHASES: [&str; 6] = [
    "first_packet",
    "tls_handshake",
    "auth",
    "backend_wait",
    "first_ready",
    "total",
];
/// Backend establishment phases.
pub const BACKEND_PHASES: [&str; 5] = ["connect", "tls_handshake", "auth", "first_ready", "total"];

/// Measured phases of one client login, each in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientLogin {
    /// Values in [`CLIENT_PHASES`] order.
    pub phases_us: [u64; 6],
}

/// Measured phases of one backend connect, each in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct BackendConnect {
    /// Values in [`BACKEND_PHASES`] order.
    pub phases_us: [u64; 5],
}

/// Bytes and time of one kind of transfer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transfer {
    /// Request/response exchanges.
    pub exchanges: u64,
    /// Bytes from the server in those exchanges.
    pub bytes: u64,
    /// Time from the request's first byte to the response's ReadyForQuery, µs.
    pub busy_us: u64,
}

impl Transfer {
    /// Adds one exchange.
    pub fn add(&mut self, bytes: u64, busy_us: u64) {
        self.exchanges += 1;
        self.bytes += bytes;
        self.busy_us += busy_us;
    }

    fn merge(&mut self, o: &Transfer) {
        self.exchanges += o.exchanges;
        self.bytes += o.bytes;
        self.busy_us += o.busy_us;
    }

    /// Throughput while busy, MB/s (0 when nothing was measured).
    pub fn mb_per_s(&self) -> f64 {
        if self.busy_us == 0 {
            0.0
        } else {
            self.bytes as f64 / self.busy_us as f64
        }
    }
}

/// Counters one session accumulates between flushes: transfer, and
/// PgBouncer's transaction, query and wait counts. A query is one client
/// request answered (a ReadyForQuery relayed to the client: a simple Query,
/// or an extended batch up to its Sync); a transaction ends at such a
/// ReadyForQuery that says idle (`I`), so an autocommit statement is one
/// of each. Query time is the exchanges' busy time; transaction time runs
/// from the start of the exchange that opened it to the one that ended it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionTransfer {
    /// Bytes client → server.
    pub bytes_in: u64,
    /// Bytes server → client.
    pub bytes_out: u64,
    /// Exchanges whose response was under [`BULK_BYTES`].
    pub chatty: Transfer,
    /// Exchanges whose response was at least [`BULK_BYTES`].
    pub bulk: Transfer,
    /// Client requests answered.
    pub queries: u64,
    /// Transactions completed.
    pub xacts: u64,
    /// Their time in all, µs.
    pub xact_us: u64,
    /// Backends handed to a client of the session.
    pub assignments: u64,
    /// Time the client waited for those backends, µs.
    pub wait_us: u64,
}

impl SessionTransfer {
    /// Records one finished exchange.
    pub fn exchange(&mut self, response_bytes: u64, busy: Duration) {
        let us = busy.as_micros() as u64;
        if response_bytes >= BULK_BYTES {
            self.bulk.add(response_bytes, us);
        } else {
            self.chatty.add(response_bytes, us);
        }
    }

    /// Adds time spent in transactions.
    pub fn xact_time(&mut self, took: Duration) {
        self.xact_us += took.as_micros() as u64;
    }

    /// Records one backend handed over after `waited`.
    pub fn assigned(&mut self, waited: Duration) {
        self.assignments += 1;
        self.wait_us += waited.as_micros() as u64;
    }

    /// Time with queries in flight (the exchanges' busy time), µs.
    pub fn query_us(&self) -> u64 {
        self.chatty.busy_us + self.bulk.busy_us
    }

    /// Adds another session's counters.
    pub fn merge(&mut self, o: &SessionTransfer) {
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.chatty.merge(&o.chatty);
        self.bulk.merge(&o.bulk);
        self.queries += o.queries;
        self.xacts += o.xacts;
        self.xact_us += o.xact_us;
        self.assignments += o.assignments;
        self.wait_us += o.wait_us;
    }
}

fn histogram() -> Histogram<u64> {
    // 1 µs .. 1 h at 2 significant digits: a few KiB each.
    Histogram::new_with_bounds(1, 3_600_000_000, 2).unwrap_or_else(|_| {
        Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits is valid"))
    })
}

/// Everything known about one class of connections.
#[derive(Debug, Clone)]
pub struct ClassStats {
    /// Successful logins (clients) or connects (backends).
    pub established: u64,
    /// Logins or connects that failed.
    pub failed: u64,
    /// One histogram per phase (µs), in [`CLIENT_PHASES`] or [`BACKEND_PHASES`] order.
    pub phases: Vec<Histogram<u64>>,
    /// Transfer counters; on backend classes, the traffic of sessions on backends of that class.
    pub transfer: SessionTransfer,
    /// Client logins a backend served before it was closed (backends only).
    pub logins_per_backend: Histogram<u64>,
}

impl ClassStats {
    fn new(side: Side) -> Self {
        let n = match side {
            Side::Client => CLIENT_PHASES.len(),
            Side::Backend => BACKEND_PHASES.len(),
        };
        ClassStats {
            established: 0,
            failed: 0,
            phases: (0..n).map(|_| histogram()).collect(),
            transfer: SessionTransfer::default(),
            logins_per_backend: histogram(),
        }
    }

    fn record_phases(&mut self, values: &[u64]) {
        self.established += 1;
        for (h, v) in self.phases.iter_mut().zip(values) {
            // Out-of-range values are clamped rather than lost.
            h.saturating_record(*v);
        }
    }
}

/// What the collector's one lock guards.
#[derive(Default)]
struct Books {
    classes: BTreeMap<Class, ClassStats>,
    /// Per database a client asked for.
    databases: BTreeMap<String, SessionTransfer>,
}

/// The pooler-wide collector.
#[derive(Default)]
pub struct Stats {
    books: Mutex<Books>,
    /// Client logins that were given a backend some earlier client had used.
    pub reused_logins: AtomicU64,
    /// Client logins in all.
    pub logins: AtomicU64,
}

impl Stats {
    /// A collector with nothing recorded.
    pub fn new() -> Self {
        Stats::default()
    }

    fn with_books<R>(&self, f: impl FnOnce(&mut Books) -> R) -> R {
        match self.books.lock() {
            Ok(mut b) => f(&mut b),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    fn with_class<R>(&self, class: Class, f: impl FnOnce(&mut ClassStats) -> R) -> R {
        self.with_books(|b| f(b.class(class)))
    }

    /// Records a successful client login; `reused` says its backend had served before.
    pub fn client_login(&self, class: Class, login: &ClientLogin, reused: bool) {
        self.logins.fetch_add(1, Ordering::Relaxed);
        if reused {
            self.reused_logins.fetch_add(1, Ordering::Relaxed);
        }
        self.with_class(class, |c| c.record_phases(&login.phases_us));
    }

    /// Records a client that did not get as far as a session.
    pub fn client_failed(&self, class: Class) {
        self.with_class(class, |c| c.failed += 1);
    }

    /// Records a successful backend connect.
    pub fn backend_connect(&self, class: Class, connect: &BackendConnect) {
        self.with_class(class, |c| c.record_phases(&connect.phases_us));
    }

    /// Records a backend connect that failed.
    pub fn backend_failed(&self, class: Class) {
        self.with_class(class, |c| c.failed += 1);
    }

    /// Records how many logins a closed backend served.
    pub fn backend_closed(&self, class: Class, logins_served: u64) {
        self.with_class(class, |c| {
            c.logins_per_backend.saturating_record(logins_served.max(1))
        });
    }

    /// Merges a session's transfer counters into one class.
    pub fn transfer(&self, class: Class, t: &SessionTransfer) {
        if *t != SessionTransfer::default() {
            self.with_class(class, |c| c.transfer.merge(t));
        }
    }

    /// Merges a session's counters into its client and backend classes
    /// and its database, under one lock.
    pub fn session(&self, classes: [Class; 2], database: &str, t: &SessionTransfer) {
        if *t == SessionTransfer::default() {
            return;
        }
        self.with_books(|b| {
            for class in classes {
                b.class(class).transfer.merge(t);
            }
            match b.databases.get_mut(database) {
                Some(d) => d.merge(t),
                None => {
                    b.databases.insert(database.to_string(), *t);
                }
            }
        });
    }

    /// A copy of every class, for reports.
    pub fn snapshot(&self) -> BTreeMap<Class, ClassStats> {
        self.with_books(|b| b.classes.clone())
    }

    /// A copy of every database's counters (databases with traffic only).
    pub fn databases(&self) -> BTreeMap<String, SessionTransfer> {
        self.with_books(|b| b.databases.clone())
    }
}

impl Books {
    fn class(&mut self, class: Class) -> &mut ClassStats {
        self.classes
            .entry(class)
            .or_insert_with(|| ClassStats::new(class.side))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listener::Transport;

    #[test]
    fn merges_by_class_and_splits_bulk_from_chatty() {
        let s = Stats::new();
        let unix = Class::client(Transport::Unix, false, Some(AuthKind::Peer));
        let tls = Class::client(Transport::LoopbackTcp, true, Some(AuthKind::Scram));
        let mut login = ClientLogin::default();
        login.phases_us[1] = 700;
        s.client_login(tls, &login, true);
        s.client_login(unix, &ClientLogin::default(), false);
        let mut t = SessionTransfer::default();
        t.exchange(100, Duration::from_micros(50));
        t.exchange(BULK_BYTES * 3, Duration::from_millis(30));
        s.transfer(unix, &t);
        let snap = s.snapshot();
        assert_eq!(snap[&tls].established, 1);
        let h = &snap[&tls].phases[1];
        assert!(h.equivalent(h.max(), 700), "max {}", h.max());
        assert_eq!(snap[&unix].phases[1].max(), 0);
        assert_eq!(snap[&unix].transfer.bulk.exchanges, 1);
        assert_eq!(snap[&unix].transfer.chatty.bytes, 100);
        assert!((snap[&unix].transfer.bulk.mb_per_s() - 104.857_6).abs() < 0.01);
        assert_eq!(s.reused_logins.load(Ordering::Relaxed), 1);
        assert_eq!(s.logins.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_session_merges_into_its_classes_and_its_database() {
        let s = Stats::new();
        let unix = Class::client(Transport::Unix, false, Some(AuthKind::Peer));
        let server = Class::backend(Transport::Unix, false);
        let mut t = SessionTransfer::default();
        t.exchange(10, Duration::from_micros(40));
        t.exchange(10, Duration::from_micros(60));
        (t.queries, t.xacts) = (2, 1);
        t.xact_time(Duration::from_micros(150));
        t.assigned(Duration::from_micros(7));
        s.session([unix, server], "app", &t);
        s.session([unix, server], "app", &t);
        s.session([unix, server], "idle", &SessionTransfer::default());
        let dbs = s.databases();
        assert_eq!(dbs.keys().collect::<Vec<_>>(), ["app"]);
        let app = dbs["app"];
        assert_eq!((app.queries, app.query_us()), (4, 200));
        assert_eq!((app.xacts, app.xact_us), (2, 300));
        assert_eq!((app.assignments, app.wait_us), (2, 14));
        let snap = s.snapshot();
        assert_eq!(snap[&unix].transfer, snap[&server].transfer);
        assert_eq!(snap[&unix].transfer.xacts, 2);
    }
}
