//! The relay for transaction and statement pooling. As in session pooling
//! the two directions run concurrently on reused buffers; here each
//! direction also looks at every message header, so that the pooler knows
//! whom each reply belongs to ([`Replies`]) and can return the backend the
//! moment the server is idle with nothing owed.
//!
//! Messages pass in runs: a chunk that needs no change is written from the
//! read buffer as it is; only a chunk with a rewritten, added or answered
//! message is copied into an output buffer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

use super::rewrite::{Outcome, Rewriter, Shared};
use crate::backend::{read_replies, Backend, ParamSet, TxStatus, MAX_INSPECTED};
use crate::client::relay::{is_fatal, Meter, Progress, RelayEnd, FRONTEND_TAGS};
use crate::protocol::scan::{Scanner, Step};
use crate::protocol::{FrameBuf, Violation};
use crate::stream::{fill, ReadError, ReadHalf, WriteHalf};

/// Largest client message read whole to be rewritten or classified.
pub const WHOLE_CAP: usize = 1 << 20;

/// How the relay should behave.
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// Return as soon as the backend is idle (false: the client is pinned).
    pub release_at_idle: bool,
    /// Statement pooling: a transaction block is refused.
    pub statement: bool,
    /// Close a client that sits idle inside a transaction this long.
    pub idle_tx_timeout: Option<Duration>,
}

/// How a relay over one backend ended.
#[derive(Debug)]
pub enum TxnEnd {
    /// The backend is idle and owes nothing: give it back.
    Idle,
    /// The client or server ended (or the relay must end) as in session pooling.
    Ended(RelayEnd),
}

/// Where a relay left the backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct Left {
    /// At message boundaries in both directions with nothing owed.
    pub clean: bool,
    /// The backend must be closed rather than pooled.
    pub discard: bool,
    /// Why the client must keep this backend, if it must.
    pub pin: Option<super::rewrite::Pin>,
}

/// Flags the directions share besides the [`Shared`] state.
struct Flags {
    /// The up direction is in the middle of a write to the server.
    writing: AtomicBool,
    /// The client is in the middle of a message part of which went out.
    client_mid: AtomicBool,
    /// Synthetic replies were queued: the down direction must send them.
    due: Notify,
    /// The server went idle inside a transaction: the client's clock starts.
    idle_in_tx: Notify,
}

/// Relays one client over one backend until the backend can be given back
/// or the session ends.
#[allow(clippy::too_many_arguments)]
pub async fn relay(
    (cr, cw): (&mut ReadHalf<'_>, &mut WriteHalf<'_>),
    cbuf: &mut FrameBuf,
    cscan: &mut Scanner,
    backend: &mut Backend,
    rewriter: &mut Rewriter<'_>,
    client_params: &mut Arc<ParamSet>,
    meter: &mut Meter<'_>,
    mode: Mode,
) -> (TxnEnd, Left) {
    let Backend {
        stream,
        buf: bbuf,
        scanner: bscan,
        params,
        tx,
        pending_replies,
        queued,
        prepared,
        ..
    } = backend;
    let shared = Mutex::new(Shared::new(prepared));
    let flags = Flags {
        writing: AtomicBool::new(false),
        client_mid: AtomicBool::new(!cscan.at_boundary()),
        due: Notify::new(),
        idle_in_tx: Notify::new(),
    };
    let progress = Progress::new();
    let (mut br, mut bw) = stream.split();
    let end = {
        let up = Up {
            shared: &shared,
            flags: &flags,
            progress: &progress,
            rewriter,
            mode,
        }
        .run(cr, &mut bw, cbuf, cscan, queued);
        let down = Down {
            shared: &shared,
            flags: &flags,
            progress: &progress,
            mode,
        }
        .run(
            &mut br,
            cw,
            (bbuf, bscan),
            (params, client_params, tx),
            pending_replies,
            meter,
        );
        // Up first: it forwards what the client already sent before down
        // can decide the backend is idle.
        tokio::select! {
            biased;
            end = up => TxnEnd::Ended(end),
            end = down => end,
        }
    };
    meter.flush(Some(&progress.bytes_in));
    let mut s = match shared.into_inner() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    // Names whose Parse failed in this relay's last replies: forget them now,
    // the next relay starts with fresh shared state.
    rewriter.forget_undefined(&mut s);
    let clean = s.replies.is_empty()
        && s.unsynced == 0
        && cscan.at_boundary()
        && bscan.at_boundary()
        && bbuf.is_empty()
        && *pending_replies == 0
        && !flags.writing.load(Ordering::Relaxed);
    let left = Left {
        clean,
        discard: s.discard,
        pin: s.pin,
    };
    (end, left)
}

