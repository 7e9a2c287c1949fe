//! The protocol state of one backend connection that outlives its clients:
//! what the server owes, its transaction status, its prepared statements,
//! its parameters, and whose unnamed statement it holds. The relay of every
//! pool mode and the pooler's own statements account through it, and the
//! hand-off decision reads it; nobody keeps a copy.

use std::sync::Arc;

use super::owed::{CacheFix, CopyDir, Disposition, Expect, Owed};
use super::prepared::PreparedCache;
use super::{AppliedSet, ParamSet};
use crate::protocol::tags::be;

pub use crate::protocol::messages::TxStatus;

/// One client's definition of the unnamed statement: (client id, the
/// client's count of unnamed Parses).
pub type UnnamedKey = (u64, u64);

/// One backend connection's protocol bookkeeping.
pub struct Ledger {
    owed: Owed,
    tx: TxStatus,
    prepared: PreparedCache,
    /// Shared with the clients shown the same values (copied on a change),
    /// so that a checkout compares one pointer, not every parameter.
    params: Arc<ParamSet>,
    applied: AppliedSet,
    /// Whose unnamed statement the server holds, and which of that
    /// client's definitions (transaction pooling hands the backend to others
    /// between transactions, and a client to other backends).
    unnamed: Option<UnnamedKey>,
    /// A client message was only partly sent: the server waits for the rest.
    sent_partial: bool,
    /// Why the connection cannot be trusted any more, once it cannot.
    broken: Option<String>,
    /// Whether anything reached the server since its login or last reset.
    usage: Usage,
}

/// Whether a backend's session may differ from a fresh one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// Nothing was sent since the login or the last reset: the session is
    /// as the login left it, so a reset would change nothing.
    Clean,
    /// Some message was sent (by a client or the pooler).
    Used,
}

impl Ledger {
    /// Books for a fresh connection keeping about `capacity` prepared statements.
    pub fn new(capacity: usize) -> Ledger {
        Ledger {
            owed: Owed::default(),
            tx: TxStatus::Idle,
            prepared: PreparedCache::new(capacity),
            params: Arc::default(),
            applied: AppliedSet::default(),
            unnamed: None,
            sent_partial: false,
            broken: None,
            usage: Usage::Clean,
        }
    }

    /// What the server still owes.
    pub fn owed(&self) -> &Owed {
        &self.owed
    }

    /// Records a message sent to the server (or answered by the pooler).
    pub fn push(&mut self, e: Expect, fixes: &mut Vec<CacheFix>) {
        if matches!(
            e,
            Expect::Client(super::owed::Reply::Query { .. })
                | Expect::Injected(super::owed::Reply::Query { .. })
        ) {
            // A simple Query drops the unnamed statement (exec_simple_query).
            self.unnamed = None;
        }
        self.usage = Usage::Used;
        self.owed.push(e, fixes);
        if !fixes.is_empty() {
            self.apply(fixes);
        }
    }

    /// Notes a Flush sent.
    pub fn flushed(&mut self) {
        self.usage = Usage::Used;
        self.owed.flushed();
    }

    /// Writes the replies the pooler owes that are due now.
    pub fn take_due(&mut self, out: &mut Vec<u8>, fixes: &mut Vec<CacheFix>) {
        self.owed.take_due(out, fixes);
        self.apply(fixes);
    }

    /// Accounts for one server message: `body` is its body when it was
    /// read whole (ReadyForQuery and ParameterStatus always are). Keeps the
    /// transaction status and parameters current.
    pub fn on_message(
        &mut self,
        tag: u8,
        body: Option<&[u8]>,
        fixes: &mut Vec<CacheFix>,
    ) -> Result<Disposition, String> {
        match (tag, body) {
            (be::READY_FOR_QUERY, Some(&[b])) => {
                self.tx = TxStatus::from_byte(b).ok_or("invalid ReadyForQuery status")?;
            }
            (be::READY_FOR_QUERY, _) => return Err("invalid ReadyForQuery".into()),
            (be::PARAMETER_STATUS, Some(b)) if !ParamSet::apply_status(&mut self.params, b) => {
                return Err("invalid ParameterStatus".into());
            }
            _ => {}
        }
        let d = self
            .owed
            .on_server(tag, body, fixes)
            .map_err(|e| e.to_string());
        if !fixes.is_empty() {
            self.apply(fixes);
        }
        d
    }

