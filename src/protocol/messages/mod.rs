//! Typed, borrowed views of the message bodies the pooler looks inside.
//!
//! Each view takes a message BODY (the bytes after the 1-byte type and the
//! 4-byte length) and borrows from it: nothing is copied or allocated on the
//! success path, no index is unchecked, and a malformed body is a
//! [`Violation`], never a panic. Client messages are checked the way
//! PostgreSQL's `postgres.c` reads them with `pqformat.c`, and their errors
//! carry PostgreSQL's own wording, because the pooler may answer a client
//! with that text in place of the server. Server messages are checked the way
//! libpq reads them (every byte of the declared length used); their errors
//! say which server message was broken, since they end up in the pooler's
//! log rather than in front of a client.

use super::tags::{target, tx};
use super::Violation;

mod fields;
#[cfg(test)]
mod tests;

pub use fields::{FieldIter, Fields};

/// Statement or portal, as Describe and Close name them ('S' / 'P').
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// `S`: a prepared statement.
    Statement,
    /// `P`: a portal.
    Portal,
}

impl Target {
    /// Decodes the subtype byte.
    pub fn from_byte(b: u8) -> Option<Target> {
        match b {
            target::STATEMENT => Some(Target::Statement),
            target::PORTAL => Some(Target::Portal),
            _ => None,
        }
    }

    /// The subtype byte.
    pub fn as_byte(self) -> u8 {
        match self {
            Target::Statement => target::STATEMENT,
            Target::Portal => target::PORTAL,
        }
    }
}

/// A cursor over a body with `pqformat.c`'s checks and wording.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(body: &'a [u8]) -> Self {
        Reader { rest: body }
    }

    /// `pq_getmsgbyte`.
    fn byte(&mut self) -> Result<u8, Violation> {
        let (&b, rest) = self
            .rest
            .split_first()
            .ok_or_else(|| Violation::new("no data left in message"))?;
        self.rest = rest;
        Ok(b)
    }

    /// `pq_copymsgbytes` / `pq_getmsgbytes`.
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Violation> {
        if n > self.rest.len() {
            return Err(Violation::new("insufficient data left in message"));
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    /// `pq_getmsgint(msg, 2)`.
    fn u16(&mut self) -> Result<u16, Violation> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// `pq_getmsgint(msg, 4)`, as the signed value PostgreSQL stores it in.
    fn i32(&mut self) -> Result<i32, Violation> {
        let b = self.bytes(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `pq_getmsgstring`: the string must end with a NUL inside the message.
    fn cstr(&mut self) -> Result<&'a [u8], Violation> {
        let (s, rest) =
            split_nul(self.rest).ok_or_else(|| Violation::new("invalid string in message"))?;
        self.rest = rest;
        Ok(s)
    }

    /// `pq_getmsgend`: every byte was used.
    fn end(&self) -> Result<(), Violation> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Violation::new("invalid message format"))
        }
    }
}

/// Splits off a NUL-terminated string (the NUL dropped).
fn split_nul(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let nul = b.iter().position(|&c| c == 0)?;
    Some((b.get(..nul)?, b.get(nul + 1..)?))
}

/// Names the server message a [`Reader`] error came from.
fn from_server(what: &str, e: Violation) -> Violation {
    Violation(format!("malformed {what} from the server: {}", e.0))
}

/// A Parse message: statement name, query and parameter types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parse<'a> {
    /// Statement name; empty for the unnamed statement.
    pub name: &'a [u8],
    /// Query text, without its NUL.
    pub query: &'a [u8],
    /// The query's NUL and the parameter-type list: everything after the name's NUL
    /// (what the pooler re-sends under its own name).
    pub definition: &'a [u8],
    /// Number of parameter types given.
    pub param_types: u16,
}