struct Up<'s, 'b, 'r, 'x> {
    shared: &'s Mutex<Shared<'b>>,
    flags: &'s Flags,
    progress: &'s Progress,
    rewriter: &'r mut Rewriter<'x>,
    mode: Mode,
}

impl Up<'_, '_, '_, '_> {
    async fn run(
        mut self,
        cr: &mut ReadHalf<'_>,
        bw: &mut WriteHalf<'_>,
        buf: &mut FrameBuf,
        scan: &mut Scanner,
        queued: &mut bytes::BytesMut,
    ) -> RelayEnd {
        let mut out: Vec<u8> = Vec::new();
        let mut rep: Vec<u8> = Vec::new();
        loop {
            let chunk = self.scan_chunk(buf, scan, &mut out, &mut rep);
            let (pos, modified, stop) = match chunk {
                Ok(c) => c,
                Err(v) => return RelayEnd::ClientViolation(v),
            };
            if pos > 0 || !queued.is_empty() || modified {
                let data: &[u8] = if modified {
                    &out
                } else {
                    &buf.readable()[..pos]
                };
                self.flags.writing.store(true, Ordering::Relaxed);
                let written = if queued.is_empty() {
                    bw.write_all(data).await
                } else {
                    // Parameter SETs the pooler queued ride with the client's first bytes.
                    queued.extend_from_slice(data);
                    let all = std::mem::take(queued);
                    bw.write_all(&all).await
                };
                self.flags.writing.store(false, Ordering::Relaxed);
                if let Err(e) = written {
                    return RelayEnd::BackendGone(format!("write to server failed: {e}"));
                }
                self.progress.mark_start();
                self.progress
                    .bytes_in
                    .fetch_add(pos as u64, Ordering::Relaxed);
                buf.consume(pos);
                out.clear();
            }
            // Part of a message buffered (or sent) ties the client to this
            // backend until the rest comes.
            self.flags
                .client_mid
                .store(!scan.at_boundary() || !buf.is_empty(), Ordering::Relaxed);
            if self.reply_due() {
                // Nothing from the server will come first: down must send it.
                self.flags.due.notify_one();
            }
            if let Some(end) = stop {
                return end;
            }
            let result = match self.mode.idle_tx_timeout {
                None => fill(cr, buf).await,
                Some(_) => match self.read_watching_idle_tx(cr, buf).await {
                    Some(r) => r,
                    None => return RelayEnd::IdleInTransaction,
                },
            };
            match result {
                Ok(_) => {}
                Err(ReadError::Violation(v)) => return RelayEnd::ClientViolation(v),
                Err(_) => return RelayEnd::ClientGone,
            }
        }
    }

    /// True when a reply the pooler owes is at the head of the queue.
    fn reply_due(&self) -> bool {
        self.shared.lock().is_ok_and(|s| s.replies.synthetic_due())
    }

