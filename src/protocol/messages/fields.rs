//! The fields of an ErrorResponse or NoticeResponse.

use crate::protocol::frontend::split_cstr;
use crate::protocol::tags::field;

/// The fields of an ErrorResponse or NoticeResponse body; works on a truncated body
/// (a prefix of an oversized message) too, yielding the fields that are complete.
///
/// A field is a code byte and a NUL-terminated value; a code of 0 ends the
/// list. Reading stops at the terminator or at the first field whose value
/// has no NUL, so a cut-off body yields what it holds in full and nothing
/// torn. [`Fields::is_well_formed`] says whether the body was whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields<'a> {
    body: &'a [u8],
}

impl<'a> Fields<'a> {
    /// Fields of `body`; never fails, see the type's documentation.
    pub fn new(body: &'a [u8]) -> Self {
        Fields { body }
    }

    /// The value of field `code`. When a code repeats, the last one wins,
    /// as in libpq (`PQresultErrorField`) and postgres-protocol's `DbError`.
    pub fn get(&self, code: u8) -> Option<&'a [u8]> {
        self.iter()
            .filter(|&(c, _)| c == code)
            .map(|(_, v)| v)
            .last()
    }

    /// The non-localised severity (`V`) if present, else `S`.
    pub fn severity(&self) -> Option<&'a [u8]> {
        self.get(field::SEVERITY_NONLOCALIZED)
            .or_else(|| self.get(field::SEVERITY))
    }

    /// The SQLSTATE (`C`).
    pub fn sqlstate(&self) -> Option<&'a [u8]> {
        self.get(field::SQLSTATE)
    }

    /// The primary message (`M`).
    pub fn message(&self) -> Option<&'a [u8]> {
        self.get(field::MESSAGE)
    }

    /// FATAL or PANIC: the server ends the session after this message.
    pub fn is_fatal(&self) -> bool {
        matches!(self.severity(), Some(b"FATAL" | b"PANIC"))
    }

    /// The complete fields in order, up to the terminator.
    pub fn iter(&self) -> FieldIter<'a> {
        FieldIter { rest: self.body }
    }

    /// True when the body is whole and exact: complete fields, the
    /// terminating 0, and nothing after it (what libpq and
    /// postgres-protocol require of a whole message).
    pub fn is_well_formed(&self) -> bool {
        let mut it = self.iter();
        for _ in it.by_ref() {}
        it.rest == [0]
    }
}

/// Iterator over `(code, value)` pairs of [`Fields`].
#[derive(Debug, Clone)]
pub struct FieldIter<'a> {
    /// What is left: starts at a code byte, or is where reading stopped.
    rest: &'a [u8],
}

impl<'a> Iterator for FieldIter<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let (&code, after) = self.rest.split_first()?;
        if code == 0 {
            return None;
        }
        let (value, rest) = split_cstr(after)?;
        self.rest = rest;
        Some((code, value))
    }
}
