//! What the raw client reads back: one reply, an ErrorResponse's fields, a
//! login's outcome and a simple query's result.

use std::collections::BTreeMap;

/// One thing read from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A framed message: type byte and body (without the length word).
    Msg(u8, Vec<u8>),
    /// A single unframed byte (the answer to SSLRequest / GSSENCRequest).
    Byte(u8),
    /// Bytes that do not frame as a v3 message (length < 4 or > 16 MiB),
    /// with whatever else arrived until the close.
    Invalid(Vec<u8>),
    /// Orderly close (EOF) or reset by the peer.
    Closed,
    /// Nothing arrived in time.
    Timeout,
}

impl Reply {
    /// The ErrorResponse fields when this is an ErrorResponse.
    pub fn error(&self) -> Option<ErrorFields> {
        match self {
            Reply::Msg(b'E', body) => Some(ErrorFields::parse(body)),
            _ => None,
        }
    }

    /// A short description that is equal for equal behaviour: message type
    /// plus, for errors, severity/SQLSTATE/message.
    pub fn summary(&self) -> String {
        match self {
            Reply::Msg(b'E', body) => {
                let e = ErrorFields::parse(body);
                format!("ErrorResponse {} {} {:?}", e.severity, e.code, e.message)
            }
            Reply::Msg(b'v', body) => format!("NegotiateProtocolVersion {body:?}"),
            Reply::Msg(b'R', body) => format!("Authentication {:?}", &body[..4.min(body.len())]),
            Reply::Msg(t, _) => format!("Msg {:?}", *t as char),
            Reply::Byte(b) => format!("Byte {:?}", *b as char),
            Reply::Invalid(bytes) => format!("Invalid {:?}", String::from_utf8_lossy(bytes)),
            Reply::Closed => "Closed".to_string(),
            Reply::Timeout => "Timeout".to_string(),
        }
    }
}

/// The fields of an ErrorResponse or NoticeResponse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFields {
    /// 'V' (non-localized severity) when present, else 'S'.
    pub severity: String,
    pub code: String,
    pub message: String,
    pub fields: BTreeMap<char, String>,
}

impl ErrorFields {
    pub fn parse(body: &[u8]) -> ErrorFields {
        let mut fields = BTreeMap::new();
        let mut rest = body;
        while let Some((&kind, tail)) = rest.split_first() {
            if kind == 0 {
                break;
            }
            let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
            fields.insert(
                kind as char,
                String::from_utf8_lossy(&tail[..end]).into_owned(),
            );
            rest = tail.get(end + 1..).unwrap_or(&[]);
        }
        let get = |k: char| fields.get(&k).cloned().unwrap_or_default();
        ErrorFields {
            severity: fields.get(&'V').cloned().unwrap_or_else(|| get('S')),
            code: get('C'),
            message: get('M'),
            fields,
        }
    }
}

/// Why a raw login did not reach ReadyForQuery.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    Error(ErrorFields),
    Unexpected(Reply),
    Auth(String),
}

impl Failure {
    pub fn error(&self) -> Option<&ErrorFields> {
        match self {
            Failure::Error(e) => Some(e),
            _ => None,
        }
    }
}

/// What a successful raw login saw.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// ParameterStatus values, by name.
    pub params: BTreeMap<String, String>,
    /// The ParameterStatus messages in arrival order (name, value).
    pub param_order: Vec<(String, String)>,
    /// BackendKeyData (process id, secret key).
    pub key: Option<(i32, i32)>,
    /// Transaction status byte of the ReadyForQuery.
    pub status: u8,
    /// NegotiateProtocolVersion: (newest minor version, unrecognized options).
    pub negotiate: Option<(i32, Vec<String>)>,
    /// Authentication request codes seen (0 = ok, 3 = cleartext, 5 = md5, 10 = SASL).
    pub auth_codes: Vec<i32>,
}

/// The result of one simple query.
#[derive(Debug, Clone, Default)]
pub struct QueryResult {
    /// Column names of the last RowDescription.
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
    pub tags: Vec<String>,
    pub error: Option<ErrorFields>,
    pub notices: Vec<ErrorFields>,
    /// ParameterStatus messages that arrived during the query.
    pub params: Vec<(String, String)>,
    pub status: u8,
}

impl QueryResult {
    /// First column of the first row.
    pub fn scalar(&self) -> Option<String> {
        self.rows.first().and_then(|r| r.first().cloned().flatten())
    }

    /// The values of the column named `name`, one per row; panics when there
    /// is no such column.
    pub fn column(&self, name: &str) -> Vec<Option<String>> {
        let i = self.columns.iter().position(|c| c == name);
        let i = i.unwrap_or_else(|| panic!("no column {name} in {:?}", self.columns));
        self.rows.iter().map(|r| r[i].clone()).collect()
    }
}