    /// Reads from the client; `None` if it then sits idle inside a
    /// transaction for the limit. The limit starts when the server's
    /// ReadyForQuery says "in transaction" with nothing owed, which may come
    /// while the read is already waiting.
    async fn read_watching_idle_tx(
        &self,
        cr: &mut ReadHalf<'_>,
        buf: &mut FrameBuf,
    ) -> Option<Result<usize, ReadError>> {
        let read = fill(cr, buf);
        tokio::pin!(read);
        loop {
            let became_idle = self.flags.idle_in_tx.notified();
            tokio::pin!(became_idle);
            became_idle.as_mut().enable();
            match self.idle_tx_limit() {
                Some(limit) => {
                    return tokio::time::timeout(limit, &mut read).await.ok();
                }
                None => tokio::select! {
                    r = &mut read => return Some(r),
                    _ = &mut became_idle => {}
                },
            }
        }
    }

    /// The idle-in-transaction limit if it applies now (a transaction is
    /// open and nothing is owed, so the server waits on the client).
    fn idle_tx_limit(&self) -> Option<Duration> {
        let limit = self.mode.idle_tx_timeout?;
        let s = self.shared.lock().ok()?;
        (s.replies.is_empty() && s.in_transaction).then_some(limit)
    }

    /// Walks the buffered client bytes. Returns how far it got, whether the
    /// bytes to send were copied into `out` (otherwise they are
    /// `buf[..pos]` as read), and why the relay must stop, if it must.
    fn scan_chunk(
        &mut self,
        buf: &mut FrameBuf,
        scan: &mut Scanner,
        out: &mut Vec<u8>,
        rep: &mut Vec<u8>,
    ) -> Result<(usize, bool, Option<RelayEnd>), Violation> {
        let inspect = |t| matches!(t, b'Q' | b'P' | b'B' | b'D' | b'C' | b'X');
        let mut pos = 0;
        // Start of the bytes that pass unchanged and are not yet in `out`.
        let mut run = 0;
        let mut modified = false;
        let mut stop = None;
        let mut shared = self.shared.lock().map_err(|_| Violation::new("poisoned"))?;
        self.rewriter.forget_undefined(&mut shared);
        loop {
            let data = buf.readable();
            let step = scan.step_capped(data, pos, inspect, WHOLE_CAP)?;
            let (tag, start, end, whole) = match step {
                Step::NeedMore => {
                    if let Some(total) = Scanner::peek_total(data, pos) {
                        if inspect(data[pos]) && total <= WHOLE_CAP {
                            drop(shared);
                            buf.ensure_room_up_to(total, WHOLE_CAP)?;
                            return Ok(finish(buf, out, run, pos, modified, stop));
                        }
                    }
                    break;
                }
                Step::Continuation { end } => {
                    pos = end;
                    continue;
                }
                Step::Whole { tag, start, end } => (tag, start, end, true),
                Step::Header { tag, start, end } => {
                    let total = Scanner::peek_total(data, start).unwrap_or(0);
                    (tag, start, end, end - start == total)
                }
            };
            if !FRONTEND_TAGS.contains(&tag) {
                return Err(Violation::new(format!(
                    "invalid frontend message type {tag}"
                )));
            }
            if tag == b'X' {
                pos = start;
                stop = Some(RelayEnd::Terminated);
                break;
            }
            if tag == b'P' && !whole {
                return Err(Violation::new(format!(
                    "Parse message larger than {WHOLE_CAP} bytes is not supported in transaction pooling"
                )));
            }
            rep.clear();
            let outcome = self
                .rewriter
                .message(&data[start..end], whole, &mut shared, rep)?;
            if outcome != Outcome::Forward || !rep.is_empty() {
                out.extend_from_slice(&data[run..start]);
                out.extend_from_slice(rep);
                modified = true;
                run = match outcome {
                    Outcome::Forward => start,
                    Outcome::Replaced { consumed } => start + consumed,
                    Outcome::Swallowed => end,
                };
            }
            pos = end;
        }
        drop(shared);
        Ok(finish(buf, out, run, pos, modified, stop))
    }
}

/// Completes `out` with the last unchanged run when the chunk was modified.
fn finish(
    buf: &FrameBuf,
    out: &mut Vec<u8>,
    run: usize,
    pos: usize,
    modified: bool,
    stop: Option<RelayEnd>,
) -> (usize, bool, Option<RelayEnd>) {
    if modified && run < pos {
        out.extend_from_slice(&buf.readable()[run..pos]);
    }
    (pos, modified, stop)
}

