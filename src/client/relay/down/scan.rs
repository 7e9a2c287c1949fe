//! The server → client scan of the relay: each buffered server message
//! accounted in the backend's books, the replies to the pooler's own
//! messages dropped, and the replies the pooler owes slipped in where due.

use std::sync::Arc;

use super::super::client_strings;
use super::{Down, Shared};
use crate::backend::owed::Disposition;
use crate::backend::{ParamSet, TxStatus, MAX_INSPECTED};
use crate::client::txn::rewrite::error_with_client_name;
use crate::protocol::messages::Fields;
use crate::protocol::scan::{Scanner, Step};
use crate::protocol::sql::Strings;
use crate::protocol::tags::{be, TagSet};
use crate::protocol::FrameBuf;

/// What one pass over the buffered server bytes found.
pub(super) struct Chunk {
    pub(super) pos: usize,
    pub(super) modified: bool,
    pub(super) exchange_done: bool,
    /// At the ReadyForQuery that ended the exchange: still in a transaction.
    pub(super) in_tx: bool,
    /// ReadyForQuery messages relayed to the client, and how many said idle.
    pub(super) answered: (u32, u32),
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

/// The bytes to send for a chunk: runs of the read buffer as read, with
/// what the pooler put in or took out between them. Nothing is copied
/// until something changes.
struct Splice<'o> {
    out: &'o mut Vec<u8>,
    /// Start of the bytes that pass unchanged and are not yet in `out`.
    run: usize,
    modified: bool,
}

impl Splice<'_> {
    /// Puts `with` in place of `data[start..end]` (nothing: drops it).
    #[inline]
    fn replace(&mut self, data: &[u8], (start, end): (usize, usize), with: &[u8]) {
        self.out.extend_from_slice(&data[self.run..start]);
        self.out.extend_from_slice(with);
        self.run = end;
        self.modified = true;
    }

    /// Puts what `put` writes at `at`.
    #[inline]
    fn insert(&mut self, data: &[u8], at: usize, put: impl FnOnce(&mut Vec<u8>)) {
        self.out.extend_from_slice(&data[self.run..at]);
        put(self.out);
        self.run = at;
        self.modified = true;
    }

    /// Completes `out` up to `pos`; whether it is to be sent instead of
    /// the buffer.
    fn finish(self, data: &[u8], pos: usize) -> bool {
        if self.modified && self.run < pos {
            self.out.extend_from_slice(&data[self.run..pos]);
        }
        self.modified
    }
}

