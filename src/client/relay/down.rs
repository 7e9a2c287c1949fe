//! The server → client direction of the relay.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::{Flags, Meter, Progress, RelayEnd, Shared, TxnEnd};
use crate::backend::owed::Disposition;
use crate::backend::{BackendError, ParamSet, PoolerStatement, TxStatus, MAX_INSPECTED};
use crate::client::txn::rewrite::error_with_client_name;
use crate::protocol::messages::Fields;
use crate::protocol::scan::{Scanner, Step};
use crate::protocol::sql::Strings;
use crate::protocol::tags::{be, TagSet};
use crate::protocol::FrameBuf;
use crate::stream::{fill, ReadHalf, WriteHalf};

pub(super) struct Down<'s, 'b> {
    pub(super) shared: &'s Mutex<Shared<'b>>,
    pub(super) flags: &'s Flags,
    pub(super) progress: &'s Progress,
    pub(super) release_at_idle: bool,
    pub(super) statement: bool,
    /// The up direction may queue replies of the pooler's own (it rewrites):
    /// wait for those as well as for the server.
    pub(super) answers: bool,
    /// The pooler may send statements of its own in this relay.
    pub(super) own_statements: bool,
    /// Bound on the server's answer to each of the pooler's own statements.
    pub(super) command_timeout: Duration,
}

/// What one pass over the buffered server bytes found.
struct Chunk {
    pos: usize,
    modified: bool,
    exchange_done: bool,
    /// At the ReadyForQuery that ended the exchange: still in a transaction.
    in_tx: bool,
    /// ReadyForQuery messages relayed to the client, and how many said idle.
    answered: (u32, u32),
}

/// What the reply at the head of the books asks of the scan. It changes
/// only when a message is accounted, so it is read then, not per row.
#[derive(Clone, Copy)]
struct Head {
    /// The reply to a pooler message is read whole so it can be dropped.
    injected: bool,
    /// So is an error that may name a renamed statement (statements are
    /// renamed, and settings followed, only by the rewriter).
    named: bool,
    /// A ROLLBACK undoes followed settings: its tag must be read.
    following: bool,
    /// The messages that pass unaccounted (a followed setting's
    /// CommandComplete does not).
    passing: TagSet,
}

impl Head {
    fn of(s: &Shared<'_>, answers: bool) -> Self {
        let owed = s.ledger.owed();
        let following = answers && s.follow.pending();
        let passing = owed.passing();
        Head {
            injected: owed.head_is_injected(),
            named: answers && owed.head_statement().is_some(),
            following,
            passing: if following {
                passing.without(be::COMMAND_COMPLETE)
            } else {
                passing
            },
        }
    }

    /// Whether a message of type `t` must be read whole.
    fn inspects(self, t: u8) -> bool {
        self.injected
            || (self.named && t == be::ERROR_RESPONSE)
            || (self.following && t == be::COMMAND_COMPLETE)
            || matches!(t, be::READY_FOR_QUERY | be::PARAMETER_STATUS)
    }
}

impl Down<'_, '_> {
    pub(super) async fn run(
        self,
        br: &mut ReadHalf<'_>,
        cw: &mut WriteHalf<'_>,
        (buf, scan): (&mut FrameBuf, &mut Scanner),
        mut client_params: Option<&mut Arc<ParamSet>>,
        meter: &mut Meter<'_>,
    ) -> TxnEnd {
        let mut out: Vec<u8> = Vec::new();
        let mut fatal = false;
        // Since when the next reply owed is to one of the pooler's own messages.
        let mut own_since: Option<Instant> = None;
        // One registration for the whole relay, renewed only when it fires.
        let due = self.flags.due.notified();
        tokio::pin!(due);
        loop {
            if let Some(end) = self.check_idle(buf, scan) {
                return end;
            }
            // An empty buffer has nothing to scan, unless replies of the
            // pooler's own may be due.
            let chunk = if buf.is_empty() && !self.answers {
                Ok(Chunk {
                    pos: 0,
                    modified: false,
                    exchange_done: false,
                    in_tx: false,
                    answered: (0, 0),
                })
            } else {
                self.scan_chunk(
                    buf,
                    scan,
                    &mut out,
                    client_params.as_deref_mut(),
                    &mut fatal,
                )
            };
            let Chunk {
                pos,
                modified,
                exchange_done,
                in_tx,
                answered,
            } = match chunk {
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
                if answered.0 > 0 {
                    meter.answered(answered.0, answered.1);
                }
                if exchange_done {
                    meter.exchange_done(self.progress, in_tx);
                }
                continue;
            }
            let own = self.own_statement_deadline(&mut own_since);
            let read = match own {
                // The server is answering the pooler's own SET, Parse or
                // Close now, ahead of the client's messages: bounded, so a
                // server that stops answering does not hold the client.
                Some(at) => tokio::select! {
                    r = fill(br, buf) => r,
                    _ = &mut due => {
                        due.set(self.flags.due.notified());
                        continue;
                    }
                    _ = tokio::time::sleep_until(at) => {
                        let e = BackendError::CommandTimeout {
                            what: PoolerStatement::Prepared,
                            timeout: self.command_timeout,
                        };
                        return TxnEnd::Ended(RelayEnd::BackendGone(e.to_string()));
                    }
                },
                None if self.answers || self.flags.queued_unsent.load(Ordering::Relaxed) => {
                    tokio::select! {
                        r = fill(br, buf) => r,
                        _ = &mut due => {
                            due.set(self.flags.due.notified());
                            continue;
                        }
                    }
                }
                None => fill(br, buf).await,
            };
            if let Err(e) = read {
                if fatal {
                    return TxnEnd::Ended(RelayEnd::BackendFatal);
                }
                return TxnEnd::Ended(RelayEnd::BackendGone(e.to_string()));
            }
        }
    }

