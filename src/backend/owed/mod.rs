//! What a backend still owes for the messages sent to it, in order: the
//! replies of every client's messages and of the statements the pooler
//! sends itself (SET, RESET, ROLLBACK, the reset and check queries, its own
//! Parse and Close), plus the replies the pooler owes a client for messages
//! it answered itself. One queue per backend connection, kept across
//! clients, so whoever reads the server next knows whose reply it is.
//!
//! The rules follow PostgreSQL's message flow (src/backend/tcop/postgres.c):
//! each extended-query message gets one reply (Describe of a statement two),
//! an ErrorResponse makes the server skip everything up to the next Sync, a
//! simple Query or FunctionCall ends with ReadyForQuery, and during COPY IN
//! the server ignores Sync and Flush until CopyDone or CopyFail (libpq and
//! tokio-postgres send a Sync right after the Execute of a COPY, and another
//! after CopyDone).

mod kinds;

use std::collections::VecDeque;

pub use kinds::*;

use crate::protocol::tags::{be, TagSet};

/// What passes unaccounted while a client's simple Query is answered.
const QUERY_PASSES: TagSet = TagSet::of(&[
    be::DATA_ROW,
    be::ROW_DESCRIPTION,
    be::COPY_DATA,
    be::COPY_DONE,
    be::EMPTY_QUERY_RESPONSE,
    be::NOTICE_RESPONSE,
    be::NOTIFICATION_RESPONSE,
    be::COMMAND_COMPLETE,
]);

/// What passes unaccounted while a client's Execute is answered.
const EXECUTE_PASSES: TagSet = TagSet::of(&[
    be::DATA_ROW,
    be::COPY_DATA,
    be::COPY_DONE,
    be::NOTICE_RESPONSE,
    be::NOTIFICATION_RESPONSE,
]);

/// The queue of replies a backend owes.
#[derive(Debug, Default)]
pub struct Owed {
    queue: VecDeque<Expect>,
    /// An error was seen before the client's Sync was sent: the server
    /// skips everything it receives until then.
    skipping: bool,
    /// A COPY in progress, from its CopyIn/OutResponse to its CommandComplete or error.
    copy: Option<CopyDir>,
    /// Extended-protocol messages sent since the last Sync.
    unsynced: u32,
    /// The first error PostgreSQL raised for the pooler's own statements.
    pooler_error: Option<Box<[u8]>>,
    /// The simple Query at the head has had an ErrorResponse.
    query_failed: bool,
}

impl Owed {
    /// True when nothing is owed.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Replies owed.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Extended-protocol messages sent since the last Sync (an open batch).
    pub fn unsynced(&self) -> u32 {
        self.unsynced
    }

    /// The COPY in progress, if any.
    pub fn copy(&self) -> Option<CopyDir> {
        self.copy
    }

    /// The body of the first ErrorResponse to a pooler statement since the
    /// last call.
    pub fn take_pooler_error(&mut self) -> Option<Box<[u8]>> {
        self.pooler_error.take()
    }

    /// Notes a Flush: no reply, but the batch is open.
    pub fn flushed(&mut self) {
        self.unsynced += 1;
    }

    /// Records a message sent (or answered by the pooler). While the server
    /// skips to Sync, messages before the Sync get no reply: their cache
    /// bookkeeping is undone at once via `fixes`.
    pub fn push(&mut self, e: Expect, fixes: &mut Vec<CacheFix>) {
        match &e {
            Expect::CopyEnd => {
                if self.skipping {
                    return;
                }
            }
            Expect::CopyData => {
                // Outside COPY (nothing owed) the server ignores data, and
                // one marker stands for a whole run of CopyData.
                if self.skipping
                    || self.queue.is_empty()
                    || matches!(self.queue.back(), Some(Expect::CopyData))
                {
                    return;
                }
            }
            Expect::Client(Reply::Sync) | Expect::Injected(Reply::Sync) => {
                // A Sync the server reads during COPY IN is ignored; which
                // ones those were is settled when the COPY ends.
                self.unsynced = 0;
                self.skipping = false;
            }
            Expect::Client(r) | Expect::Injected(r) => {
                if r.is_extended() {
                    self.unsynced += 1;
                }
                if self.skipping {
                    undo(&e, fixes);
                    return;
                }
            }
            Expect::Owed(_) => {
                // Answered for a Parse or Close: part of the batch.
                self.unsynced += 1;
                if self.skipping {
                    undo(&e, fixes);
                    return;
                }
            }
        }
        self.queue.push_back(e);
        self.settle();
    }

