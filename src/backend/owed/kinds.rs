//! The entries of the owed-reply queue: which reply each message sent
//! earns, and who it is for.

use crate::protocol::tags::fe;

/// Which reply a message sent to the server earns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// ParseComplete.
    Parse {
        /// The pooler statement being prepared on the backend, to forget
        /// if the Parse fails or is skipped.
        id: Option<u64>,
        /// The client's definition this Parse makes (its serial), undone
        /// if the Parse fails or is skipped.
        def: Option<u64>,
    },
    /// ParseComplete of the pooler's check that a statement the backend
    /// already has would be accepted now (see the rewriter): if it fails or
    /// is skipped, the client's definition `def` is undone, as on
    /// PostgreSQL, while the backend keeps the statement.
    Check {
        /// The client's definition (serial) the check stands for.
        def: u64,
    },
    /// BindComplete; `stmt` is the client's statement bound, if renamed.
    Bind {
        /// Which of the client's definitions of a name it bound (its serial).
        stmt: Option<u64>,
    },
    /// RowDescription or NoData, after a ParameterDescription for a statement.
    Describe {
        /// Which of the client's definitions of a name it described.
        stmt: Option<u64>,
    },
    /// Rows or COPY data, then CommandComplete, EmptyQueryResponse or PortalSuspended.
    Execute,
    /// CloseComplete; `evicted` is a statement the pooler is closing.
    Close {
        /// Statement id to remember again if this Close is skipped.
        evicted: Option<u64>,
    },
    /// ReadyForQuery.
    Sync,
    /// Anything up to ReadyForQuery.
    Query {
        /// It changes session settings the pooler follows: when it leaves
        /// the queue, whether it succeeded is reported
        /// ([`CacheFix::FollowedQuery`]).
        follows: bool,
    },
    /// FunctionCallResponse (or an error) then ReadyForQuery.
    FunctionCall,
}

impl Reply {
    /// The reply a client message of type `tag` earns, if any (Flush and
    /// COPY data earn none; CopyDone and CopyFail are [`Expect::CopyEnd`]).
    pub fn for_frontend(tag: u8) -> Option<Reply> {
        Some(match tag {
            fe::QUERY => Reply::Query { follows: false },
            fe::FUNCTION_CALL => Reply::FunctionCall,
            fe::SYNC => Reply::Sync,
            fe::PARSE => Reply::Parse {
                id: None,
                def: None,
            },
            fe::BIND => Reply::Bind { stmt: None },
            fe::DESCRIBE => Reply::Describe { stmt: None },
            fe::EXECUTE => Reply::Execute,
            fe::CLOSE => Reply::Close { evicted: None },
            _ => return None,
        })
    }

    /// True for the messages that belong to an extended-protocol batch.
    pub(super) fn is_extended(self) -> bool {
        !matches!(
            self,
            Reply::Sync | Reply::Query { .. } | Reply::FunctionCall
        )
    }
}

/// A reply the pooler itself owes a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Synthetic {
    /// CloseComplete for a Close the pooler answered.
    CloseComplete,
    /// ParseComplete for a client's Parse of statement `id`, which the
    /// backend already had.
    ParseComplete {
        /// The client's definition (serial) this answers.
        def: u64,
    },
    /// An ErrorResponse the pooler raised (a whole message). It travels in
    /// the queue entry, so an error that skips the entry drops its text too.
    Error(Box<[u8]>),
}

/// Who a queued reply is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// A client message: its reply goes to the client.
    Client(Reply),
    /// A message the pooler added: its reply is dropped. An error to an
    /// added Parse or Close still goes to the client, as the error of the
    /// client message it was added for; an error to the pooler's own
    /// statement (a [`Reply::Query`]) is kept for the pooler.
    Injected(Reply),
    /// A reply the pooler owes the client, due when it reaches the head.
    Owed(Synthetic),
    /// The client's CopyDone or CopyFail: no reply; ends a COPY IN.
    CopyEnd,
    /// One or more CopyData messages: no reply; marks where data began,
    /// because a Sync before any data is read by a server in COPY IN (and
    /// ignored) whatever happens to the COPY later.
    CopyData,
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
    /// The client's definition (serial) failed or was skipped: the name it
    /// defined does not exist, as on PostgreSQL.
    Undefine(u64),
    /// A client Query that changes followed settings left the queue:
    /// answered without error (`ok`), or failed or skipped.
    FollowedQuery {
        /// It ran to its ReadyForQuery without an error.
        ok: bool,
    },
}

/// Which way a COPY moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDir {
    /// COPY FROM STDIN: the server reads.
    In,
    /// COPY TO STDOUT: the server writes.
    Out,
    /// CopyBoth (replication).
    Both,
}

/// A server message that fits no owed reply: the books and the server
/// disagree, so the connection cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected message type \"{}\" from server", .0.escape_ascii())]
pub struct Unexpected(pub u8);