    /// When the wait for the reply to the pooler's own statement at the
    /// head of the queue must end, if one is at the head (its clock starts
    /// when it gets there: the server answers in order).
    fn own_statement_deadline(&self, since: &mut Option<Instant>) -> Option<Instant> {
        let injected = self.own_statements
            && !self.flags.queued_unsent.load(Ordering::Relaxed)
            && self
                .shared
                .lock()
                .is_ok_and(|s| s.ledger.owed().head_is_injected());
        if !injected {
            *since = None;
            return None;
        }
        let started = *since.get_or_insert_with(Instant::now);
        Some(started + self.command_timeout)
    }

    /// The end of this relay if the backend can be given back now (or a
    /// statement-mode client opened a transaction).
    #[inline]
    fn check_idle(&self, buf: &FrameBuf, scan: &Scanner) -> Option<TxnEnd> {
        if !self.release_at_idle && !self.statement {
            return None;
        }
        self.idle_end(buf, scan)
    }

    /// [`Down::check_idle`] for a relay that ends at idle.
    fn idle_end(&self, buf: &FrameBuf, scan: &Scanner) -> Option<TxnEnd> {
        let s = self.shared.lock().ok()?;
        let owed = s.ledger.owed();
        if !owed.is_empty() || owed.unsynced() != 0 || !buf.is_empty() || !scan.at_boundary() {
            return None;
        }
        if self.flags.writing.load(Ordering::Relaxed)
            || self.flags.client_mid.load(Ordering::Relaxed)
        {
            return None;
        }
        if s.ledger.tx() != TxStatus::Idle {
            return self
                .statement
                .then_some(TxnEnd::Ended(RelayEnd::TransactionInStatementMode));
        }
        (self.release_at_idle && s.pin.is_none()).then_some(TxnEnd::Idle)
    }

