//! Followed session settings while a client holds a backend: which of its
//! SETs and RESETs took effect, by PostgreSQL's rules. A setting changed in
//! a transaction lasts only if that transaction commits; one in a simple
//! Query that fails is undone with it (the statements of one Query run as
//! one implicit transaction).

use std::collections::VecDeque;

use crate::protocol::sql::Setting;

/// What became of the settings of the client's Queries.
#[derive(Debug, Default)]
pub struct Follow {
    /// Settings of each followed Query not yet answered, in the order sent.
    in_flight: VecDeque<Vec<Setting>>,
    /// Settings of answered Queries of the transaction still open.
    open: Vec<Setting>,
    /// The open transaction failed or was rolled back: `open` will not last.
    void: bool,
    /// A savepoint command was sent since the client last had no
    /// transaction open: a ROLLBACK TO may undo part of `open`.
    savepoint: bool,
    /// Settings whose transactions committed, for the client to keep.
    committed: Vec<Setting>,
    /// Settings undone with their transactions (or whose outcome was not seen).
    voided: Vec<Setting>,
}

impl Follow {
    /// True while settings wait for their outcome.
    pub fn pending(&self) -> bool {
        !self.in_flight.is_empty() || !self.open.is_empty()
    }

    /// True once a savepoint command was sent in the open transaction.
    pub fn savepoint_seen(&self) -> bool {
        self.savepoint
    }

    /// Notes a savepoint command sent.
    pub fn saw_savepoint(&mut self) {
        self.savepoint = true;
    }

    /// A Query with `settings` was sent (queued as a followed Query).
    pub fn sent(&mut self, settings: Vec<Setting>) {
        self.in_flight.push_back(settings);
    }

    /// The oldest followed Query left the queue; `ok`: without an error.
    pub fn answered(&mut self, ok: bool) {
        if let Some(s) = self.in_flight.pop_front() {
            if ok {
                self.open.extend(s);
            } else {
                self.voided.extend(s);
            }
        }
    }

    /// An error ended a statement: the transaction it was in fails.
    pub fn failed(&mut self) {
        self.void = true;
    }

    /// The server said where the session stands (ReadyForQuery): with no
    /// transaction open, what the last one changed has lasted or not.
    /// `quiet`: nothing else is owed, so no savepoint is in flight either.
    pub fn ready(&mut self, in_transaction: bool, aborted: bool, quiet: bool) {
        // The common case, once per ReadyForQuery: nothing followed.
        if self.open.is_empty() && !self.void && !self.savepoint && !aborted {
            return;
        }
        if aborted {
            self.void = true;
        }
        if in_transaction {
            return;
        }
        let open = std::mem::take(&mut self.open);
        if std::mem::take(&mut self.void) {
            self.voided.extend(open);
        } else {
            self.committed.extend(open);
        }
        if quiet {
            self.savepoint = false;
        }
    }

    /// Takes the settings that lasted and those that did not, or may not
    /// have (still waiting when the relay ended: the backend is then closed
    /// or reset, but the books stay pessimistic).
    pub fn take_outcomes(&mut self) -> (Vec<Setting>, Vec<Setting>) {
        let mut voided = std::mem::take(&mut self.voided);
        voided.append(&mut self.open);
        voided.extend(self.in_flight.drain(..).flatten());
        (std::mem::take(&mut self.committed), voided)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str) -> Setting {
        Setting::Set {
            name: name.into(),
            sql: format!("{name} = 1"),
        }
    }

    #[test]
    fn a_set_lasts_when_its_transaction_commits() {
        let mut f = Follow::default();
        // Autocommit: the Query is its own transaction.
        f.sent(vec![set("a")]);
        f.answered(true);
        f.ready(false, false, true);
        assert_eq!(f.take_outcomes().0, vec![set("a")]);
        // Inside a block, it waits for the COMMIT.
        f.sent(vec![set("b")]);
        f.answered(true);
        f.ready(true, false, true);
        assert!(f.pending());
        f.ready(false, false, true);
        assert_eq!(f.take_outcomes().0, vec![set("b")]);
        assert!(!f.pending());
    }

    #[test]
    fn failures_and_rollbacks_undo_settings() {
        let mut f = Follow::default();
        f.sent(vec![set("a")]);
        f.answered(false);
        f.ready(false, false, true);
        assert!(f.take_outcomes().0.is_empty());
        // An error later in the block, or ROLLBACK.
        f.sent(vec![set("b")]);
        f.answered(true);
        f.ready(true, false, true);
        f.failed();
        f.ready(true, true, true);
        f.ready(false, false, true);
        assert!(f.take_outcomes().0.is_empty());
        // The failure is forgotten with its transaction.
        f.sent(vec![set("c")]);
        f.answered(true);
        f.ready(false, false, true);
        assert_eq!(f.take_outcomes().0, vec![set("c")]);
    }
}
