//! The server → client direction of the transaction-pooling relay.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;

use super::{Flags, Mode, TxnEnd};
use crate::backend::{read_replies, ParamSet, TxStatus, MAX_INSPECTED};
use crate::client::relay::{is_fatal, Meter, Progress, RelayEnd};
use crate::client::txn::expect::Disposition;
use crate::client::txn::rewrite::Shared;
use crate::protocol::scan::{Scanner, Step};
use crate::protocol::FrameBuf;
use crate::stream::{fill, ReadHalf, WriteHalf};

pub(super) struct Down<'s, 'b> {
    pub(super) shared: &'s Mutex<Shared<'b>>,
    pub(super) flags: &'s Flags,
    pub(super) progress: &'s Progress,
    pub(super) mode: Mode,
}

impl Down<'_, '_> {
    pub(super) async fn run(
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
            if disposition == Disposition::Drop || refused_tx {
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
