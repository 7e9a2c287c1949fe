//! What an idle transaction-pooling client is, as the old process hands it
//! to the new one ([`super::wire::Message::Client`], takeover version 2):
//! everything its session between transactions consists of, so the new
//! process serves its next transaction as the old one would have.
//!
//! The wire has enums of its own rather than the crate's internal ones, so
//! an internal rename cannot change the takeover protocol unnoticed; and
//! [`MovedClient::check`] refuses what the decoder accepts but no old
//! process sends (a frame is trusted no further than it is checked).

use crate::listener::Transport;
use crate::protocol::sql::Strings;
use crate::stats::AuthKind;
use serde::{Deserialize, Serialize};

/// One handed-over client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MovedClient {
    /// Its connection id on the old process (for the logs).
    pub old_id: u64,
    /// Role it logged in as.
    pub user: String,
    /// Database it asked for.
    pub database: String,
    /// How it reached the pooler.
    pub transport: Transport,
    /// Peer address or socket path, for SHOW CLIENTS.
    pub peer: String,
    /// The `application_name` of its startup packet.
    pub application_name: Option<String>,
    /// When it logged in, in ms since the Unix epoch.
    pub connected_at_ms: u64,
    /// How it authenticated (its statistics class).
    pub auth: AuthKind,
    /// Statement pooling (else transaction pooling) on the old process.
    pub statement_mode: bool,
    /// The parameters it was shown and follows (ParameterStatus), in order.
    pub params: Vec<(String, String)>,
    /// Startup parameters the server does not report, by lower-case name.
    pub startup: Vec<(String, String)>,
    /// Its SETs that lasted, by lower-case name: `SET <sql>`.
    pub session: Vec<(String, String)>,
    /// Its named prepared statements.
    pub statements: Vec<MovedStatement>,
    /// Its unnamed statement's definition (hex), if one is kept.
    pub unnamed: Option<String>,
    /// How its lexer reads backslashes (standard_conforming_strings).
    pub strings: Strings,
    /// The cancel key it was shown at login: process id.
    pub cancel_pid: i32,
    /// The cancel key it was shown at login: secret.
    pub cancel_secret: i32,
    /// The ClientKey its login lent its pool (hex), when the pool logs in
    /// to PostgreSQL with nothing else (SCRAM passthrough).
    #[serde(default)]
    pub lent_client_key: Option<String>,
}

/// A named prepared statement: the client's name and the Parse body after
/// the name (query text, NUL, parameter count and types), both in hex, as
/// either may be in any client encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MovedStatement {
    /// The client's name (hex).
    pub name: String,
    /// The definition (hex).
    pub definition: String,
}

