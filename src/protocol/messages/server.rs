//! The server's messages the pooler looks inside: ParameterStatus,
//! BackendKeyData, ReadyForQuery and its transaction status, and the
//! Copy*Response header. Errors name the message that was broken.

use super::reader::{from_server, Reader};
use crate::protocol::tags::tx;
use crate::protocol::Violation;

/// A ParameterStatus message from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParameterStatus<'a> {
    /// Parameter name.
    pub name: &'a [u8],
    /// Its new value.
    pub value: &'a [u8],
}

impl<'a> ParameterStatus<'a> {
    /// Reads a ParameterStatus body: two strings, nothing after.
    pub fn parse(body: &'a [u8]) -> Result<Self, Violation> {
        let read = || {
            let mut r = Reader::new(body);
            let name = r.cstr()?;
            let value = r.cstr()?;
            r.end()?;
            Ok(ParameterStatus { name, value })
        };
        read().map_err(|e| from_server("ParameterStatus", e))
    }
}

/// A BackendKeyData message from the server: the key a CancelRequest for
/// this session must quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendKeyData {
    /// Process id of the server backend.
    pub pid: i32,
    /// Its secret key.
    pub secret: i32,
}

impl BackendKeyData {
    /// Reads a BackendKeyData body of protocol 3.0: two 32-bit words,
    /// nothing after (libpq checks the message length is used exactly).
    pub fn parse(body: &[u8]) -> Result<Self, Violation> {
        let read = || {
            let mut r = Reader::new(body);
            let pid = r.i32()?;
            let secret = r.i32()?;
            r.end()?;
            Ok(BackendKeyData { pid, secret })
        };
        read().map_err(|e| from_server("BackendKeyData", e))
    }
}

/// Transaction status of ReadyForQuery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            tx::IDLE => Some(TxStatus::Idle),
            tx::IN_TRANSACTION => Some(TxStatus::InTransaction),
            tx::FAILED => Some(TxStatus::Failed),
            _ => None,
        }
    }

    /// The status byte.
    pub fn as_byte(self) -> u8 {
        match self {
            TxStatus::Idle => tx::IDLE,
            TxStatus::InTransaction => tx::IN_TRANSACTION,
            TxStatus::Failed => tx::FAILED,
        }
    }
}

/// A ReadyForQuery message from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyForQuery {
    /// The transaction status it reports.
    pub status: TxStatus,
}

impl ReadyForQuery {
    /// Reads a ReadyForQuery body: exactly one byte, `I`, `T` or `E`.
    ///
    /// Stricter than libpq, which files an unknown byte as
    /// `PQTRANS_UNKNOWN`: the pooler decides from this byte whether a
    /// backend may go back to the pool, and an unknown state must not be
    /// taken for idle.
    pub fn parse(body: &[u8]) -> Result<Self, Violation> {
        let [b] = body else {
            return Err(Violation(format!(
                "malformed ReadyForQuery from the server: {} bytes, expected 1",
                body.len()
            )));
        };
        let status = TxStatus::from_byte(*b).ok_or_else(|| {
            Violation(format!(
                "malformed ReadyForQuery from the server: invalid transaction status {b}"
            ))
        })?;
        Ok(ReadyForQuery { status })
    }
}

/// CopyInResponse / CopyOutResponse / CopyBothResponse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyResponse {
    /// The overall format is binary (1) rather than text (0).
    pub binary: bool,
    /// Number of columns (each with a format code in the body).
    pub columns: u16,
}

impl CopyResponse {
    /// Reads a Copy*Response body: format byte, column count, one 16-bit
    /// format code per column, nothing after.
    ///
    /// Stricter than libpq, which stores whatever codes it is sent: a
    /// format that is neither 0 (text) nor 1 (binary) is refused, since no
    /// client could decode the data that would follow.
    pub fn parse(body: &[u8]) -> Result<Self, Violation> {
        let read = || {
            let mut r = Reader::new(body);
            let format = r.byte()?;
            let columns = r.u16()?;
            let codes = r.bytes(usize::from(columns) * 2)?;
            r.end()?;
            let binary = match format {
                0 => false,
                1 => true,
                _ => return Err(Violation(format!("invalid overall format {format}"))),
            };
            for code in codes.chunks_exact(2) {
                if code != [0, 0] && code != [0, 1] {
                    let code = u16::from_be_bytes([code[0], code[1]]);
                    return Err(Violation(format!("invalid column format {code}")));
                }
            }
            Ok(CopyResponse { binary, columns })
        };
        read().map_err(|e| from_server("CopyResponse", e))
    }
}
