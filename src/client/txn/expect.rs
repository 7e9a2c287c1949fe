//! What the server still owes for the messages sent to it, in order, so the
//! relay knows which reply belongs to whom: the client's own messages, the
//! Parse and Close the pooler slipped in (their replies are dropped), and the
//! ParseComplete/CloseComplete the pooler owes the client for messages it
//! answered itself.
//!
//! The rules follow the protocol's message flow: each extended-query message
//! gets exactly one reply (Describe of a statement two), an ErrorResponse
//! makes the server skip everything up to the next Sync, and a simple Query
//! or FunctionCall ends with ReadyForQuery.

use std::collections::VecDeque;

/// Which reply a message sent to the server earns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// ParseComplete; `id` is the pooler statement being prepared, if named.
    Parse {
        /// Statement id to forget if the Parse fails or is skipped.
        id: Option<u64>,
    },
    /// BindComplete.
    Bind,
    /// ParameterDescription then RowDescription or NoData.
    DescribeStatement,
    /// RowDescription or NoData.
    DescribePortal,
    /// Rows, then CommandComplete, EmptyQueryResponse or PortalSuspended.
    Execute,
    /// CloseComplete; `evicted` is a statement the pooler is closing.
    Close {
        /// Statement id to remember again if this Close is skipped.
        evicted: Option<u64>,
    },
    /// ReadyForQuery.
    Sync,
    /// Anything up to ReadyForQuery.
    Query,
    /// FunctionCallResponse (or an error) then ReadyForQuery.
    FunctionCall,
}

/// One entry of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A client message: its reply goes to the client.
    Client(Reply),
    /// A message the pooler added: its reply is dropped (an error still goes
    /// to the client, as the error of the client message it was added for).
    Injected(Reply),
    /// A reply (message type) the pooler owes the client for a message it
    /// did not send on.
    Synthetic(u8),
    /// The ParseComplete owed for a client's Parse of statement `id`, which
    /// the backend already had.
    OwedParse {
        /// The pooler statement the client's name maps to.
        id: u64,
    },
}

/// What to do with one server message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Pass it to the client.
    Forward,
    /// Drop it (the reply to a pooler-added message).
    Drop,
}

/// Bookkeeping the prepared-statement cache must apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheFix {
    /// The statement was not prepared after all.
    Forget(u64),
    /// The statement was not closed after all.
    Restore(u64),
    /// The client's Parse of statement `id` failed or was skipped: the name
    /// it defined does not exist, as on PostgreSQL.
    Undefine(u64),
}

/// The queue of replies the server owes.
#[derive(Debug, Default)]
pub struct Replies {
    queue: VecDeque<Expect>,
    /// An error was seen and the client has not sent its Sync yet: the server
    /// skips everything it receives until then.
    skipping: bool,
}

impl Replies {
    /// An empty queue.
    pub fn new() -> Self {
        Replies::default()
    }

    /// True when nothing is owed.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Records a message sent (or answered by the pooler). While the server
    /// skips to Sync, messages before the Sync get no reply: their cache
    /// bookkeeping is undone at once via `fixes`.
    pub fn push(&mut self, e: Expect, fixes: &mut Vec<CacheFix>) {
        if self.skipping {
            if matches!(e, Expect::Client(Reply::Sync)) {
                self.skipping = false;
            } else {
                undo(e, fixes);
                return;
            }
        }
        self.queue.push_back(e);
    }

    /// True when a reply the pooler owes is next in line.
    pub fn synthetic_due(&self) -> bool {
        matches!(
            self.queue.front(),
            Some(Expect::Synthetic(_) | Expect::OwedParse { .. })
        )
    }

    /// Pops the synthetic replies now at the head of the queue: they are due.
    pub fn take_due(&mut self, out: &mut Vec<u8>) {
        loop {
            match self.queue.front() {
                Some(Expect::Synthetic(tag)) => out.push(*tag),
                Some(Expect::OwedParse { .. }) => out.push(b'1'),
                _ => return,
            }
            self.queue.pop_front();
        }
    }

