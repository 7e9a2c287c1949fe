//! How a relay ended, and its transfer accounting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::protocol::Violation;
use crate::stats::{Class, SessionTransfer, Stats, FLUSH_INTERVAL};

/// How a relay ended.
#[derive(Debug)]
pub enum RelayEnd {
    /// The client sent Terminate.
    Terminated,
    /// The client closed its socket or its socket failed.
    ClientGone,
    /// The client broke the protocol; the text goes into a FATAL 08P01.
    ClientViolation(Violation),
    /// The server closed, failed, or broke the protocol.
    BackendGone(String),
    /// The server sent a FATAL error (already relayed to the client) and closed.
    BackendFatal,
    /// The client sat idle inside a transaction past `idle_transaction_timeout`.
    IdleInTransaction,
    /// A statement-pooling client opened a transaction block.
    TransactionInStatementMode,
}

/// What the two directions share for the meter (uncontended atomics: both
/// directions run in one task): bytes in, and when an exchange started.
pub(crate) struct Progress {
    /// Bytes client → server not yet handed to the meter.
    pub(crate) bytes_in: AtomicU64,
    /// When the exchange in flight began, in ns after `epoch` plus one (0: none).
    exchange_start: AtomicU64,
    epoch: Instant,
}

impl Progress {
    /// Progress of one relay of the session metered by `meter`.
    pub(crate) fn new(meter: &Meter<'_>) -> Self {
        Progress {
            bytes_in: AtomicU64::new(0),
            exchange_start: AtomicU64::new(0),
            epoch: meter.epoch,
        }
    }

    pub(crate) fn mark_start(&self) {
        if self.exchange_start.load(Ordering::Relaxed) == 0 {
            let ns = self.now_ns() + 1;
            self.exchange_start.store(ns, Ordering::Relaxed);
        }
    }

    /// Nanoseconds since `epoch`: one clock read, kept as an integer so
    /// the meter's other checks reuse it instead of reading the clock again.
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Ends the exchange in flight at `now` (ns after `epoch`); when it
    /// started (ns after `epoch`), if one had.
    fn take_exchange(&self, now: u64) -> Option<u64> {
        match self.exchange_start.swap(0, Ordering::Relaxed) {
            0 => None,
            start => Some((start - 1).min(now)),
        }
    }
}

/// A session's accounting (transfer, queries, transactions, waits), handed
/// to the collector when the session ends and at most once per
/// [`FLUSH_INTERVAL`] while it runs: per transaction it only adds to its own
/// fields.
pub struct Meter<'a> {
    stats: &'a Stats,
    classes: [Class; 2],
    /// The database the client asked for, whose SHOW STATS row this feeds.
    database: &'a str,
    pending: SessionTransfer,
    /// When the transaction in progress began, in ns after `epoch` plus one
    /// (0: none in progress).
    xact_start: u64,
    /// Bytes of the response in flight so far.
    exchange_bytes: u64,
    /// The session's clock origin, shared with each relay's [`Progress`].
    epoch: Instant,
    /// When the counters were last handed over, in ns after `epoch`.
    last_flush_ns: u64,
    /// The last clock reading of an exchange's end, in ns after `epoch`:
    /// the end of a relay right after it reads no clock of its own.
    seen_ns: u64,
    /// Bytes client → server and server → client in all, for the
    /// session's log line (only these: every idle client keeps a meter).
    pub total: [u64; 2],
}

impl<'a> Meter<'a> {
    /// A meter for a session on `database` of the client class and the
    /// backend class in `classes`.
    pub fn new(stats: &'a Stats, classes: [Class; 2], database: &'a str) -> Self {
        Meter {
            stats,
            classes,
            database,
            pending: SessionTransfer::default(),
            xact_start: 0,
            exchange_bytes: 0,
            epoch: Instant::now(),
            last_flush_ns: 0,
            seen_ns: 0,
            total: [0; 2],
        }
    }

    /// Counts a backend handed to the client after it waited `waited`.
    pub fn assigned(&mut self, waited: Duration) {
        self.pending.assigned(waited);
    }

    /// Counts ReadyForQuery messages relayed to the client: `queries`
    /// client requests (a Query, or a batch up to its Sync) answered, of
    /// which `ended` left the server idle, each ending a transaction.
    /// Counting them, not exchanges, keeps a pipelining client's count true.
    pub(crate) fn answered(&mut self, queries: u32, ended: u32) {
        self.pending.queries += u64::from(queries);
        self.pending.xacts += u64::from(ended);
    }

    /// The server owes nothing more: the exchange's time is query time, and
    /// transaction time runs from the start of the exchange that opened the
    /// transaction until one that leaves the server idle (`in_tx` false).
    /// The clock is read once here, as before.
    pub(crate) fn exchange_done(&mut self, progress: &Progress, in_tx: bool) {
        let now = progress.now_ns();
        self.seen_ns = now;
        if let Some(start) = progress.take_exchange(now) {
            let busy = Duration::from_nanos(now - start);
            self.pending.exchange(self.exchange_bytes, busy);
            if self.xact_start == 0 {
                self.xact_start = start + 1;
            }
        }
        if !in_tx && self.xact_start != 0 {
            let took = now.saturating_sub(self.xact_start - 1);
            self.pending.xact_time(Duration::from_nanos(took));
            self.xact_start = 0;
        }
        self.exchange_bytes = 0;
        if now.saturating_sub(self.last_flush_ns) >= FLUSH_INTERVAL.as_nanos() as u64 {
            // Bytes in must go with bytes out, or a long session's rate
            // would show only one direction until it ends.
            self.flush(Some(&progress.bytes_in));
        }
    }

    /// Counts bytes relayed to the client.
    pub(crate) fn sent_to_client(&mut self, n: u64) {
        self.exchange_bytes += n;
        self.pending.bytes_out += n;
    }

    /// A relay over one backend ended (in transaction pooling, once per
    /// transaction): its bytes in join the counters, which go to the
    /// collector only if [`FLUSH_INTERVAL`] has passed, so a transaction
    /// takes no shared lock. What an idle client has not handed over yet
    /// goes with its next transaction or its end. The time is the last
    /// exchange's end, which is when a transaction's relay ends.
    pub fn relay_done(&mut self, bytes_in: &AtomicU64) {
        self.pending.bytes_in += bytes_in.swap(0, Ordering::Relaxed);
        let now = self.seen_ns;
        if now.saturating_sub(self.last_flush_ns) >= FLUSH_INTERVAL.as_nanos() as u64 {
            self.flush(None);
        }
    }

    /// Hands the counters to the collector.
    pub fn flush(&mut self, progress: Option<&AtomicU64>) {
        if let Some(bytes_in) = progress {
            self.pending.bytes_in += bytes_in.swap(0, Ordering::Relaxed);
        }
        self.stats
            .session(self.classes, self.database, &self.pending);
        self.total[0] += self.pending.bytes_in;
        self.total[1] += self.pending.bytes_out;
        self.pending = SessionTransfer::default();
        self.last_flush_ns = self.epoch.elapsed().as_nanos() as u64;
    }
}

impl Drop for Meter<'_> {
    /// A session that ends on an error path still hands its counters over.
    fn drop(&mut self) {
        if self.pending != SessionTransfer::default() {
            self.flush(None);
        }
    }
}
