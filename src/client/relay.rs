//! Moving bytes between a client and its backend, both directions at once.
//!
//! Each direction reads a large chunk into a reused buffer, lets the
//! [`Scanner`] walk the message headers in place, and forwards the chunk in
//! one write. Only a handful of messages are looked into: Terminate from the
//! client, and ReadyForQuery/ParameterStatus from the server. Running the two
//! directions concurrently (rather than one `select!` that writes inline)
//! keeps a server that streams results while the client streams input from
//! deadlocking against the pooler.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use crate::backend::{read_replies, Backend, ParamSet, TxStatus, MAX_INSPECTED};
use crate::protocol::frontend::split_cstr;
use crate::protocol::scan::{Scanner, Step};
use crate::protocol::{FrameBuf, Violation};
use crate::stats::{Class, SessionTransfer, Stats, FLUSH_INTERVAL};
use crate::stream::{fill, ReadError, ReadHalf, WriteHalf};

/// Frontend message types valid after login.
pub(super) const FRONTEND_TAGS: &[u8] = b"BCdcfDEHFPQSX";

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

/// Counters the two directions share (uncontended atomics: both directions
/// run in one task) to tell whether the backend is idle and when an exchange
/// started.
pub(super) struct Progress {
    /// Query, Sync and FunctionCall messages forwarded (each earns a ReadyForQuery).
    requests: AtomicU64,
    /// ReadyForQuery messages seen.
    ready: AtomicU64,
    /// Extended-protocol messages forwarded since the last Sync.
    unsynced: AtomicU64,
    /// Bytes client → server not yet handed to the meter.
    pub(super) bytes_in: AtomicU64,
    /// When the exchange in flight began, in ns after `epoch` plus one (0: none).
    exchange_start: AtomicU64,
    epoch: Instant,
}