    /// Walks the buffered server bytes: accounts every message in the
    /// ledger, drops the replies to the pooler's own messages, and slips in
    /// the replies the pooler owes where they are due.
    fn scan_chunk(
        &self,
        buf: &mut FrameBuf,
        scan: &mut Scanner,
        out: &mut Vec<u8>,
        mut client_params: Option<&mut Arc<ParamSet>>,
        fatal: &mut bool,
    ) -> Result<Chunk, String> {
        let mut s = self.shared.lock().map_err(|_| "poisoned".to_string())?;
        let mut exchange_done = false;
        let mut exchange_in_tx = false;
        let mut answered = (0, 0);
        let mut pos = 0;
        let mut run = 0;
        let mut modified = false;
        let mut head = Head::of(&s, self.answers);
        loop {
            let data = buf.readable();
            // Replies the pooler owes go out where they are due, before the
            // next server message is even looked at: which reply that
            // message is (and so how it must be read) depends on them.
            if self.answers && scan.at_boundary() && s.ledger.owed().synthetic_due() {
                let Shared { ledger, fixes, .. } = &mut *s;
                out.extend_from_slice(&data[run..pos]);
                ledger.take_due(out, fixes);
                run = pos;
                modified = true;
                head = Head::of(&s, self.answers);
            }
            let Head { named, passing, .. } = head;
            // Nothing a passing message does changes what comes due or how
            // the next one reads, so a run of them (a result's description,
            // rows and tag, COPY data) is skipped on lengths alone rather
            // than stepped one by one.
            if scan.at_boundary() {
                pos = scan.skip_run(data, pos, passing);
            }
            let step = scan
                .step_capped(data, pos, |t| head.inspects(t), MAX_INSPECTED)
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
            // The head of a passing message not wholly here yet.
            if passing.contains(tag) {
                pos = end;
                continue;
            }
            let Shared { ledger, .. } = &mut *s;
            let body = &data[start + 5..end];
            // The server names the pooler's statement in some errors (a
            // Bind with the wrong parameter count): give the client's back.
            let mut renamed = None;
            let mut retire = None;
            if named && tag == be::ERROR_RESPONSE && whole {
                if let Some((id, name)) = ledger
                    .owed()
                    .head_statement()
                    .and_then(|serial| s.statements.named(serial))
                {
                    // `cached plan must not change result type`: after DDL
                    // the pooler's statement fails on every Bind; the
                    // client's re-prepare must get a fresh one, not the
                    // same again.
                    if Fields::new(body).sqlstate() == Some(&b"0A000"[..]) {
                        retire = Some(id);
                    }
                    renamed = error_with_client_name(body, id, name);
                }
            }
            s.retired.extend(retire);
            let Shared { ledger, fixes, .. } = &mut *s;
            let disposition = ledger.on_message(tag, whole.then_some(body), fixes)?;
            if let Some(msg) = &renamed {
                out.extend_from_slice(&data[run..start]);
                out.extend_from_slice(msg);
                run = end;
                modified = true;
            }
            if !s.fixes.is_empty() {
                s.apply_fixes();
            }
            match tag {
                be::READY_FOR_QUERY => {
                    let idle = s.ledger.owed().is_empty();
                    let in_tx = s.ledger.tx() != TxStatus::Idle;
                    let aborted = s.ledger.tx() == TxStatus::Failed;
                    s.follow.ready(in_tx, aborted, idle);
                    if in_tx && idle {
                        self.flags.idle_in_tx.notify_waiters();
                    }
                    if idle {
                        // Every Parse sent so far is answered.
                        s.defined.clear();
                        s.cache_doubt = false;
                        exchange_done = true;
                        exchange_in_tx = in_tx;
                        // So is every SET: the client's reports say how its SQL reads.
                        if s.strings == Strings::Unknown && client_params.is_some() {
                            s.strings =
                                super::client_strings(client_params.as_deref().map(|p| &**p));
                        }
                    }
                }
                be::PARAMETER_STATUS if whole => {
                    if let Some(p) = client_params.as_deref_mut() {
                        Arc::make_mut(p).apply_status(body);
                        // However it changed, the client's SQL reads as
                        // reported once nothing is owed.
                        if body.starts_with(b"standard_conforming_strings\0") {
                            s.strings = Strings::Unknown;
                        }
                    }
                }
                // The tag of a client's ROLLBACK, or of a COMMIT that rolled back.
                be::COMMAND_COMPLETE if whole && body.starts_with(b"ROLLBACK") => {
                    s.follow.failed();
                }
                be::ERROR_RESPONSE => {
                    // Severity comes first in PostgreSQL's errors, so the
                    // buffered head of even an oversized one tells.
                    *fatal |= Fields::new(body).is_fatal();
                    s.follow.failed();
                    if s.cache_doubt {
                        s.ledger.break_with(
                            "a DISCARD ALL or DEALLOCATE ALL failed: prepared statements unknown",
                        );
                    }
                }
                _ => {}
            }
            // A statement-mode client that opened a transaction block gets
            // the FATAL, not a ReadyForQuery that says the BEGIN worked.
            let refused_tx =
                self.statement && tag == be::READY_FOR_QUERY && s.ledger.tx() != TxStatus::Idle;
            if disposition == Disposition::Drop || refused_tx {
                if !whole {
                    return Err("oversized reply to a pooler message".into());
                }
                out.extend_from_slice(&data[run..start]);
                run = end;
                modified = true;
            } else if tag == be::READY_FOR_QUERY {
                // One client request answered; idle ends a transaction.
                answered.0 += 1;
                answered.1 += u32::from(s.ledger.tx() == TxStatus::Idle);
            }
            pos = end;
            head = Head::of(&s, self.answers);
        }
        let Shared { ledger, fixes, .. } = &mut *s;
        if self.answers && ledger.owed().synthetic_due() {
            out.extend_from_slice(&buf.readable()[run..pos]);
            ledger.take_due(out, fixes);
            run = pos;
            modified = true;
        }
        if !s.fixes.is_empty() {
            s.apply_fixes();
        }
        drop(s);
        if modified && run < pos {
            out.extend_from_slice(&buf.readable()[run..pos]);
        }
        Ok(Chunk {
            pos,
            modified,
            exchange_done,
            in_tx: exchange_in_tx,
            answered,
        })
    }
}
