//! Work the pooler itself does on a link between clients: its own
//! statements, draining what a departed client's statements still owe,
//! the reset, and carrying out the hand-off decision.

use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::owed::{Expect, Reply};
use super::{
    BackendError, Departure, HandOff, Link, PoolerStatement, ServerError, TxStatus, MAX_INSPECTED,
};
use crate::protocol::messages::Fields;
use crate::protocol::scan::Step;
use crate::protocol::tags::be;
use crate::stream::fill;

/// `server_reset_query`, read once: whether it drops the backend's prepared
/// statements is the same at every release, so it is not lexed at each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetQuery {
    text: String,
    drops_prepared: bool,
}

impl ResetQuery {
    /// `text` as run at release; `""` runs nothing.
    pub fn new(text: String) -> ResetQuery {
        let drops_prepared = crate::protocol::sql::classify(
            text.as_bytes(),
            crate::protocol::sql::Strings::Standard,
            &|_| true,
        )
        .drops_prepared;
        ResetQuery {
            text,
            drops_prepared,
        }
    }

    /// The statement's text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Reads severity, SQLSTATE and message out of an ErrorResponse body (a
/// truncated or malformed one too: what is missing gets ERROR, XX000 and
/// an empty message).
pub fn parse_error_fields(body: &[u8]) -> ServerError {
    let fields = Fields::new(body);
    let text = |v: Option<&[u8]>, default: &str| {
        v.map_or_else(
            || default.to_string(),
            |v| String::from_utf8_lossy(v).into_owned(),
        )
    };
    ServerError {
        severity: text(fields.severity(), "ERROR"),
        code: text(fields.sqlstate(), "XX000"),
        message: text(fields.message(), ""),
    }
}

/// What settings queued ahead of the server's report changed in the ledger,
/// to restore if they are taken back unsent.
#[derive(Debug)]
pub(super) struct Withdrawable {
    /// Each parameter's value before.
    before: Vec<(String, String)>,
    /// The backend's usage before.
    usage: crate::backend::ledger::Usage,
}

impl Link {
    /// Queues simple-protocol statements to go out in front of the next
    /// bytes written to the server (the relay sends them with the client's
    /// first message, in one write); their replies are accounted as the
    /// pooler's and never reach a client.
    pub fn queue_queries(&mut self, queries: &[&str]) -> Result<(), BackendError> {
        self.withdrawable = None;
        self.push_queries(queries)
    }

    fn push_queries(&mut self, queries: &[&str]) -> Result<(), BackendError> {
        let mut fixes = Vec::new();
        for q in queries {
            postgres_protocol::message::frontend::query(q, &mut self.queued)
                .map_err(|e| BackendError::Protocol(e.to_string()))?;
            self.ledger.push(
                Expect::Injected(Reply::Query { follows: false }),
                &mut fixes,
            );
        }
        Ok(())
    }

    /// Queues `sql`, which sets the parameters `set` says and whose outcome
    /// is certain, and records them in the ledger ahead of the server's
    /// report, as [`Link::queue_queries`] would; but if the client leaves
    /// before sending anything, [`Link::withdraw_unsent`] takes them back
    /// unsent, so a login that ran nothing costs the server nothing.
    pub fn queue_settings(&mut self, sql: &str, set: &[(&str, &str)]) -> Result<(), BackendError> {
        let first = self.queued.is_empty();
        let usage = self.ledger.usage();
        let before: Option<Vec<(String, String)>> = set
            .iter()
            .map(|(name, _)| Some((name.to_string(), self.param(name)?.to_string())))
            .collect();
        self.push_queries(&[sql])?;
        for (name, value) in set {
            self.ledger.params_mut().set(name, value);
        }
        self.withdrawable = match before {
            Some(before) if first => Some(Withdrawable { before, usage }),
            _ => None,
        };
        Ok(())
    }

    /// Takes back settings [`Link::queue_settings`] queued that never went
    /// out: the queue, their expected replies and their ledger values.
    pub(super) fn withdraw_unsent(&mut self) {
        let Some(w) = self.withdrawable.take() else {
            return;
        };
        if self.queued.is_empty() || !self.ledger.withdraw_injected(w.usage) {
            return;
        }
        self.queued.clear();
        for (name, value) in &w.before {
            self.ledger.params_mut().set(name, value);
        }
    }