    /// Which client statement (its serial) the next reply's client message
    /// named, if the pooler renamed it: the server's error text names the
    /// pooler's statement and must be given the client's name back.
    pub fn head_statement(&self) -> Option<u64> {
        match self.queue.front() {
            Some(Expect::Client(Reply::Bind { stmt } | Reply::Describe { stmt })) => *stmt,
            _ => None,
        }
    }

    /// The server messages that change nothing in the books and go to the
    /// client as the queue stands: rows, descriptions, notices and the like
    /// of a client's Execute or Query. The relay passes these without
    /// accounting each one ([`Owed::on_server`] would return
    /// [`Disposition::Forward`] and leave the queue as it is), and a run of
    /// them on lengths alone: they cannot change the set.
    #[inline]
    pub fn passing(&self) -> TagSet {
        match self.queue.front() {
            Some(Expect::Client(Reply::Query { .. })) if self.copy.is_none() => QUERY_PASSES,
            // A COPY's CommandComplete ends it: the Syncs it swallowed are settled then.
            Some(Expect::Client(Reply::Query { .. })) => QUERY_PASSES.without(be::COMMAND_COMPLETE),
            Some(Expect::Client(Reply::Execute)) => EXECUTE_PASSES,
            _ => TagSet::EMPTY,
        }
    }

    /// Whether a server message of type `tag` passes unaccounted now (see
    /// [`Owed::passing`]).
    pub fn passes(&self, tag: u8) -> bool {
        self.passing().contains(tag)
    }

    /// Empties the queue if it holds only the pooler's own simple Queries
    /// (statements that were queued and never sent); false otherwise.
    pub fn withdraw_injected(&mut self) -> bool {
        let only_own = self
            .queue
            .iter()
            .all(|e| matches!(e, Expect::Injected(Reply::Query { .. })));
        let withdrawable = only_own && !self.skipping && self.pooler_error.is_none();
        if withdrawable {
            self.queue.clear();
        }
        withdrawable
    }

    /// True when the next reply answers a message the pooler added.
    pub fn head_is_injected(&self) -> bool {
        matches!(self.queue.front(), Some(Expect::Injected(_)))
    }

    /// True when a reply the pooler owes is next in line.
    pub fn synthetic_due(&self) -> bool {
        matches!(self.queue.front(), Some(Expect::Owed(_)))
    }

    /// Pops the synthetic replies now at the head of the queue and writes
    /// them to `out`: they are due.
    pub fn take_due(&mut self, out: &mut Vec<u8>, fixes: &mut Vec<CacheFix>) {
        while let Some(Expect::Owed(_)) = self.queue.front() {
            if let Some(Expect::Owed(s)) = self.queue.pop_front() {
                match s {
                    Synthetic::CloseComplete => put_empty(out, be::CLOSE_COMPLETE),
                    Synthetic::ParseComplete { .. } => put_empty(out, be::PARSE_COMPLETE),
                    Synthetic::Error(e) => {
                        out.extend_from_slice(&e);
                        // As after the server's own errors: skip to Sync.
                        self.skip_to_sync(fixes);
                    }
                }
            }
            self.settle();
        }
    }

