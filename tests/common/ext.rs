//! Extended-query protocol messages for the raw client ([`super::wire`]):
//! Parse, Bind, Describe, Execute, Close, Flush and Sync built byte by byte,
//! and a reader that collects a batch's replies up to ReadyForQuery, so a
//! test controls exactly which messages go out and sees every reply.

use std::time::Duration;

use super::wire::{data_row, message, ErrorFields, RawConn, Reply};

fn cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// Parse: statement `name` ("" = unnamed), no parameter types given.
pub fn parse(name: &str, sql: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, name);
    cstr(&mut b, sql);
    b.extend_from_slice(&0u16.to_be_bytes());
    message(b'P', &b)
}

/// Bind: portal `portal` to statement `stmt`, parameters in text format
/// (None = NULL), results in text format.
pub fn bind(portal: &str, stmt: &str, params: &[Option<&str>]) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, portal);
    cstr(&mut b, stmt);
    b.extend_from_slice(&0u16.to_be_bytes());
    b.extend_from_slice(&(params.len() as u16).to_be_bytes());
    for p in params {
        match p {
            Some(v) => {
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v.as_bytes());
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    b.extend_from_slice(&0u16.to_be_bytes());
    message(b'B', &b)
}

/// Describe: `kind` b'S' (statement) or b'P' (portal).
pub fn describe(kind: u8, name: &str) -> Vec<u8> {
    let mut b = vec![kind];
    cstr(&mut b, name);
    message(b'D', &b)
}

/// Execute `portal`, all rows.
pub fn execute(portal: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, portal);
    b.extend_from_slice(&0u32.to_be_bytes());
    message(b'E', &b)
}

/// Close: `kind` b'S' (statement) or b'P' (portal).
pub fn close(kind: u8, name: &str) -> Vec<u8> {
    let mut b = vec![kind];
    cstr(&mut b, name);
    message(b'C', &b)
}

pub fn sync() -> Vec<u8> {
    message(b'S', &[])
}

pub fn flush() -> Vec<u8> {
    message(b'H', &[])
}

/// Simple Query.
pub fn query(sql: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, sql);
    message(b'Q', &b)
}

/// Bind + Execute of the unnamed portal, for `stmt`.
pub fn bind_execute(stmt: &str, params: &[Option<&str>]) -> Vec<u8> {
    let mut m = bind("", stmt, params);
    m.extend(execute(""));
    m
}

/// What came back for one batch, up to and including ReadyForQuery.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Every message type in order (b'1', b'2', b'D', b'C', b'E', b'Z'...).
    pub tags: Vec<u8>,
    /// DataRow values, text format.
    pub rows: Vec<Vec<Option<String>>>,
    /// ErrorResponses.
    pub errors: Vec<ErrorFields>,
    /// ParameterStatus (name, value) in order.
    pub params: Vec<(String, String)>,
    /// The ReadyForQuery status byte (0 when the batch did not end).
    pub status: u8,
    /// Closed or Timeout when the batch did not end with ReadyForQuery.
    pub ended: Option<Reply>,
}

impl Batch {
    /// The message types as text, e.g. "12DCZ".
    pub fn tag_str(&self) -> String {
        self.tags.iter().map(|&t| t as char).collect()
    }

    /// The SQLSTATEs of the errors.
    pub fn codes(&self) -> Vec<String> {
        self.errors.iter().map(|e| e.code.clone()).collect()
    }

    /// First column of the first row.
    pub fn scalar(&self) -> Option<String> {
        self.rows.first().and_then(|r| r.first().cloned().flatten())
    }

    /// Message types with ParameterStatus and notices left out (their
    /// number depends on the path, not on the protocol flow).
    pub fn flow(&self) -> String {
        self.tags
            .iter()
            .filter(|t| !matches!(t, b'S' | b'N'))
            .map(|&t| t as char)
            .collect()
    }
}

/// Reads until ReadyForQuery (or close/timeout, recorded in `ended`).
pub fn read_batch(conn: &mut RawConn, timeout: Duration) -> Batch {
    read_messages(conn, timeout, |t| t == b'Z')
}

/// Reads until a message of type `stop` arrived (included), or close/timeout.
pub fn read_messages(conn: &mut RawConn, timeout: Duration, stop: impl Fn(u8) -> bool) -> Batch {
    let deadline = std::time::Instant::now() + timeout;
    let mut b = Batch::default();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match conn.read_msg(left) {
            Reply::Msg(tag, body) => {
                b.tags.push(tag);
                match tag {
                    b'D' => b.rows.push(data_row(&body)),
                    b'E' => b.errors.push(ErrorFields::parse(&body)),
                    b'S' => b.params.push(super::wire::name_value(&body)),
                    b'Z' => b.status = body.first().copied().unwrap_or(0),
                    _ => {}
                }
                if stop(tag) {
                    return b;
                }
            }
            other => {
                b.ended = Some(other);
                return b;
            }
        }
    }
}