    /// Writes whatever the pooler queued.
    pub(super) async fn write_queued(&mut self) -> Result<(), BackendError> {
        self.withdrawable = None;
        if self.queued.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.queued);
        self.stream
            .write_all(&out)
            .await
            .map_err(BackendError::Write)
    }

    /// Runs statements and waits for every reply still owed; an error the
    /// server raised for them fails the call (the backend is then suspect).
    /// Bounded by [`Link::command_timeout`]: a server that stops answering
    /// (frozen, or its network gone without a reset) must not hold a pool
    /// place or a client forever; past it the link is broken, so whoever
    /// holds it closes it.
    pub async fn run_queries(
        &mut self,
        queries: &[&str],
        what: PoolerStatement,
    ) -> Result<(), BackendError> {
        let timeout = self.command_timeout;
        match tokio::time::timeout(timeout, self.run_untimed(queries)).await {
            Ok(done) => done,
            Err(_) => {
                self.ledger
                    .break_with(format!("no answer to {what} within server_command_timeout"));
                Err(BackendError::CommandTimeout { what, timeout })
            }
        }
    }

    async fn run_untimed(&mut self, queries: &[&str]) -> Result<(), BackendError> {
        self.queue_queries(queries)?;
        self.write_queued().await?;
        self.drain().await?;
        match self.ledger.take_pooler_error() {
            Some(body) => Err(BackendError::Server(parse_error_fields(&body))),
            None => Ok(()),
        }
    }

    /// Reads until nothing is owed, dropping every reply: the client they
    /// were for is gone, or they answer the pooler's own statements. A COPY
    /// FROM STDIN that starts meanwhile cannot be fed, so it ends the drain
    /// with an error.
    pub async fn drain(&mut self) -> Result<(), BackendError> {
        self.drain_keeping(None).await
    }

    /// [`Link::drain`], keeping the DataRow bodies in `rows` when given (the
    /// pooler's own query reads its answer).
    pub(super) async fn drain_keeping(
        &mut self,
        mut rows: Option<&mut Vec<Vec<u8>>>,
    ) -> Result<(), BackendError> {
        self.write_queued().await?;
        let mut fixes = Vec::new();
        let mut sink = Vec::new();
        let keep = rows.is_some();
        let inspect = |t| {
            matches!(
                t,
                be::READY_FOR_QUERY | be::PARAMETER_STATUS | be::ERROR_RESPONSE
            ) || (keep && t == be::DATA_ROW)
        };
        while !self.ledger.owed().is_empty() || self.has_unread() {
            let mut pos = 0;
            loop {
                self.ledger.take_due(&mut sink, &mut fixes);
                sink.clear();
                let data = self.buf.readable();
                let step = self
                    .scanner
                    .step_capped(data, pos, inspect, MAX_INSPECTED)
                    .map_err(|v| BackendError::Protocol(v.to_string()))?;
                let (tag, body, end) = match step {
                    Step::NeedMore => break,
                    Step::Continuation { end } => {
                        pos = end;
                        continue;
                    }
                    Step::Whole { tag, start, end } => (tag, Some(&data[start + 5..end]), end),
                    Step::Header { tag, end, .. } => (tag, None, end),
                };
                let d = self.ledger.on_message(tag, body, &mut fixes);
                fixes.clear();
                d.map_err(BackendError::Protocol)?;
                if let (Some(rows), be::DATA_ROW) = (rows.as_deref_mut(), tag) {
                    // Only rows the inspection cap let through whole.
                    let body = body.ok_or_else(|| {
                        BackendError::Protocol(
                            "a row of the pooler's own query is too large".into(),
                        )
                    })?;
                    rows.push(body.to_vec());
                }
                if tag == be::COPY_IN_RESPONSE {
                    self.ledger
                        .break_with("a COPY FROM STDIN started after its client left");
                    return Err(BackendError::Protocol(
                        "a COPY FROM STDIN started after its client left".into(),
                    ));
                }
                pos = end;
            }
            self.buf.consume(pos);
            if self.ledger.owed().is_empty() && !self.has_unread() {
                break;
            }
            fill(&mut self.stream, &mut self.buf).await?;
        }
        Ok(())
    }