    /// Accounts for one server message of type `tag` (after
    /// [`Owed::take_due`]); `body` is its body when the caller has it whole
    /// (only an injected statement's ErrorResponse needs it).
    pub fn on_server(
        &mut self,
        tag: u8,
        body: Option<&[u8]>,
        fixes: &mut Vec<CacheFix>,
    ) -> Result<Disposition, Unexpected> {
        if be::is_async(tag) {
            // A notice or parameter report while the pooler's own statement
            // runs is that statement's (the client was shown its own value
            // already); a notification is always the client's.
            let pooler_statement = matches!(self.queue.front(), Some(Expect::Injected(_)));
            return Ok(match tag {
                be::NOTICE_RESPONSE | be::PARAMETER_STATUS if pooler_statement => Disposition::Drop,
                _ => Disposition::Forward,
            });
        }
        let Some(head) = self.queue.front() else {
            // A FATAL the server sends on its own (shutdown, termination).
            return match tag {
                be::ERROR_RESPONSE => Ok(Disposition::Forward),
                _ => Err(Unexpected(tag)),
            };
        };
        let (from_client, reply) = match head {
            Expect::Client(r) => (true, *r),
            Expect::Injected(r) => (false, *r),
            Expect::Owed(_) | Expect::CopyEnd | Expect::CopyData => return Err(Unexpected(tag)),
        };
        let own = if from_client {
            Disposition::Forward
        } else {
            Disposition::Drop
        };
        let done = match (reply, tag) {
            (
                Reply::Query { .. } | Reply::Execute,
                be::COPY_IN_RESPONSE | be::COPY_OUT_RESPONSE | be::COPY_BOTH_RESPONSE,
            ) => {
                self.copy_started(tag);
                false
            }
            (Reply::Query { .. } | Reply::FunctionCall | Reply::Sync, be::READY_FOR_QUERY) => true,
            (Reply::Query { .. } | Reply::FunctionCall, be::ERROR_RESPONSE) => {
                self.copy_ended();
                self.query_failed = true;
                if !from_client && self.pooler_error.is_none() {
                    self.pooler_error = Some(body.unwrap_or_default().into());
                }
                false
            }
            (Reply::Query { .. } | Reply::FunctionCall, be::COMMAND_COMPLETE) => {
                self.copy_completed();
                false
            }
            (Reply::Query { .. } | Reply::FunctionCall, _) => false,
            // An implicit COMMIT can fail at Sync (deferred constraints).
            (Reply::Sync, be::ERROR_RESPONSE) => false,
            (Reply::Sync, _) => return Err(Unexpected(tag)),
            (_, be::ERROR_RESPONSE) => {
                self.copy_ended();
                if let Some(e) = self.queue.pop_front() {
                    undo(&e, fixes);
                }
                self.skip_to_sync(fixes);
                self.settle();
                // The error of a Parse or Close the pooler added stands for
                // the client message it was added for.
                return Ok(Disposition::Forward);
            }
            (Reply::Execute, be::COMMAND_COMPLETE) => {
                self.copy_completed();
                true
            }
            (Reply::Parse { .. } | Reply::Check { .. }, be::PARSE_COMPLETE)
            | (Reply::Bind { .. }, be::BIND_COMPLETE)
            | (Reply::Close { .. }, be::CLOSE_COMPLETE)
            | (Reply::Describe { .. }, be::ROW_DESCRIPTION | be::NO_DATA)
            | (Reply::Execute, be::EMPTY_QUERY_RESPONSE | be::PORTAL_SUSPENDED) => true,
            (Reply::Describe { .. }, be::PARAMETER_DESCRIPTION) => false,
            (Reply::Execute, be::DATA_ROW | be::COPY_DATA | be::COPY_DONE) => false,
            _ => return Err(Unexpected(tag)),
        };
        if done {
            if let Some(Expect::Client(Reply::Query { follows: true })) = self.queue.pop_front() {
                fixes.push(CacheFix::FollowedQuery {
                    ok: !self.query_failed,
                });
            }
            self.query_failed = false;
            self.settle();
        }
        Ok(own)
    }