impl Progress {
    pub(super) fn new() -> Self {
        Progress {
            requests: AtomicU64::new(0),
            ready: AtomicU64::new(0),
            unsynced: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            exchange_start: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    pub(super) fn mark_start(&self) {
        if self.exchange_start.load(Ordering::Relaxed) == 0 {
            let ns = self.epoch.elapsed().as_nanos() as u64 + 1;
            self.exchange_start.store(ns, Ordering::Relaxed);
        }
    }

    /// Ends the exchange in flight; its duration, if one had started.
    fn take_exchange(&self) -> Option<Duration> {
        match self.exchange_start.swap(0, Ordering::Relaxed) {
            0 => None,
            start => Some(
                self.epoch
                    .elapsed()
                    .saturating_sub(Duration::from_nanos(start - 1)),
            ),
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
    last_flush: Instant,
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
            last_flush: Instant::now(),
            total: SessionTransfer::default(),
        }
    }

    pub(super) fn exchange_done(&mut self, progress: &Progress) {
        if let Some(busy) = progress.take_exchange() {
            self.pending.exchange(self.exchange_bytes, busy);
        }
        self.exchange_bytes = 0;
        if self.last_flush.elapsed() >= FLUSH_INTERVAL {
            // Bytes in must go with bytes out, or a long session's rate
            // would show only one direction until it ends.
            self.flush(Some(&progress.bytes_in));
        }
    }

    /// Counts bytes relayed to the client.
    pub(super) fn sent_to_client(&mut self, n: u64) {
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
        self.last_flush = Instant::now();
    }
}

/// Relays until one side ends. Returns how it ended and whether the backend
/// is at a clean message boundary with nothing outstanding.
pub async fn relay(
    client: (&mut ReadHalf<'_>, &mut WriteHalf<'_>),
    cbuf: &mut FrameBuf,
    cscan: &mut Scanner,
    backend: &mut Backend,
    meter: &mut Meter<'_>,
) -> (RelayEnd, bool) {
    let progress = Progress::new();
    let (cr, cw) = client;
    let Backend {
        stream,
        buf: bbuf,
        scanner: bscan,
        params,
        tx,
        pending_replies,
        queued,
        ..
    } = backend;
    let (mut br, mut bw) = stream.split();
    let end = {
        let up = client_to_server(cr, &mut bw, cbuf, cscan, &progress, queued);
        let down = server_to_client(
            &mut br,
            cw,
            (bbuf, bscan),
            (params, tx),
            &progress,
            pending_replies,
            meter,
        );
        tokio::select! {
            end = up => end,
            end = down => end,
        }
    };
    meter.flush(Some(&progress.bytes_in));
    let idle = cscan.at_boundary()
        && bscan.at_boundary()
        && bbuf.is_empty()
        && progress.unsynced.load(Ordering::Relaxed) == 0
        && progress.requests.load(Ordering::Relaxed) == progress.ready.load(Ordering::Relaxed);
    (end, idle)
}

async fn client_to_server(
    cr: &mut ReadHalf<'_>,
    bw: &mut WriteHalf<'_>,
    buf: &mut FrameBuf,
    scan: &mut Scanner,
    progress: &Progress,
    queued: &mut BytesMut,
) -> RelayEnd {
    loop {
        let mut pos = 0;
        let mut stop = None;
        loop {
            let step = match scan.step(buf.readable(), pos, |t| t == b'X', 64) {
                Ok(s) => s,
                Err(v) => {
                    stop = Some(RelayEnd::ClientViolation(v));
                    break;
                }
            };
            match step {
                Step::NeedMore => break,
                Step::Continuation { end } => pos = end,
                Step::Whole { start, .. } => {
                    // Terminate: the backend stays open for the next client.
                    pos = start;
                    stop = Some(RelayEnd::Terminated);
                    break;
                }
                Step::Header { tag, start, end } => {
                    if !FRONTEND_TAGS.contains(&tag) {
                        pos = start;
                        stop = Some(RelayEnd::ClientViolation(Violation::new(format!(
                            "invalid frontend message type {tag}"
                        ))));
                        break;
                    }
                    match tag {
                        b'Q' | b'F' => {
                            progress.requests.fetch_add(1, Ordering::Relaxed);
                        }
                        b'S' => {
                            progress.unsynced.store(0, Ordering::Relaxed);
                            progress.requests.fetch_add(1, Ordering::Relaxed);
                        }
                        b'P' | b'B' | b'D' | b'E' | b'C' | b'H' => {
                            progress.unsynced.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {}
                    }
                    pos = end;
                }
            }
        }
        if pos > 0 {
            progress.mark_start();
            let written = if queued.is_empty() {
                bw.write_all(&buf.readable()[..pos]).await
            } else {
                // The pooler's queued statements ride with the client's first
                // message: one write, one wake-up of the server.
                queued.extend_from_slice(&buf.readable()[..pos]);
                let out = std::mem::take(queued);
                bw.write_all(&out).await
            };
            if let Err(e) = written {
                return RelayEnd::BackendGone(format!("write to server failed: {e}"));
            }
            progress.bytes_in.fetch_add(pos as u64, Ordering::Relaxed);
            buf.consume(pos);
        }
        if let Some(end) = stop {
            return end;
        }
        match fill(cr, buf).await {
            Ok(_) => {}
            Err(ReadError::Violation(v)) => return RelayEnd::ClientViolation(v),
            Err(_) => return RelayEnd::ClientGone,
        }
    }
}

async fn server_to_client(
    br: &mut ReadHalf<'_>,
    cw: &mut WriteHalf<'_>,
    (buf, scan): (&mut FrameBuf, &mut Scanner),
    (params, tx): (&mut ParamSet, &mut TxStatus),
    progress: &Progress,
    pending_replies: &mut usize,
    meter: &mut Meter<'_>,
) -> RelayEnd {
    // Replies to statements the pooler pipelined ahead of the client's first
    // message (a SET application_name) come first and are not the client's.
    if *pending_replies > 0 {
        match read_replies(br, buf, params, tx, pending_replies).await {
            Ok(None) => {}
            Ok(Some(e)) => tracing::warn!(error = %e, "pooler statement failed"),
            Err(e) => return RelayEnd::BackendGone(e.to_string()),
        }
    }
    let mut fatal = false;
    loop {
        let mut pos = 0;
        // Start of the bytes in this chunk not yet counted to an exchange.
        let mut counted = 0;
        loop {
            let step = match scan.step(
                buf.readable(),
                pos,
                |t| matches!(t, b'Z' | b'S' | b'E'),
                MAX_INSPECTED,
            ) {
                Ok(s) => s,
                Err(v) => return RelayEnd::BackendGone(format!("server sent garbage: {v}")),
            };
            match step {
                Step::NeedMore => break,
                Step::Continuation { end } | Step::Header { end, .. } => pos = end,
                Step::Whole { tag, start, end } => {
                    let body = &buf.readable()[start + 5..end];
                    if tag == b'Z' {
                        match body.first().copied().and_then(TxStatus::from_byte) {
                            Some(s) if body.len() == 1 => *tx = s,
                            _ => return RelayEnd::BackendGone("invalid ReadyForQuery".into()),
                        }
                        let ready = progress.ready.fetch_add(1, Ordering::Relaxed) + 1;
                        if ready == progress.requests.load(Ordering::Relaxed) {
                            // Everything asked has been answered: one exchange.
                            meter.exchange_bytes += (end - counted) as u64;
                            counted = end;
                            meter.exchange_done(progress);
                        }
                    } else if tag == b'S' {
                        params.apply_status(body);
                    } else if is_fatal(body) {
                        fatal = true;
                    }
                    pos = end;
                }
            }
        }
        if pos > 0 {
            if cw.write_all(&buf.readable()[..pos]).await.is_err() {
                return RelayEnd::ClientGone;
            }
            meter.exchange_bytes += (pos - counted) as u64;
            meter.pending.bytes_out += pos as u64;
            buf.consume(pos);
        }
        if let Err(e) = fill(br, buf).await {
            if fatal {
                return RelayEnd::BackendFatal;
            }
            return RelayEnd::BackendGone(e.to_string());
        }
    }
}

/// True for an ErrorResponse whose severity ends the session.
pub(super) fn is_fatal(mut body: &[u8]) -> bool {
    while let Some((&code, rest)) = body.split_first() {
        let Some((value, after)) = split_cstr(rest) else {
            return false;
        };
        if code == b'V' || code == b'S' {
            return value == b"FATAL" || value == b"PANIC";
        }
        body = after;
    }
    false
}