    /// Accounts for one server message of type `tag` (after
    /// [`Replies::take_due`]). Returns whether it goes to the client;
    /// `None` means the server sent a reply nothing was waiting for.
    pub fn on_server(&mut self, tag: u8, fixes: &mut Vec<CacheFix>) -> Option<Disposition> {
        // Asynchronous messages can come at any time and are the client's.
        if matches!(tag, b'N' | b'A' | b'S') {
            return Some(Disposition::Forward);
        }
        let Some(&head) = self.queue.front() else {
            // A FATAL the server sends on its own (shutdown, termination).
            return (tag == b'E').then_some(Disposition::Forward);
        };
        let (origin_client, reply) = match head {
            Expect::Client(r) => (true, r),
            Expect::Injected(r) => (false, r),
            Expect::Synthetic(_) | Expect::OwedParse { .. } => return None,
        };
        let own = if origin_client {
            Disposition::Forward
        } else {
            Disposition::Drop
        };
        // Some(true): the entry is complete; Some(false): more of its reply follows.
        let done = match (reply, tag) {
            (Reply::Query | Reply::FunctionCall | Reply::Sync, b'Z') => Some(true),
            (Reply::Query | Reply::FunctionCall, _) => Some(false),
            // An implicit COMMIT can fail at Sync (deferred constraints).
            (Reply::Sync, b'E') => Some(false),
            (Reply::Sync, _) => None,
            (_, b'E') => {
                self.queue.pop_front();
                undo(head, fixes);
                self.skip_to_sync(fixes);
                return Some(Disposition::Forward);
            }
            (Reply::Parse { .. }, b'1')
            | (Reply::Bind, b'2')
            | (Reply::Close { .. }, b'3')
            | (Reply::DescribeStatement | Reply::DescribePortal, b'T' | b'n')
            | (Reply::Execute, b'C' | b'I' | b's') => Some(true),
            (Reply::DescribeStatement, b't') => Some(false),
            // Rows and COPY traffic.
            (Reply::Execute, _) => Some(false),
            _ => None,
        };
        if done? {
            self.queue.pop_front();
        }
        Some(own)
    }

    /// After an error: every entry before the next Sync gets no reply.
    fn skip_to_sync(&mut self, fixes: &mut Vec<CacheFix>) {
        while let Some(&e) = self.queue.front() {
            if matches!(e, Expect::Client(Reply::Sync)) {
                return;
            }
            self.queue.pop_front();
            undo(e, fixes);
        }
        self.skipping = true;
    }
}

