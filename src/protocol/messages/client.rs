//! The client's extended-query messages the pooler looks inside: Parse,
//! the head of Bind, Describe, Close and Execute, and the statement/portal
//! subtype they name. Errors carry PostgreSQL's wording.

use super::reader::Reader;
use crate::protocol::frontend::split_cstr;
use crate::protocol::tags::target;
use crate::protocol::Violation;

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
        Ok(split_cstr(prefix).map(|(name, _)| name))
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
        let Some((portal, after)) = split_cstr(prefix) else {
            return Ok(None);
        };
        let Some((statement, _)) = split_cstr(after) else {
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