impl<'a> Parse<'a> {
    /// Reads a whole Parse body, as `exec_parse_message`'s caller does:
    /// name, query, a 16-bit count and exactly that many 32-bit type OIDs.
    ///
    /// More lenient than PostgreSQL in one way: the strings are not checked
    /// against the client encoding (`pg_client_to_server`); the server does
    /// that when the message reaches it.
    // Every view is read with `parse`; Parse is no exception to that.
    #[allow(clippy::self_named_constructors)]
    pub fn parse(body: &'a [u8]) -> Result<Parse<'a>, Violation> {
        let mut r = Reader::new(body);
        let name = r.cstr()?;
        let definition = r.rest;
        let query = r.cstr()?;
        let param_types = r.u16()?;
        r.bytes(usize::from(param_types) * 4)?;
        r.end()?;
        Ok(Parse {
            name,
            query,
            definition,
            param_types,
        })
    }

    /// The statement name from the first bytes of a Parse body too large to buffer whole;
    /// Ok(None) if the name's NUL is not in `prefix` yet.
    ///
    /// A prefix cannot be refused (whatever follows may still make a valid
    /// body), so this never fails today; it returns a `Result` so a caller
    /// handles it as it handles [`Parse::parse`].
    pub fn name_in_prefix(prefix: &'a [u8]) -> Result<Option<&'a [u8]>, Violation> {
        Ok(split_nul(prefix).map(|(name, _)| name))
    }

    /// The `i`th parameter type OID, if the message gives that many.
    pub fn param_type(&self, i: u16) -> Option<u32> {
        let types = self.definition.get(self.query.len() + 3..)?;
        let at = usize::from(i) * 4;
        let b = types.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The names at the start of a Bind message; the parameters are not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindHead<'a> {
    /// Portal name; empty for the unnamed portal.
    pub portal: &'a [u8],
    /// Statement name; empty for the unnamed statement.
    pub statement: &'a [u8],
    /// Offset in the body just past the statement name's NUL.
    pub rest_at: usize,
}

impl<'a> BindHead<'a> {
    /// From a whole body or a prefix of one; Ok(None) if both names' NULs are not in `prefix` yet.
    ///
    /// Bind is the one message that may be larger than the pooler buffers,
    /// and only its names matter to it, so the parameter part is left to
    /// the server, which checks it. For the same reason as
    /// [`Parse::name_in_prefix`] this never fails today.
    pub fn parse(prefix: &'a [u8]) -> Result<Option<BindHead<'a>>, Violation> {
        let Some((portal, after)) = split_nul(prefix) else {
            return Ok(None);
        };
        let Some((statement, _)) = split_nul(after) else {
            return Ok(None);
        };
        Ok(Some(BindHead {
            portal,
            statement,
            rest_at: portal.len() + statement.len() + 2,
        }))
    }
}

/// Reads the subtype byte and name of a Describe or Close body, in
/// PostgreSQL's order: the string and the end are checked before the subtype.
fn target_and_name<'a>(body: &'a [u8], what: &str) -> Result<(Target, &'a [u8]), Violation> {
    let mut r = Reader::new(body);
    let kind = r.byte()?;
    let name = r.cstr()?;
    r.end()?;
    let target = Target::from_byte(kind)
        .ok_or_else(|| Violation(format!("invalid {what} message subtype {kind}")))?;
    Ok((target, name))
}

/// A Describe message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Describe<'a> {
    /// What is described.
    pub target: Target,
    /// Its name; empty for the unnamed one.
    pub name: &'a [u8],
}

impl<'a> Describe<'a> {
    /// Reads a Describe body: subtype, name, nothing after.
    pub fn parse(body: &'a [u8]) -> Result<Self, Violation> {
        let (target, name) = target_and_name(body, "DESCRIBE")?;
        Ok(Describe { target, name })
    }
}

/// A Close message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close<'a> {
    /// What is closed.
    pub target: Target,
    /// Its name; empty for the unnamed one.
    pub name: &'a [u8],
}

impl<'a> Close<'a> {
    /// Reads a Close body: subtype, name, nothing after.
    pub fn parse(body: &'a [u8]) -> Result<Self, Violation> {
        let (target, name) = target_and_name(body, "CLOSE")?;
        Ok(Close { target, name })
    }
}

/// An Execute message: portal name and row limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Execute<'a> {
    /// Portal name; empty for the unnamed portal.
    pub portal: &'a [u8],
    /// Row limit; zero or less means no limit, as PostgreSQL reads it.
    pub max_rows: i32,
}

impl<'a> Execute<'a> {
    /// Reads an Execute body: portal name, a 32-bit limit, nothing after.
    pub fn parse(body: &'a [u8]) -> Result<Self, Violation> {
        let mut r = Reader::new(body);
        let portal = r.cstr()?;
        let max_rows = r.i32()?;
        r.end()?;
        Ok(Execute { portal, max_rows })
    }
}

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
