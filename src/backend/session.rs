//! Work the pooler itself does on a backend between clients: running the
//! reset query and applying a client's session parameters.

use tokio::io::{AsyncRead, AsyncWriteExt};

use super::{Backend, BackendError, ParamSet, ServerError, MAX_INSPECTED};
use crate::protocol::frontend::split_cstr;
use crate::protocol::FrameBuf;
use crate::stream::read_tagged;

/// Transaction status from ReadyForQuery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxStatus {
    /// `I`: not in a transaction.
    Idle,
    /// `T`: in a transaction block.
    InTransaction,
    /// `E`: in a failed transaction block.
    Failed,
}

impl TxStatus {
    /// Decodes the status byte.
    pub fn from_byte(b: u8) -> Option<TxStatus> {
        match b {
            b'I' => Some(TxStatus::Idle),
            b'T' => Some(TxStatus::InTransaction),
            b'E' => Some(TxStatus::Failed),
            _ => None,
        }
    }

    /// The status byte.
    pub fn as_byte(self) -> u8 {
        match self {
            TxStatus::Idle => b'I',
            TxStatus::InTransaction => b'T',
            TxStatus::Failed => b'E',
        }
    }
}

/// Reads severity, SQLSTATE and message out of an ErrorResponse body.
pub fn parse_error_fields(mut body: &[u8]) -> ServerError {
    let mut e = ServerError {
        severity: "ERROR".into(),
        code: "XX000".into(),
        message: String::new(),
    };
    while let Some((&code, rest)) = body.split_first() {
        if code == 0 {
            break;
        }
        let Some((value, after)) = split_cstr(rest) else {
            break;
        };
        let value = String::from_utf8_lossy(value).into_owned();
        match code {
            b'V' => e.severity = value,
            b'S' if e.severity == "ERROR" => e.severity = value,
            b'C' => e.code = value,
            b'M' => e.message = value,
            _ => {}
        }
        body = after;
    }
    e
}

/// Reads the replies to `count` queries the pooler sent itself, up to each
/// one's ReadyForQuery, keeping `params` and `tx` current. `count` goes down
/// as each reply completes, so a caller that is cancelled midway still knows
/// how many are left. Returns the first error the server reported, if any;
/// the replies never reach a client.
pub async fn read_replies<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut FrameBuf,
    params: &mut ParamSet,
    tx: &mut TxStatus,
    count: &mut usize,
) -> Result<Option<ServerError>, BackendError> {
    let mut first_error = None;
    while *count > 0 {
        let f = read_tagged(reader, buf, MAX_INSPECTED).await?;
        let body = buf.body(&f);
        match f.tag {
            b'Z' if body.len() == 1 => {
                *tx = TxStatus::from_byte(body[0])
                    .ok_or_else(|| BackendError::Protocol("invalid ReadyForQuery status".into()))?;
                *count -= 1;
            }
            b'S' => {
                params.apply_status(body);
            }
            b'E' => {
                if first_error.is_none() {
                    first_error = Some(parse_error_fields(body));
                }
            }
            // Row data, command tags, notices: the pooler's own queries have no reader.
            b'T' | b'D' | b'C' | b'I' | b'N' | b'A' => {}
            // COPY started by a reset query would leave the backend in a state
            // we cannot drive; any other message is a protocol doubt.
            other => {
                buf.consume(f.total);
                return Err(BackendError::Protocol(format!(
                    "unexpected message type \"{}\" while running a pooler query",
                    other.escape_ascii()
                )));
            }
        }
        buf.consume(f.total);
    }
    Ok(first_error)
}

impl Backend {
    /// Sends simple-protocol statements as separate Query messages in one
    /// write, without waiting; their replies are read by [`Backend::run_queries`]
    /// or at the start of the relay, never by a client.
    pub async fn send_queries(&mut self, queries: &[&str]) -> Result<(), BackendError> {
        self.queue_queries(queries)?;
        let out = std::mem::take(&mut self.queued);
        self.stream
            .write_all(&out)
            .await
            .map_err(BackendError::Write)
    }

    /// Queues statements to go out in front of the next bytes written to the
    /// server (the relay sends them with the client's first message, in one
    /// write); their replies are read by the relay or [`Backend::run_queries`].
    pub fn queue_queries(&mut self, queries: &[&str]) -> Result<(), BackendError> {
        if self.pending_replies == 0 && (!self.scanner.at_boundary() || !self.buf.is_empty()) {
            return Err(BackendError::Protocol(
                "backend has unread data from a previous client".into(),
            ));
        }
        for q in queries {
            postgres_protocol::message::frontend::query(q, &mut self.queued)
                .map_err(|e| BackendError::Protocol(e.to_string()))?;
        }
        self.pending_replies += queries.len();
        Ok(())
    }

    /// Runs statements and waits for every reply (and any still pending); the
    /// first error fails the call (the backend is then suspect).
    pub async fn run_queries(&mut self, queries: &[&str]) -> Result<(), BackendError> {
        self.send_queries(queries).await?;
        self.drain_replies().await
    }

    /// Reads the replies to every statement the pooler sent and not yet read.
    pub async fn drain_replies(&mut self) -> Result<(), BackendError> {
        let error = read_replies(
            &mut self.stream,
            &mut self.buf,
            &mut self.params,
            &mut self.tx,
            &mut self.pending_replies,
        )
        .await?;
        match error {
            Some(e) => Err(BackendError::Server(e)),
            None => Ok(()),
        }
    }

    /// Makes the backend fit for the next client: rolls back an open or failed
    /// transaction, then runs the reset query. Any error means the caller must
    /// close the backend instead of pooling it.
    pub async fn reset(&mut self, reset_query: &str) -> Result<(), BackendError> {
        let mut queries: Vec<&str> = Vec::with_capacity(2);
        if self.tx != TxStatus::Idle {
            queries.push("ROLLBACK");
        }
        if !reset_query.is_empty() {
            queries.push(reset_query);
        }
        if !queries.is_empty() {
            self.run_queries(&queries).await?;
        }
        if !reset_query.is_empty() {
            // Whatever the pooler SET for a client is gone or is the
            // server's default again.
            self.extras = ParamSet::default();
            if crate::protocol::sql::classify(reset_query.as_bytes(), &|_| true).drops_prepared {
                self.prepared.clear();
            }
        }
        if self.tx != TxStatus::Idle {
            return Err(BackendError::Protocol(
                "backend still in a transaction after reset".into(),
            ));
        }
        Ok(())
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
    }

    #[test]
    fn tx_status_round_trips() {
        for b in [b'I', b'T', b'E'] {
            assert_eq!(TxStatus::from_byte(b).map(TxStatus::as_byte), Some(b));
        }
        assert_eq!(TxStatus::from_byte(b'x'), None);
    }
}