/// A handed-over client that cannot be taken as it is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MovedError {
    /// A field that may not be empty is.
    #[error("handed-over client has an empty {0}")]
    Empty(&'static str),
    /// A hex field is not hex.
    #[error("handed-over client's {0} is not hex")]
    Hex(&'static str),
    /// A statement definition is not a Parse body.
    #[error("handed-over client's statement {0:?} has a malformed definition")]
    Definition(String),
    /// Two statements share a name.
    #[error("handed-over client names statement {0:?} twice")]
    Duplicate(String),
}

/// The checked statements of a [`MovedClient`]: (name, definition).
pub type Definitions = Vec<(Vec<u8>, Vec<u8>)>;

impl MovedClient {
    /// Checks what serde cannot, and decodes the statements: (named ones,
    /// the unnamed one).
    /// The ClientKey its pool was lent, if one came: 32 bytes, or an error.
    pub fn lent_key(&self) -> Result<Option<[u8; 32]>, MovedError> {
        let Some(h) = &self.lent_client_key else {
            return Ok(None);
        };
        let bytes = unhex(h).ok_or(MovedError::Hex("lent client key"))?;
        let key = <[u8; 32]>::try_from(bytes.as_slice())
            .map_err(|_| MovedError::Hex("lent client key"))?;
        Ok(Some(key))
    }

    pub fn check(&self) -> Result<(Definitions, Option<Vec<u8>>), MovedError> {
        if self.user.is_empty() {
            return Err(MovedError::Empty("user"));
        }
        if self.database.is_empty() {
            return Err(MovedError::Empty("database"));
        }
        let mut named = Vec::with_capacity(self.statements.len());
        for s in &self.statements {
            let name = unhex(&s.name).ok_or(MovedError::Hex("statement name"))?;
            if name.is_empty() {
                return Err(MovedError::Empty("statement name"));
            }
            let def = unhex(&s.definition).ok_or(MovedError::Hex("statement definition"))?;
            if !is_parse_body(&def) {
                return Err(MovedError::Definition(s.name.clone()));
            }
            if named.iter().any(|(n, _)| *n == name) {
                return Err(MovedError::Duplicate(s.name.clone()));
            }
            named.push((name, def));
        }
        let unnamed = match &self.unnamed {
            None => None,
            Some(h) => {
                let def = unhex(h).ok_or(MovedError::Hex("unnamed statement"))?;
                if !is_parse_body(&def) {
                    return Err(MovedError::Definition(String::new()));
                }
                Some(def)
            }
        };
        Ok((named, unnamed))
    }
}

/// `bytes` in lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The bytes of a hex string; None if it is not one.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// True when `def` reads as a Parse body after the name: a NUL-terminated
/// query, then a count of parameter types and that many 4-byte types.
fn is_parse_body(def: &[u8]) -> bool {
    let Some(nul) = def.iter().position(|&b| b == 0) else {
        return false;
    };
    let rest = &def[nul + 1..];
    let Some(count) = rest.get(..2) else {
        return false;
    };
    let n = i16::from_be_bytes([count[0], count[1]]);
    n >= 0 && rest.len() == 2 + 4 * n as usize
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> MovedClient {
        MovedClient {
            old_id: 7,
            user: "u".into(),
            database: "db".into(),
            transport: Transport::Unix,
            peer: "/tmp/.s.PGSQL.6432".into(),
            application_name: Some("app".into()),
            connected_at_ms: 1,
            auth: AuthKind::ScramPlus,
            statement_mode: false,
            params: vec![("search_path".into(), "a, b".into())],
            startup: vec![("statement_timeout".into(), "5s".into())],
            session: vec![("work_mem".into(), "work_mem = '8MB'".into())],
            statements: vec![MovedStatement {
                name: hex(b"s1"),
                definition: hex(b"SELECT $1\0\0\x01\0\0\0\x17"),
            }],
            unnamed: Some(hex(b"SELECT 1\0\0\0")),
            strings: Strings::Escaped,
            cancel_pid: 12,
            cancel_secret: -5,
            lent_client_key: Some(hex(&[7u8; 32])),
        }
    }

    #[test]
    fn a_lent_key_is_32_bytes_of_hex_or_refused() {
        let mut c = sample();
        assert_eq!(c.lent_key().unwrap(), Some([7u8; 32]));
        c.lent_client_key = None;
        assert_eq!(c.lent_key().unwrap(), None);
        for bad in ["", "zz", &hex(&[1u8; 31]), &hex(&[1u8; 33])] {
            c.lent_client_key = Some(bad.to_string());
            assert!(c.lent_key().is_err(), "{bad:?}");
        }
        // An old process that sends no key at all still parses.
        let mut v: serde_json::Value = serde_json::to_value(sample()).unwrap();
        v.as_object_mut().unwrap().remove("lent_client_key");
        let back: MovedClient = serde_json::from_value(v).unwrap();
        assert_eq!(back.lent_key().unwrap(), None);
    }

    #[test]
    fn a_sample_checks_and_hex_round_trips() {
        let c = sample();
        let (named, unnamed) = c.check().unwrap();
        assert_eq!(named[0].0, b"s1");
        assert_eq!(unnamed.as_deref(), Some(&b"SELECT 1\0\0\0"[..]));
        assert_eq!(unhex(&hex(&[0, 255, 16])), Some(vec![0, 255, 16]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("é1"), None);
    }

    #[test]
    fn what_serde_accepts_but_no_old_process_sends_is_refused() {
        type Spoil = fn(&mut MovedClient);
        let cases: Vec<(Spoil, MovedError)> = vec![
            (|c| c.user.clear(), MovedError::Empty("user")),
            (|c| c.database.clear(), MovedError::Empty("database")),
            (
                |c| c.statements[0].name = "x".into(),
                MovedError::Hex("statement name"),
            ),
            (
                |c| c.statements[0].name.clear(),
                MovedError::Empty("statement name"),
            ),
            (
                |c| c.statements[0].definition = hex(b"SELECT 1"),
                MovedError::Definition(hex(b"s1")),
            ),
            (
                |c| c.statements[0].definition = hex(b"SELECT 1\0\0\x02\0\0\0\x17"),
                MovedError::Definition(hex(b"s1")),
            ),
            (
                |c| c.statements[0].definition = hex(b"SELECT 1\0\xff\xff"),
                MovedError::Definition(hex(b"s1")),
            ),
            (
                |c| {
                    let again = c.statements[0].clone();
                    c.statements.push(again)
                },
                MovedError::Duplicate(hex(b"s1")),
            ),
            (
                |c| c.unnamed = Some("0".into()),
                MovedError::Hex("unnamed statement"),
            ),
        ];
        for (spoil, want) in cases {
            let mut c = sample();
            spoil(&mut c);
            assert_eq!(c.check().unwrap_err(), want);
        }
    }
}