    /// The server entered COPY.
    fn copy_started(&mut self, tag: u8) {
        self.copy = Some(match tag {
            be::COPY_IN_RESPONSE => CopyDir::In,
            be::COPY_OUT_RESPONSE => CopyDir::Out,
            _ => CopyDir::Both,
        });
    }

    /// A COPY IN finished: it read everything up to the client's CopyDone,
    /// so the Syncs and data sent since it started were the COPY's.
    fn copy_completed(&mut self) {
        if self.copy.take() == Some(CopyDir::In) {
            self.strip_copy_in(true);
        }
    }

    /// A COPY failed: the Syncs sent after it started and before any data
    /// were read during COPY IN and ignored; those after data are read
    /// after the failure and answered. (Which CopyData the failure hit is
    /// not visible to the pooler: a Sync sent between CopyData messages is
    /// taken to follow the failure. Clients send Sync before the data, as
    /// libpq and tokio-postgres do, or after CopyDone.)
    fn copy_ended(&mut self) {
        if self.copy.take() == Some(CopyDir::In) {
            self.strip_copy_in(false);
        }
    }

    /// Removes, after the head, the Syncs the server ignored during COPY
    /// IN, up to the CopyEnd (which the COPY consumed); past the first data
    /// marker too when the COPY `completed`.
    fn strip_copy_in(&mut self, completed: bool) {
        let mut i = 1;
        while i < self.queue.len() {
            match self.queue[i] {
                Expect::CopyEnd => {
                    self.queue.remove(i);
                    return;
                }
                Expect::CopyData if !completed => return,
                Expect::CopyData | Expect::Client(Reply::Sync) | Expect::Injected(Reply::Sync) => {
                    self.queue.remove(i);
                }
                _ => i += 1,
            }
        }
    }

    /// After an error: every entry before the next Sync gets no reply.
    fn skip_to_sync(&mut self, fixes: &mut Vec<CacheFix>) {
        while let Some(e) = self.queue.front() {
            if matches!(
                e,
                Expect::Client(Reply::Sync) | Expect::Injected(Reply::Sync)
            ) {
                return;
            }
            if let Some(e) = self.queue.pop_front() {
                undo(&e, fixes);
            }
        }
        self.skipping = true;
    }

    /// Drops entries that earn no reply from the head: a CopyEnd or data
    /// whose COPY failed before it started, or was ended by the server.
    fn settle(&mut self) {
        while matches!(self.queue.front(), Some(Expect::CopyEnd | Expect::CopyData)) {
            self.queue.pop_front();
        }
    }
}

/// The corrections for an entry that will get no reply (or an error).
fn undo(e: &Expect, fixes: &mut Vec<CacheFix>) {
    match e {
        Expect::Client(Reply::Parse { id, def }) => {
            if let Some(id) = id {
                fixes.push(CacheFix::Forget(*id));
            }
            if let Some(def) = def {
                fixes.push(CacheFix::Undefine(*def));
            }
        }
        Expect::Injected(Reply::Parse { id: Some(id), .. }) => fixes.push(CacheFix::Forget(*id)),
        Expect::Owed(Synthetic::ParseComplete { def }) | Expect::Client(Reply::Check { def }) => {
            fixes.push(CacheFix::Undefine(*def))
        }
        Expect::Injected(Reply::Close { evicted: Some(id) })
        | Expect::Client(Reply::Close { evicted: Some(id) }) => fixes.push(CacheFix::Restore(*id)),
        Expect::Client(Reply::Query { follows: true }) => {
            fixes.push(CacheFix::FollowedQuery { ok: false })
        }
        _ => {}
    }
}

/// Writes a message with an empty body.
fn put_empty(out: &mut Vec<u8>, tag: u8) {
    out.push(tag);
    out.extend_from_slice(&4u32.to_be_bytes());
}

#[cfg(test)]
mod tests;
