//! The client → server direction of the relay.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

use super::{account_plain, Flags, Progress, RelayEnd, Shared, PREFIX_CAP, WHOLE_CAP};
use crate::backend::TxStatus;
use crate::client::txn::rewrite::{Outcome, Rewriter};
use crate::protocol::scan::{Scanner, Step};
use crate::protocol::tags::fe;
use crate::protocol::{FrameBuf, Violation};
use crate::stream::{fill, ReadError, ReadHalf, WriteHalf};

pub(super) struct Up<'s, 'b, 'r, 'x> {
    pub(super) shared: &'s Mutex<Shared<'b>>,
    pub(super) flags: &'s Flags,
    pub(super) progress: &'s Progress,
    pub(super) rewriter: Option<&'r mut Rewriter<'x>>,
    pub(super) idle_tx_timeout: Option<Duration>,
    /// The continuation of a message the rewriter swallowed is dropped too.
    pub(super) dropping: bool,
    /// When the pooler's queued statements go out.
    pub(super) queue_send: QueueSend,
}

/// When the statements the pooler queued go to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum QueueSend {
    /// With the client's first bytes: a session client that leaves without
    /// a word never costs the server them (the backend takes them back,
    /// see `Link::withdraw_unsent`).
    WithClient,
    /// At once: in transaction pooling their ReadyForQuery gives the
    /// backend back, so a client that logs in and idles does not hold it.
    AtOnce,
}

/// The message types the rewriter must see whole (or, past [`WHOLE_CAP`],
/// at least their first [`PREFIX_CAP`] bytes).
fn rewritten(tag: u8) -> bool {
    matches!(
        tag,
        fe::QUERY | fe::PARSE | fe::BIND | fe::DESCRIBE | fe::CLOSE | fe::TERMINATE
    )
}

/// A client message PostgreSQL refuses by its first byte, before any length.
fn check_tag(tag: u8) -> Result<(), Violation> {
    if fe::valid_after_login(tag) {
        Ok(())
    } else {
        Err(Violation::new(format!(
            "invalid frontend message type {tag}"
        )))
    }
}