/// The corrections for an entry that will get no reply (or an error).
fn undo(e: Expect, fixes: &mut Vec<CacheFix>) {
    match e {
        Expect::Client(Reply::Parse { id: Some(id) }) => {
            fixes.push(CacheFix::Forget(id));
            fixes.push(CacheFix::Undefine(id));
        }
        Expect::Injected(Reply::Parse { id: Some(id) }) => fixes.push(CacheFix::Forget(id)),
        Expect::OwedParse { id } => fixes.push(CacheFix::Undefine(id)),
        Expect::Injected(Reply::Close { evicted: Some(id) })
        | Expect::Client(Reply::Close { evicted: Some(id) }) => fixes.push(CacheFix::Restore(id)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Disposition::{Drop, Forward};

    fn run(r: &mut Replies, tags: &[u8]) -> (Vec<Option<Disposition>>, Vec<u8>) {
        let mut fixes = Vec::new();
        let mut due = Vec::new();
        let out = tags
            .iter()
            .map(|&t| {
                r.take_due(&mut due);
                r.on_server(t, &mut fixes)
            })
            .collect();
        r.take_due(&mut due);
        (out, due)
    }

    fn push_all(r: &mut Replies, es: &[Expect]) -> Vec<CacheFix> {
        let mut fixes = Vec::new();
        for &e in es {
            r.push(e, &mut fixes);
        }
        fixes
    }

    #[test]
    fn injected_parse_reply_is_dropped_and_synthetic_is_due_in_order() {
        let mut r = Replies::new();
        push_all(
            &mut r,
            &[
                Expect::Injected(Reply::Parse { id: Some(1) }),
                Expect::Client(Reply::Bind),
                Expect::Synthetic(b'3'),
                Expect::Client(Reply::Execute),
                Expect::Client(Reply::Sync),
            ],
        );
        let (d, due) = run(&mut r, b"12DDCZ");
        assert_eq!(
            d,
            vec![
                Some(Drop),
                Some(Forward),
                Some(Forward),
                Some(Forward),
                Some(Forward),
                Some(Forward)
            ]
        );
        assert_eq!(due, b"3");
        assert!(r.is_empty());
    }

    #[test]
    fn error_skips_to_sync_and_undoes_cache_changes() {
        let mut r = Replies::new();
        push_all(
            &mut r,
            &[
                Expect::Client(Reply::Parse { id: Some(1) }),
                Expect::Injected(Reply::Close { evicted: Some(2) }),
                Expect::Client(Reply::Parse { id: Some(3) }),
                Expect::Synthetic(b'3'),
                Expect::Client(Reply::Sync),
            ],
        );
        let mut fixes = Vec::new();
        assert_eq!(r.on_server(b'E', &mut fixes), Some(Forward));
        assert_eq!(
            fixes,
            vec![
                CacheFix::Forget(1),
                CacheFix::Undefine(1),
                CacheFix::Restore(2),
                CacheFix::Forget(3),
                CacheFix::Undefine(3),
            ]
        );
        let mut due = Vec::new();
        r.take_due(&mut due);
        assert!(due.is_empty(), "a skipped synthetic reply is never sent");
        assert_eq!(r.on_server(b'Z', &mut fixes), Some(Forward));
        assert!(r.is_empty());
    }

    #[test]
    fn error_before_the_client_sent_sync_skips_later_messages() {
        let mut r = Replies::new();
        push_all(&mut r, &[Expect::Client(Reply::Bind)]);
        let mut fixes = Vec::new();
        assert_eq!(r.on_server(b'E', &mut fixes), Some(Forward));
        let fixes = push_all(
            &mut r,
            &[
                Expect::Injected(Reply::Parse { id: Some(9) }),
                Expect::Client(Reply::Execute),
                Expect::Client(Reply::Sync),
            ],
        );
        assert_eq!(fixes, vec![CacheFix::Forget(9)]);
        let (d, _) = run(&mut r, b"Z");
        assert_eq!(d, vec![Some(Forward)]);
        assert!(r.is_empty());
    }

    #[test]
    fn simple_query_keeps_errors_and_copy_inside_its_reply() {
        let mut r = Replies::new();
        push_all(&mut r, &[Expect::Client(Reply::Query)]);
        let (d, _) = run(&mut r, b"TDCEGCHdcCNSZ");
        assert!(d.iter().all(|x| *x == Some(Forward)));
        assert!(r.is_empty());
    }

    #[test]
    fn describe_statement_takes_two_messages_and_execute_many() {
        let mut r = Replies::new();
        push_all(
            &mut r,
            &[
                Expect::Client(Reply::DescribeStatement),
                Expect::Client(Reply::Execute),
                Expect::Client(Reply::Sync),
            ],
        );
        let (d, _) = run(&mut r, b"tTDDsZ");
        assert!(d.iter().all(|x| *x == Some(Forward)));
        assert!(r.is_empty());
    }

    #[test]
    fn unexpected_replies_are_reported() {
        let mut r = Replies::new();
        let mut fixes = Vec::new();
        assert_eq!(r.on_server(b'D', &mut fixes), None);
        assert_eq!(r.on_server(b'E', &mut fixes), Some(Forward));
        assert_eq!(r.on_server(b'N', &mut fixes), Some(Forward));
        push_all(&mut r, &[Expect::Client(Reply::Bind)]);
        assert_eq!(r.on_server(b'1', &mut fixes), None);
        push_all(&mut r, &[Expect::Client(Reply::Sync)]);
        let mut r2 = Replies::new();
        push_all(&mut r2, &[Expect::Client(Reply::Sync)]);
        assert_eq!(r2.on_server(b'C', &mut fixes), None);
    }
}