struct Down<'s, 'b> {
    shared: &'s Mutex<Shared<'b>>,
    flags: &'s Flags,
    progress: &'s Progress,
    mode: Mode,
}

impl Down<'_, '_> {
    async fn run(
        self,
        br: &mut ReadHalf<'_>,
        cw: &mut WriteHalf<'_>,
        (buf, scan): (&mut FrameBuf, &mut Scanner),
        (params, client_params, tx): (&mut ParamSet, &mut Arc<ParamSet>, &mut TxStatus),
        pending_replies: &mut usize,
        meter: &mut Meter<'_>,
    ) -> TxnEnd {
        // Replies to the pooler's own SETs come first and are not the client's.
        if *pending_replies > 0 {
            match read_replies(br, buf, params, tx, pending_replies).await {
                Ok(None) => {}
                Ok(Some(e)) => tracing::warn!(error = %e, "pooler statement failed"),
                Err(e) => return TxnEnd::Ended(RelayEnd::BackendGone(e.to_string())),
            }
        }
        let mut out: Vec<u8> = Vec::new();
        let mut fatal = false;
        // One registration for the whole relay, renewed only when it fires.
        let due = self.flags.due.notified();
        tokio::pin!(due);
        loop {
            if let Some(end) = self.check_idle(buf, scan, *tx) {
                return end;
            }
            let chunk =
                self.scan_chunk(buf, scan, &mut out, (params, client_params, tx), &mut fatal);
            let (pos, modified, exchange_done) = match chunk {
                Ok(c) => c,
                Err(why) => return TxnEnd::Ended(RelayEnd::BackendGone(why)),
            };
            if pos > 0 || modified {
                let data: &[u8] = if modified {
                    &out
                } else {
                    &buf.readable()[..pos]
                };
                if cw.write_all(data).await.is_err() {
                    return TxnEnd::Ended(RelayEnd::ClientGone);
                }
                meter.sent_to_client(pos as u64);
                buf.consume(pos);
                out.clear();
                if exchange_done {
                    meter.exchange_done(self.progress);
                }
                continue;
            }
            tokio::select! {
                r = fill(br, buf) => {
                    if let Err(e) = r {
                        if fatal {
                            return TxnEnd::Ended(RelayEnd::BackendFatal);
                        }
                        return TxnEnd::Ended(RelayEnd::BackendGone(e.to_string()));
                    }
                }
                _ = &mut due => due.set(self.flags.due.notified()),
            }
        }
    }

    /// The end of this relay if the backend can be given back now (or a
    /// statement-mode client opened a transaction).
    fn check_idle(&self, buf: &FrameBuf, scan: &Scanner, tx: TxStatus) -> Option<TxnEnd> {
        let s = self.shared.lock().ok()?;
        if !s.replies.is_empty() || s.unsynced != 0 || !buf.is_empty() || !scan.at_boundary() {
            return None;
        }
        if self.flags.writing.load(Ordering::Relaxed)
            || self.flags.client_mid.load(Ordering::Relaxed)
        {
            return None;
        }
        if tx != TxStatus::Idle {
            return self
                .mode
                .statement
                .then_some(TxnEnd::Ended(RelayEnd::TransactionInStatementMode));
        }
        (self.mode.release_at_idle && s.pin.is_none()).then_some(TxnEnd::Idle)
    }

