//! The cursor every view reads its body with: `pqformat.c`'s checks and
//! PostgreSQL's wording, and the prefix a server message's errors get.

use crate::protocol::frontend::split_cstr;
use crate::protocol::Violation;

/// A cursor over a body with `pqformat.c`'s checks and wording.
pub(super) struct Reader<'a> {
    /// What is left to read.
    pub(super) rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(body: &'a [u8]) -> Self {
        Reader { rest: body }
    }

    /// `pq_getmsgbyte`.
    pub(super) fn byte(&mut self) -> Result<u8, Violation> {
        let (&b, rest) = self
            .rest
            .split_first()
            .ok_or_else(|| Violation::new("no data left in message"))?;
        self.rest = rest;
        Ok(b)
    }

    /// `pq_copymsgbytes` / `pq_getmsgbytes`.
    pub(super) fn bytes(&mut self, n: usize) -> Result<&'a [u8], Violation> {
        if n > self.rest.len() {
            return Err(Violation::new("insufficient data left in message"));
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    /// `pq_getmsgint(msg, 2)`.
    pub(super) fn u16(&mut self) -> Result<u16, Violation> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// `pq_getmsgint(msg, 4)`, as the signed value PostgreSQL stores it in.
    pub(super) fn i32(&mut self) -> Result<i32, Violation> {
        let b = self.bytes(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `pq_getmsgstring`: the string must end with a NUL inside the message.
    pub(super) fn cstr(&mut self) -> Result<&'a [u8], Violation> {
        let (s, rest) =
            split_cstr(self.rest).ok_or_else(|| Violation::new("invalid string in message"))?;
        self.rest = rest;
        Ok(s)
    }

    /// `pq_getmsgend`: every byte was used.
    pub(super) fn end(&self) -> Result<(), Violation> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Violation::new("invalid message format"))
        }
    }
}

/// Names the server message a [`Reader`] error came from.
pub(super) fn from_server(what: &str, e: Violation) -> Violation {
    Violation(format!("malformed {what} from the server: {}", e.0))
}