impl Up<'_, '_, '_, '_> {
    pub(super) async fn run(
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
            let Chunk {
                pos,
                modified,
                stop,
                reply_due,
            } = match chunk {
                Ok(c) => c,
                Err(v) => return RelayEnd::ClientViolation(v),
            };
            let queue_now = self.queue_send == QueueSend::AtOnce && !queued.is_empty();
            if pos > 0 || modified || queue_now {
                let data: &[u8] = if modified {
                    &out
                } else {
                    &buf.readable()[..pos]
                };
                self.flags.writing.store(true, Ordering::Relaxed);
                let written = if queued.is_empty() {
                    bw.write_all(data).await
                } else {
                    // Statements the pooler queued ride with the client's first bytes.
                    queued.extend_from_slice(data);
                    let all = std::mem::take(queued);
                    let written = bw.write_all(&all).await;
                    // Their answers are due now: down starts their clock.
                    self.flags.queued_unsent.store(false, Ordering::Relaxed);
                    self.flags.due.raise();
                    written
                };
                self.flags.writing.store(false, Ordering::Relaxed);
                if let Err(e) = written {
                    return RelayEnd::BackendGone(format!("write to server failed: {e}"));
                }
                // The pooler's own statements sent alone are no client
                // request: their answer must not count as a query.
                if pos > 0 || modified {
                    self.progress.mark_start();
                }
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
            if reply_due {
                // Nothing from the server will come first: down must send it.
                self.flags.due.raise();
            }
            if let Some(end) = stop {
                return end;
            }
            let result = match &self.flags.idle_in_tx {
                None => fill(cr, buf).await,
                Some(idle_in_tx) => match self.read_watching_idle_tx(cr, buf, idle_in_tx).await {
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

    /// Reads from the client; `None` if it then sits idle inside a
    /// transaction for the limit. The limit starts when the server's
    /// ReadyForQuery says "in transaction" with nothing owed, which may come
    /// while the read is already waiting.
    async fn read_watching_idle_tx(
        &self,
        cr: &mut ReadHalf<'_>,
        buf: &mut FrameBuf,
        idle_in_tx: &Notify,
    ) -> Option<Result<usize, ReadError>> {
        let read = fill(cr, buf);
        tokio::pin!(read);
        loop {
            let became_idle = idle_in_tx.notified();
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
        let limit = self.idle_tx_timeout?;
        let s = self.shared.lock().ok()?;
        (s.ledger.owed().is_empty() && s.ledger.tx() != TxStatus::Idle).then_some(limit)
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
    ) -> Result<Chunk, Violation> {
        let rewriting = self.rewriter.is_some();
        let inspect = |t| {
            if rewriting {
                rewritten(t)
            } else {
                t == fe::TERMINATE
            }
        };
        let mut pos = 0;
        // Start of the bytes that pass unchanged and are not yet in `out`.
        let mut run = 0;
        let mut modified = false;
        let mut stop = None;
        let mut shared = self.shared.lock().map_err(|_| Violation::new("poisoned"))?;
        if let Some(rw) = self.rewriter.as_deref_mut() {
            rw.forget_undefined(&mut shared);
        }
        loop {
            let data = buf.readable();
            if scan.at_boundary() {
                if let Some(&tag) = data.get(pos) {
                    check_tag(tag)?;
                }
                // A message the rewriter must see is read whole, or its
                // head at least, however the reads split it.
                if let Some(total) = Scanner::peek_total(data, pos) {
                    let need = if total <= WHOLE_CAP {
                        total
                    } else {
                        PREFIX_CAP
                    };
                    if inspect(data[pos]) && data.len() - pos < need {
                        let reply_due = shared.ledger.owed().synthetic_due();
                        drop(shared);
                        buf.ensure_room_up_to(pos + need, pos + WHOLE_CAP.max(need))?;
                        return Ok(finish(buf, out, (run, pos, modified), stop, reply_due));
                    }
                }
            }
            let step = scan.step_capped(data, pos, inspect, WHOLE_CAP)?;
            let (tag, start, end, whole) = match step {
                Step::NeedMore => break,
                Step::Continuation { end } => {
                    if self.dropping {
                        // The rest of a message the pooler answered itself.
                        out.extend_from_slice(&data[run..pos]);
                        run = end;
                        modified = true;
                        self.dropping = !scan.at_boundary();
                    }
                    pos = end;
                    continue;
                }
                Step::Whole { tag, start, end } => (tag, start, end, true),
                Step::Header { tag, start, end } => {
                    let total = Scanner::peek_total(data, start).unwrap_or(0);
                    (tag, start, end, end - start == total)
                }
            };
            if tag == fe::TERMINATE {
                pos = start;
                stop = Some(RelayEnd::Terminated);
                break;
            }
            let Some(rw) = self.rewriter.as_deref_mut() else {
                account_plain(tag, &mut shared);
                pos = end;
                continue;
            };
            rep.clear();
            let outcome = rw.message(&data[start..end], whole, &mut shared, rep)?;
            if outcome != Outcome::Forward || !rep.is_empty() {
                out.extend_from_slice(&data[run..start]);
                out.extend_from_slice(rep);
                modified = true;
                run = match outcome {
                    Outcome::Forward => start,
                    Outcome::Replaced { consumed } => start + consumed,
                    Outcome::Swallowed => {
                        // Only part of it is here: what follows goes too.
                        self.dropping = !scan.at_boundary();
                        end
                    }
                };
            }
            pos = end;
        }
        let reply_due = shared.ledger.owed().synthetic_due();
        drop(shared);
        Ok(finish(buf, out, (run, pos, modified), stop, reply_due))
    }
}

/// What one pass over the buffered client bytes found.
struct Chunk {
    /// How far the bytes were walked.
    pos: usize,
    /// The bytes to send were copied into `out` (else they are `buf[..pos]`).
    modified: bool,
    /// Why the relay must stop, if it must.
    stop: Option<RelayEnd>,
    /// A reply the pooler owes is at the head of the queue.
    reply_due: bool,
}

/// Completes `out` with the last unchanged run when the chunk was modified.
fn finish(
    buf: &FrameBuf,
    out: &mut Vec<u8>,
    (run, pos, modified): (usize, usize, bool),
    stop: Option<RelayEnd>,
    reply_due: bool,
) -> Chunk {
    if modified && run < pos {
        out.extend_from_slice(&buf.readable()[run..pos]);
    }
    Chunk {
        pos,
        modified,
        stop,
        reply_due,
    }
}