    /// Walks the buffered server bytes; see [`Up::scan_chunk`].
    fn scan_chunk(
        &self,
        buf: &mut FrameBuf,
        scan: &mut Scanner,
        out: &mut Vec<u8>,
        (params, client_params, tx): (&mut ParamSet, &mut Arc<ParamSet>, &mut TxStatus),
        fatal: &mut bool,
    ) -> Result<(usize, bool, bool), String> {
        let inspect = |t| matches!(t, b'Z' | b'S' | b'E' | b'1' | b'3');
        let mut exchange_done = false;
        let mut s = self.shared.lock().map_err(|_| "poisoned".to_string())?;
        let mut due: Vec<u8> = Vec::new();
        let mut pos = 0;
        let mut run = 0;
        let mut modified = false;
        s.replies.take_due(&mut due);
        if !due.is_empty() {
            put_synthetic(out, &due, &mut s.owed_errors);
            due.clear();
            modified = true;
        }
        loop {
            let data = buf.readable();
            let step = scan
                .step(data, pos, inspect, MAX_INSPECTED)
                .map_err(|v| format!("server sent garbage: {v}"))?;
            let (tag, start, end, whole) = match step {
                Step::NeedMore => break,
                Step::Continuation { end } => {
                    pos = end;
                    continue;
                }
                Step::Whole { tag, start, end } => (tag, start, end, true),
                Step::Header { tag, start, end } => (tag, start, end, false),
            };
            s.replies.take_due(&mut due);
            if !due.is_empty() {
                out.extend_from_slice(&data[run..start]);
                put_synthetic(out, &due, &mut s.owed_errors);
                due.clear();
                run = start;
                modified = true;
            }
            let mut fixes = std::mem::take(&mut s.fixes);
            let disposition = s.replies.on_server(tag, &mut fixes);
            s.fixes = fixes;
            s.apply_fixes();
            let Some(disposition) = disposition else {
                return Err(format!(
                    "unexpected message type \"{}\" from server",
                    tag.escape_ascii()
                ));
            };
            if whole {
                let body = &data[start + 5..end];
                match tag {
                    b'Z' => {
                        let status = match body {
                            [b] => TxStatus::from_byte(*b),
                            _ => None,
                        };
                        *tx = status.ok_or("invalid ReadyForQuery")?;
                        s.in_transaction = *tx != TxStatus::Idle;
                        if s.in_transaction && s.replies.is_empty() {
                            self.flags.idle_in_tx.notify_waiters();
                        }
                        if s.replies.is_empty() {
                            // Every Parse sent so far is answered, every
                            // owed error sent or skipped.
                            s.defined.clear();
                            s.owed_errors.clear();
                            s.cache_doubt = false;
                            exchange_done = true;
                        }
                    }
                    b'S' => {
                        params.apply_status(body);
                        Arc::make_mut(client_params).apply_status(body);
                    }
                    b'E' => {
                        *fatal |= is_fatal(body);
                        if s.cache_doubt {
                            s.discard = true;
                        }
                    }
                    _ => {}
                }
            }
            // A statement-mode client that opened a transaction block gets
            // the FATAL, not a ReadyForQuery that says the BEGIN worked.
            let refused_tx = self.mode.statement && tag == b'Z' && *tx != TxStatus::Idle;
            if disposition == super::expect::Disposition::Drop || refused_tx {
                if !whole {
                    return Err("oversized reply to a pooler message".into());
                }
                out.extend_from_slice(&data[run..start]);
                run = end;
                modified = true;
            }
            pos = end;
        }
        s.replies.take_due(&mut due);
        if !due.is_empty() {
            out.extend_from_slice(&buf.readable()[run..pos]);
            put_synthetic(out, &due, &mut s.owed_errors);
            run = pos;
            modified = true;
        }
        drop(s);
        if modified && run < pos {
            out.extend_from_slice(&buf.readable()[run..pos]);
        }
        Ok((pos, modified, exchange_done))
    }
}

/// Writes the pooler's own ParseComplete/CloseComplete replies.
/// Writes the pooler's own ParseComplete/CloseComplete replies, and the
/// errors it owes (`E`, taken in order from `errors`).
fn put_synthetic(out: &mut Vec<u8>, tags: &[u8], errors: &mut VecDeque<Vec<u8>>) {
    for &t in tags {
        if t == b'E' {
            if let Some(e) = errors.pop_front() {
                out.extend_from_slice(&e);
            }
            continue;
        }
        out.push(t);
        out.extend_from_slice(&4u32.to_be_bytes());
    }
}