impl Down<'_, '_> {
    /// Walks the buffered server bytes: accounts every message in the
    /// ledger, drops the replies to the pooler's own messages, and slips in
    /// the replies the pooler owes where they are due.
    pub(super) fn scan_chunk(
        &self,
        buf: &mut FrameBuf,
        scan: &mut Scanner,
        out: &mut Vec<u8>,
        mut client_params: Option<&mut Arc<ParamSet>>,
        fatal: &mut bool,
    ) -> Result<Chunk, String> {
        let mut s = self.shared.lock().map_err(|_| "poisoned".to_string())?;
        let mut chunk = Chunk {
            pos: 0,
            modified: false,
            exchange_done: false,
            in_tx: false,
            answered: (0, 0),
        };
        let mut splice = Splice {
            out,
            run: 0,
            modified: false,
        };
        let mut pos = 0;
        let mut head = Head::of(&s, self.answers);
        loop {
            let data = buf.readable();
            // Replies the pooler owes go out where they are due, before the
            // next server message is even looked at: which reply that
            // message is (and so how it must be read) depends on them.
            if self.answers && scan.at_boundary() && s.ledger.owed().synthetic_due() {
                let Shared { ledger, fixes, .. } = &mut *s;
                splice.insert(data, pos, |out| ledger.take_due(out, fixes));
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
            let body = &data[start + 5..end];
            let renamed = if named && tag == be::ERROR_RESPONSE && whole {
                renamed_error(&mut s, body)
            } else {
                None
            };
            let Shared { ledger, fixes, .. } = &mut *s;
            let disposition = ledger.on_message(tag, whole.then_some(body), fixes)?;
            if let Some(msg) = &renamed {
                splice.replace(data, (start, end), msg);
            }
            if !s.fixes.is_empty() {
                s.apply_fixes();
            }
            if let Some(in_tx) = self.note(
                &mut s,
                tag,
                (body, whole),
                client_params.as_deref_mut(),
                fatal,
            ) {
                chunk.exchange_done = true;
                chunk.in_tx = in_tx;
            }
            // A statement-mode client that opened a transaction block gets
            // the FATAL, not a ReadyForQuery that says the BEGIN worked.
            let refused_tx =
                self.statement && tag == be::READY_FOR_QUERY && s.ledger.tx() != TxStatus::Idle;
            if disposition == Disposition::Drop || refused_tx {
                if !whole {
                    return Err("oversized reply to a pooler message".into());
                }
                splice.replace(data, (start, end), &[]);
            } else if tag == be::READY_FOR_QUERY {
                // One client request answered; idle ends a transaction.
                chunk.answered.0 += 1;
                chunk.answered.1 += u32::from(s.ledger.tx() == TxStatus::Idle);
            }
            pos = end;
            head = Head::of(&s, self.answers);
        }
        let data = buf.readable();
        let Shared { ledger, fixes, .. } = &mut *s;
        if self.answers && ledger.owed().synthetic_due() {
            splice.insert(data, pos, |out| ledger.take_due(out, fixes));
        }
        if !s.fixes.is_empty() {
            s.apply_fixes();
        }
        drop(s);
        chunk.pos = pos;
        chunk.modified = splice.finish(data, pos);
        Ok(chunk)
    }

    /// What the relay learns from a server message just accounted (`body`
    /// as buffered, and whether that is all of it): the client's
    /// parameters, how its SQL reads, what became of its followed
    /// settings. At a ReadyForQuery that leaves nothing owed, the
    /// exchange is over: returns whether a transaction is still open.
    #[inline]
    fn note(
        &self,
        s: &mut Shared<'_>,
        tag: u8,
        (body, whole): (&[u8], bool),
        client_params: Option<&mut Arc<ParamSet>>,
        fatal: &mut bool,
    ) -> Option<bool> {
        match tag {
            be::READY_FOR_QUERY => {
                let idle = s.ledger.owed().is_empty();
                let in_tx = s.ledger.tx() != TxStatus::Idle;
                let aborted = s.ledger.tx() == TxStatus::Failed;
                s.follow.ready(in_tx, aborted, idle);
                if let Some(became_idle) = self.flags.idle_in_tx.as_ref().filter(|_| in_tx && idle)
                {
                    became_idle.notify_waiters();
                }
                if !idle {
                    return None;
                }
                // Every Parse sent so far is answered.
                s.defined.clear();
                s.cache_doubt = false;
                // So is every SET: the client's reports say how its SQL reads.
                if s.strings == Strings::Unknown {
                    if let Some(p) = client_params {
                        s.strings = client_strings(Some(&**p));
                    }
                }
                return Some(in_tx);
            }
            be::PARAMETER_STATUS if whole => {
                if let Some(p) = client_params {
                    ParamSet::apply_status(p, body);
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
        None
    }
}

/// The server names the pooler's statement in some errors (a Bind with the
/// wrong parameter count): the error with the client's name given back, if
/// the reply due is to a client message naming a renamed statement.
fn renamed_error(s: &mut Shared<'_>, body: &[u8]) -> Option<Vec<u8>> {
    let serial = s.ledger.owed().head_statement()?;
    let (id, name) = s.statements.named(serial)?;
    // `cached plan must not change result type`: after DDL the pooler's
    // statement fails on every Bind; the client's re-prepare must get a
    // fresh one, not the same again.
    if Fields::new(body).sqlstate() == Some(&b"0A000"[..]) {
        s.retired.push(id);
    }
    error_with_client_name(body, id, name)
}