    /// Says Terminate, as libpq does, so the server logs a clean
    /// disconnection.
    pub async fn terminate(&mut self) -> std::io::Result<()> {
        const TERMINATE: [u8; 5] = [crate::protocol::tags::fe::TERMINATE, 0, 0, 0, 4];
        self.stream.write_all(&TERMINATE).await?;
        self.stream.flush().await
    }

    /// Makes the backend fit for the next client: rolls back an open or
    /// failed transaction, then runs the reset query.
    pub async fn reset(&mut self, reset_query: &ResetQuery) -> Result<(), BackendError> {
        let mut queries: Vec<&str> = Vec::with_capacity(2);
        let mut what = PoolerStatement::Reset;
        if self.ledger.tx() != TxStatus::Idle {
            queries.push("ROLLBACK");
            what = PoolerStatement::Rollback;
        }
        if !reset_query.text.is_empty() {
            queries.push(&reset_query.text);
            what = PoolerStatement::Reset;
        }
        if !queries.is_empty() {
            self.run_queries(&queries, what).await?;
        }
        if !reset_query.text.is_empty() {
            self.ledger.after_reset(reset_query.drops_prepared);
        }
        if self.ledger.tx() != TxStatus::Idle {
            return Err(BackendError::Protocol(
                "backend still in a transaction after reset".into(),
            ));
        }
        Ok(())
    }

    /// Carries out [`Link::hand_off`] until the link is fit for reuse: Ok
    /// means put it back in the pool, Err why it must be closed. Draining is
    /// bounded by `drain_timeout` (`pool.server_drain_timeout`).
    pub async fn settle(
        &mut self,
        how: Departure,
        drain_timeout: Duration,
        reset_query: &ResetQuery,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + drain_timeout;
        let mut how = how;
        loop {
            match self.release(how) {
                HandOff::Reuse => return Ok(()),
                HandOff::Close(why) => return Err(why),
                HandOff::Drain => {
                    let gate = self.cancel.gate.clone();
                    if !gate.settled(super::CANCEL_CONFIRM_LIMIT).await {
                        return Err("a cancel request to it was not confirmed delivered".into());
                    }
                    match tokio::time::timeout_at(deadline, self.drain()).await {
                        Err(_) => {
                            return Err(format!(
                                "server still busy after server_drain_timeout ({drain_timeout:?})"
                            ))
                        }
                        Ok(Err(e)) => return Err(e.to_string()),
                        Ok(Ok(())) => {}
                    }
                }
                HandOff::Reset => {
                    if let Err(e) = self.reset(reset_query).await {
                        return Err(format!("reset failed: {e}"));
                    }
                    // Reset: clean for anyone.
                    how = Departure::SessionOver { keeps_state: false };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_error_fields_and_tolerates_garbage() {
        let body = b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed\0\0";
        let e = parse_error_fields(body);
        assert_eq!(e.severity, "FATAL");
        assert_eq!(e.code, "28P01");
        assert_eq!(e.message, "password authentication failed");
        let e = parse_error_fields(b"Cabc");
        assert_eq!(e.code, "XX000");
        let e = parse_error_fields(b"");
        assert_eq!(e.message, "");
        assert_eq!((e.severity.as_str(), e.code.as_str()), ("ERROR", "XX000"));
        // V, never localised, wins over S wherever it comes; S alone (before 9.6) counts.
        let e = parse_error_fields(b"VERROR\0SFEHLER\0\0");
        assert_eq!(e.severity, "ERROR");
        let e = parse_error_fields(b"SSCHWERWIEGEND\0C57P01\0\0");
        assert_eq!(e.severity, "SCHWERWIEGEND");
        // A cut-off body keeps its complete fields.
        let e = parse_error_fields(b"C22012\0Mdivision by ze");
        assert_eq!((e.code.as_str(), e.message.as_str()), ("22012", ""));
    }

    #[test]
    fn a_reset_query_is_read_once_for_what_it_drops() {
        let drops = |q: &str| ResetQuery::new(q.to_string()).drops_prepared;
        assert!(
            drops("DISCARD ALL") && drops("deallocate all") && drops("RESET ALL; DEALLOCATE ALL")
        );
        assert!(!drops("") && !drops("RESET ALL") && !drops("DISCARD PLANS"));
        assert_eq!(ResetQuery::new("DISCARD ALL".into()).text(), "DISCARD ALL");
    }
}
