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

    /// Ends the exchange in flight at `now` (ns after `epoch`); its
    /// duration, if one had started.
    fn take_exchange(&self, now: u64) -> Option<Duration> {
        match self.exchange_start.swap(0, Ordering::Relaxed) {
            0 => None,
            start => Some(Duration::from_nanos(now.saturating_sub(start - 1))),
        }
    }
}

/// A session's transfer accounting, handed to the collector when the session
/// ends and at most once per [`FLUSH_INTERVAL`] while it runs.
pub struct Meter<'a> {
    stats: &'a Stats,
    classes: [Class; 2],
    pending: SessionTransfer,
    /// Bytes of the response in flight so far.
    exchange_bytes: u64,
    /// The session's clock origin, shared with each relay's [`Progress`].
    epoch: Instant,
    /// When the counters were last handed over, in ns after `epoch`.
    last_flush_ns: u64,
    /// Totals for the session's log line.
    pub total: SessionTransfer,
}

impl<'a> Meter<'a> {
    /// A meter for a session of client class `client` on a backend of class `backend`.
    pub fn new(stats: &'a Stats, client: Class, backend: Class) -> Self {
        Meter {
            stats,
            classes: [client, backend],
            pending: SessionTransfer::default(),
            exchange_bytes: 0,
            epoch: Instant::now(),
            last_flush_ns: 0,
            total: SessionTransfer::default(),
        }
    }

    pub(crate) fn exchange_done(&mut self, progress: &Progress) {
        let now = progress.now_ns();
        if let Some(busy) = progress.take_exchange(now) {
            self.pending.exchange(self.exchange_bytes, busy);
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

    /// Hands the counters to the collector.
    pub fn flush(&mut self, progress: Option<&AtomicU64>) {
        if let Some(bytes_in) = progress {
            self.pending.bytes_in += bytes_in.swap(0, Ordering::Relaxed);
        }
        for class in self.classes {
            self.stats.transfer(class, &self.pending);
        }
        self.total.merge(&self.pending);
        self.pending = SessionTransfer::default();
        self.last_flush_ns = self.epoch.elapsed().as_nanos() as u64;
    }
}