    /// Applies the prepared-statement corrections; the client's own
    /// (`Undefine`) stay in `fixes` for the client.
    fn apply(&mut self, fixes: &mut Vec<CacheFix>) {
        fixes.retain(|f| match *f {
            CacheFix::Forget(id) => {
                self.prepared.remove(id);
                false
            }
            CacheFix::Restore(id) => {
                self.prepared.restore(id);
                false
            }
            CacheFix::Undefine(_) | CacheFix::FollowedQuery { .. } => true,
        });
    }

    /// The first error PostgreSQL raised for the pooler's own statements.
    pub fn take_pooler_error(&mut self) -> Option<Box<[u8]>> {
        self.owed.take_pooler_error()
    }

    /// Records the status of a ReadyForQuery read outside the relay (login).
    pub(super) fn set_tx(&mut self, tx: TxStatus) {
        self.tx = tx;
    }

    /// Transaction status from the last ReadyForQuery.
    pub fn tx(&self) -> TxStatus {
        self.tx
    }

    /// The pooler's statements prepared here.
    pub fn prepared(&mut self) -> &mut PreparedCache {
        &mut self.prepared
    }

    /// The server's ParameterStatus values.
    pub fn params(&self) -> &Arc<ParamSet> {
        &self.params
    }

    /// Shares a client's set, equal to this one's, so that the next
    /// comparison with it is a pointer's.
    pub fn share_params(&mut self, same: &Arc<ParamSet>) {
        debug_assert!(*self.params == **same);
        self.params = Arc::clone(same);
    }

    /// The server's ParameterStatus values, to set ahead of the server's
    /// report of a SET the pooler sends.
    pub fn params_mut(&mut self) -> &mut ParamSet {
        Arc::make_mut(&mut self.params)
    }

    /// What the pooler gave this backend for its clients beyond its defaults.
    pub fn applied(&mut self) -> &mut AppliedSet {
        &mut self.applied
    }

    /// Whose unnamed statement (which definition) the server holds.
    pub fn unnamed(&self) -> Option<UnnamedKey> {
        self.unnamed
    }

    /// The server now holds this unnamed statement (`None`: none).
    pub fn set_unnamed(&mut self, key: Option<UnnamedKey>) {
        self.unnamed = key;
    }

    /// Records whether the last client message was only partly sent.
    pub fn set_sent_partial(&mut self, partial: bool) {
        if partial {
            self.usage = Usage::Used;
        }
        self.sent_partial = partial;
    }

    /// Marks the connection as not to be trusted again.
    pub fn break_with(&mut self, why: impl Into<String>) {
        if self.broken.is_none() {
            self.broken = Some(why.into());
        }
    }

    /// Why the connection cannot be trusted, if it cannot.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// A client message is partly sent.
    pub fn sent_partial(&self) -> bool {
        self.sent_partial
    }

    /// The reset query ran: what the pooler SET is gone, and prepared
    /// statements too if the query drops them.
    pub(super) fn after_reset(&mut self, drops_prepared: bool) {
        self.usage = Usage::Clean;
        self.applied.clear();
        self.unnamed = None;
        if drops_prepared {
            self.prepared.clear();
        }
    }

    /// Forgets what the pooler's statements queued but never sent were to
    /// earn, when nothing else is owed; `usage` is what it was before them.
    /// False (and nothing changed) when anything else is owed.
    pub(super) fn withdraw_injected(&mut self, usage: Usage) -> bool {
        if !self.owed.withdraw_injected() {
            return false;
        }
        self.usage = usage;
        true
    }

    /// Whether anything reached the server since its login or last reset.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The COPY in progress, if any.
    pub fn copy(&self) -> Option<CopyDir> {
        self.owed.copy()
    }
}
