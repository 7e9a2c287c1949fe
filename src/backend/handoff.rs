//! What a link is doing ([`LinkState`]), and the one decision of what
//! becomes of it when a client is done with it ([`Link::hand_off`]).
//!
//! The rules, in order: a connection that cannot be trusted is closed; one
//! the server cannot finish on its own (a client message half sent, a COPY
//! FROM STDIN waiting for data, an extended batch without its Sync) is
//! closed too, which is what PostgreSQL does when such a client vanishes;
//! one that still owes replies is drained: the server finishes what it was
//! sent, as it would for a client that vanished, and the replies are read
//! and dropped. A client's departure never cancels work it already sent.
//! Then an open transaction is rolled back and the session reset, unless
//! the backend is idle and nothing outlives the transaction (transaction
//! pooling between transactions), in which case it is reused as it is.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::ledger::Usage;
use super::owed::CopyDir;
use super::{Link, TxStatus};

/// What a link is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    /// Idle, outside a transaction, nothing owed.
    Idle,
    /// Idle inside a transaction block (`failed` after an error).
    InTransaction {
        /// The transaction has failed and awaits ROLLBACK.
        failed: bool,
    },
    /// Replies are owed, or an extended batch is open.
    Busy {
        /// Replies owed.
        owed: usize,
    },
    /// A COPY is in progress.
    Copy(CopyDir),
    /// The connection cannot be trusted.
    Broken(String),
}

/// How a client is done with its backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// Transaction pooling, between transactions: the client keeps its
    /// session, and nothing it left on the backend outlives the transaction.
    BetweenTransactions,
    /// The client's session on this backend is over; `keeps_state` says it
    /// may have left session state behind (session pooling, or a pinned
    /// client), so the backend is reset before anyone else gets it.
    SessionOver {
        /// Reset before reuse, even if idle.
        keeps_state: bool,
    },
}

/// What to do with a link a client is done with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandOff {
    /// Back to the pool as it is.
    Reuse,
    /// Roll back and run the reset query first.
    Reset,
    /// Read what the server still owes (and wait for cancels on their way),
    /// then decide again.
    Drain,
    /// Close it, for this reason.
    Close(String),
}

impl Link {
    /// What the link is doing now.
    pub fn state(&self) -> LinkState {
        let l = &self.ledger;
        if let Some(why) = l.broken() {
            return LinkState::Broken(why.to_string());
        }
        if let Some(dir) = l.copy() {
            return LinkState::Copy(dir);
        }
        let owed = l.owed().len();
        if owed > 0 || l.owed().unsynced() > 0 || l.sent_partial() || self.has_unread() {
            return LinkState::Busy { owed };
        }
        match l.tx() {
            TxStatus::Idle => LinkState::Idle,
            TxStatus::InTransaction => LinkState::InTransaction { failed: false },
            TxStatus::Failed => LinkState::InTransaction { failed: true },
        }
    }

    /// [`Link::hand_off`], after taking back the settings queued for a
    /// client that left before they went out (so such a backend is reused
    /// at once, not drained by a task).
    pub fn release(&mut self, how: Departure) -> HandOff {
        self.withdraw_unsent();
        self.hand_off(how)
    }

    /// The one decision of what becomes of this link now that a client is
    /// done with it.
    pub fn hand_off(&self, how: Departure) -> HandOff {
        let l = &self.ledger;
        if let Some(why) = l.broken() {
            return HandOff::Close(why.to_string());
        }
        if l.sent_partial() {
            return HandOff::Close("client left in the middle of a message".into());
        }
        if l.copy() == Some(CopyDir::In) {
            return HandOff::Close("client left during COPY FROM STDIN".into());
        }
        if l.owed().unsynced() > 0 {
            // Sending the Sync would commit what the client never
            // committed; PostgreSQL rolls it back when a client vanishes.
            return HandOff::Close("client left an extended-protocol batch without Sync".into());
        }
        if !l.owed().is_empty() || self.has_unread() || !self.queued.is_empty() {
            return HandOff::Drain;
        }
        if self.cancel.gate.busy() {
            return HandOff::Drain;
        }
        match (l.tx(), how) {
            (TxStatus::Idle, Departure::BetweenTransactions) => HandOff::Reuse,
            (TxStatus::Idle, Departure::SessionOver { keeps_state: false }) => HandOff::Reuse,
            // A client that sent nothing left the session as the login
            // made it: PgBouncer never links such a client at all.
            (TxStatus::Idle, Departure::SessionOver { keeps_state: true })
                if l.usage() == Usage::Clean =>
            {
                HandOff::Reuse
            }
            _ => HandOff::Reset,
        }
    }
}

/// Cancels on their way to one backend. A backend with a cancel in flight
/// goes to no other client until PostgreSQL has closed that cancel's
/// connection (its signal is delivered by then); one whose cancel was not
/// confirmed is closed.
#[derive(Debug, Default)]
pub struct CancelGate {
    in_flight: AtomicUsize,
    unconfirmed: AtomicBool,
    done: Notify,
}

impl CancelGate {
    /// A cancel starts on its way; the guard ends it.
    pub fn enter(self: &Arc<Self>) -> CancelInFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        CancelInFlight {
            gate: self.clone(),
            confirmed: false,
        }
    }

    /// True while a cancel is on its way.
    pub fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// Waits (at most `limit`) for the cancels on their way; true if every
    /// cancel sent to this backend so far was confirmed delivered.
    pub async fn settled(&self, limit: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.done.notified();
                if !self.busy() {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok() && !self.unconfirmed.load(Ordering::Acquire)
    }
}

/// A cancel on its way to a backend.
#[derive(Debug)]
pub struct CancelInFlight {
    gate: Arc<CancelGate>,
    confirmed: bool,
}

impl CancelInFlight {
    /// PostgreSQL closed the cancel connection: the signal was delivered.
    pub fn confirm(mut self) {
        self.confirmed = true;
    }
}

impl Drop for CancelInFlight {
    fn drop(&mut self) {
        if !self.confirmed {
            self.gate.unconfirmed.store(true, Ordering::Release);
        }
        self.gate.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.gate.done.notify_waiters();
    }
}
