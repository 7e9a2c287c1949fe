//! Messages the pooler writes in the role of a server.

use bytes::{BufMut, BytesMut};

use super::messages::TxStatus;
use super::tags::{auth, be, field as code};

/// ErrorResponse / NoticeResponse severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The statement failed; the session goes on.
    Error,
    /// The session ends.
    Fatal,
    /// Informational (NoticeResponse).
    Notice,
}

impl Severity {
    /// The non-localized spelling PostgreSQL sends in both `S` and `V`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "ERROR",
            Severity::Fatal => "FATAL",
            Severity::Notice => "NOTICE",
        }
    }
}

/// An error as a client will see it: severity, SQLSTATE, message, and optional detail/hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgError {
    /// Severity.
    pub severity: Severity,
    /// Five-character SQLSTATE.
    pub code: &'static str,
    /// Primary message.
    pub message: String,
    /// Optional detail.
    pub detail: Option<String>,
    /// Optional hint.
    pub hint: Option<String>,
}

impl PgError {
    /// A FATAL error.
    pub fn fatal(code: &'static str, message: impl Into<String>) -> Self {
        PgError {
            severity: Severity::Fatal,
            code,
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    /// An ERROR (the session survives).
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        PgError {
            severity: Severity::Error,
            ..PgError::fatal(code, message)
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a detail line.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Appends the ErrorResponse (or NoticeResponse for notices) to `buf`.
    pub fn encode(&self, buf: &mut BytesMut) {
        let tag = if self.severity == Severity::Notice {
            be::NOTICE_RESPONSE
        } else {
            be::ERROR_RESPONSE
        };
        message(buf, tag, |b| {
            field(b, code::SEVERITY, self.severity.as_str());
            field(b, code::SEVERITY_NONLOCALIZED, self.severity.as_str());
            field(b, code::SQLSTATE, self.code);
            field(b, code::MESSAGE, &self.message);
            if let Some(d) = &self.detail {
                field(b, code::DETAIL, d);
            }
            if let Some(h) = &self.hint {
                field(b, code::HINT, h);
            }
            b.put_u8(0);
        });
    }
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} ({})",
            self.severity.as_str(),
            self.message,
            self.code
        )
    }
}

/// Field of an ErrorResponse; strings are NUL-terminated and must not contain NUL.
fn field(b: &mut BytesMut, code: u8, value: &str) {
    b.put_u8(code);
    put_cstr(b, value);
}

/// Writes a C string, dropping interior NULs a peer might have smuggled in.
fn put_cstr(b: &mut BytesMut, s: &str) {
    // A login writes a dozen of these, short and almost never with a NUL:
    // core's word-at-a-time search, then one copy. A byte-by-byte split
    // cost more than the rest of the reply, and memchr's vector setup
    // as much again (callgrind).
    let bytes = s.as_bytes();
    if bytes.contains(&0) {
        for run in bytes.split(|&c| c == 0) {
            b.extend_from_slice(run);
        }
    } else {
        b.extend_from_slice(bytes);
    }
    b.put_u8(0);
}

/// Writes `tag`, a length word, and the body produced by `f`, fixing up the length.
fn message(buf: &mut BytesMut, tag: u8, f: impl FnOnce(&mut BytesMut)) {
    buf.put_u8(tag);
    let len_at = buf.len();
    buf.put_u32(0);
    f(buf);
    let len = (buf.len() - len_at) as u32;
    buf[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
}

/// A protocol-2 style error (`E`, text, NUL), the only kind a 2.0 client can
/// read; PostgreSQL answers a 2.0 startup packet this way.
pub fn v2_error(buf: &mut BytesMut, message: &str) {
    // Protocol 2.0's ErrorResponse has the same type byte as 3.0's.
    buf.put_u8(be::ERROR_RESPONSE);
    put_cstr(buf, &format!("FATAL:  {message}\n"));
}

/// AuthenticationOk.
pub fn auth_ok(buf: &mut BytesMut) {
    message(buf, be::AUTHENTICATION, |b| b.put_u32(auth::OK));
}

/// AuthenticationCleartextPassword.
pub fn auth_cleartext(buf: &mut BytesMut) {
    message(buf, be::AUTHENTICATION, |b| {
        b.put_u32(auth::CLEARTEXT_PASSWORD)
    });
}

/// AuthenticationMD5Password with a per-connection salt.
pub fn auth_md5(buf: &mut BytesMut, salt: [u8; 4]) {
    message(buf, be::AUTHENTICATION, |b| {
        b.put_u32(auth::MD5_PASSWORD);
        b.put_slice(&salt);
    });
}

/// AuthenticationSASL offering the given mechanisms.
pub fn auth_sasl(buf: &mut BytesMut, mechanisms: &[&str]) {
    message(buf, be::AUTHENTICATION, |b| {
        b.put_u32(auth::SASL);
        for m in mechanisms {
            put_cstr(b, m);
        }
        b.put_u8(0);
    });
}

/// AuthenticationSASLContinue.
pub fn auth_sasl_continue(buf: &mut BytesMut, data: &[u8]) {
    message(buf, be::AUTHENTICATION, |b| {
        b.put_u32(auth::SASL_CONTINUE);
        b.put_slice(data);
    });
}

/// AuthenticationSASLFinal.
pub fn auth_sasl_final(buf: &mut BytesMut, data: &[u8]) {
    message(buf, be::AUTHENTICATION, |b| {
        b.put_u32(auth::SASL_FINAL);
        b.put_slice(data);
    });
}

/// ParameterStatus.
pub fn parameter_status(buf: &mut BytesMut, name: &str, value: &str) {
    message(buf, be::PARAMETER_STATUS, |b| {
        put_cstr(b, name);
        put_cstr(b, value);
    });
}

/// The most bytes [`parameter_status`] writes for `name` and `value`.
pub fn parameter_status_len(name: &str, value: &str) -> usize {
    1 + 4 + name.len() + 1 + value.len() + 1
}

/// BackendKeyData.
pub fn backend_key_data(buf: &mut BytesMut, pid: i32, secret: i32) {
    message(buf, be::BACKEND_KEY_DATA, |b| {
        b.put_i32(pid);
        b.put_i32(secret);
    });
}

/// ReadyForQuery reporting `status`.
pub fn ready_for_query(buf: &mut BytesMut, status: TxStatus) {
    message(buf, be::READY_FOR_QUERY, |b| b.put_u8(status.as_byte()));
}

/// NegotiateProtocolVersion: the newest protocol version supported (as the
/// startup packet encodes it) and the options not recognised.
pub fn negotiate_protocol_version(buf: &mut BytesMut, version: u32, unrecognized: &[&str]) {
    message(buf, be::NEGOTIATE_PROTOCOL_VERSION, |b| {
        b.put_u32(version);
        b.put_u32(unrecognized.len() as u32);
        for o in unrecognized {
            put_cstr(b, o);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres_protocol::message::backend::Message;

    #[test]
    fn error_response_parses_with_postgres_protocol() {
        let mut buf = BytesMut::new();
        PgError::fatal("28P01", "password authentication failed for user \"a\0b\"")
            .with_hint("check it")
            .encode(&mut buf);
        match Message::parse(&mut buf).unwrap().unwrap() {
            Message::ErrorResponse(body) => {
                use fallible_iterator::FallibleIterator;
                let fields: Vec<(u8, String)> = body
                    .fields()
                    .map(|f| {
                        Ok((
                            f.type_(),
                            String::from_utf8_lossy(f.value_bytes()).into_owned(),
                        ))
                    })
                    .collect()
                    .unwrap();
                assert!(fields.contains(&(b'C', "28P01".into())));
                assert!(fields.contains(&(b'S', "FATAL".into())));
                assert!(fields.contains(&(
                    b'M',
                    "password authentication failed for user \"ab\"".into()
                )));
                assert!(fields.contains(&(b'H', "check it".into())));
            }
            _ => panic!("not an error response"),
        }
    }

    #[test]
    fn c_strings_drop_every_interior_nul() {
        for (s, want) in [("\0a\0\0b\0", "ab"), ("", ""), ("\0", ""), ("abc", "abc")] {
            let mut b = BytesMut::new();
            put_cstr(&mut b, s);
            assert_eq!(&b[..], [want.as_bytes(), b"\0"].concat(), "{s:?}");
        }
    }

    #[test]
    fn parameter_status_len_is_what_it_writes() {
        let mut b = BytesMut::new();
        parameter_status(&mut b, "TimeZone", "Europe/Paris");
        assert_eq!(b.len(), parameter_status_len("TimeZone", "Europe/Paris"));
    }

    #[test]
    fn startup_replies_parse() {
        let mut buf = BytesMut::new();
        auth_ok(&mut buf);
        parameter_status(&mut buf, "TimeZone", "UTC");
        backend_key_data(&mut buf, 7, -9);
        ready_for_query(&mut buf, TxStatus::Idle);
        assert!(matches!(
            Message::parse(&mut buf).unwrap(),
            Some(Message::AuthenticationOk)
        ));
        match Message::parse(&mut buf).unwrap() {
            Some(Message::ParameterStatus(p)) => {
                assert_eq!(p.name().unwrap(), "TimeZone");
                assert_eq!(p.value().unwrap(), "UTC");
            }
            _ => panic!(),
        }
        match Message::parse(&mut buf).unwrap() {
            Some(Message::BackendKeyData(k)) => {
                assert_eq!((k.process_id(), k.secret_key()), (7, -9));
            }
            _ => panic!(),
        }
        match Message::parse(&mut buf).unwrap() {
            Some(Message::ReadyForQuery(r)) => assert_eq!(r.status(), b'I'),
            _ => panic!(),
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn authentication_requests_parse() {
        let mut buf = BytesMut::new();
        auth_cleartext(&mut buf);
        auth_md5(&mut buf, [1, 2, 3, 4]);
        auth_sasl(&mut buf, &["SCRAM-SHA-256"]);
        auth_sasl_continue(&mut buf, b"r=abc");
        auth_sasl_final(&mut buf, b"v=xyz");
        assert!(matches!(
            Message::parse(&mut buf).unwrap(),
            Some(Message::AuthenticationCleartextPassword)
        ));
        match Message::parse(&mut buf).unwrap() {
            Some(Message::AuthenticationMd5Password(m)) => assert_eq!(m.salt(), [1, 2, 3, 4]),
            _ => panic!(),
        }
        match Message::parse(&mut buf).unwrap() {
            Some(Message::AuthenticationSasl(m)) => {
                use fallible_iterator::FallibleIterator;
                let names: Vec<String> =
                    m.mechanisms().map(|n| Ok(n.to_string())).collect().unwrap();
                assert_eq!(names, ["SCRAM-SHA-256"]);
            }
            _ => panic!(),
        }
        match Message::parse(&mut buf).unwrap() {
            Some(Message::AuthenticationSaslContinue(m)) => assert_eq!(m.data(), b"r=abc"),
            _ => panic!(),
        }
        match Message::parse(&mut buf).unwrap() {
            Some(Message::AuthenticationSaslFinal(m)) => assert_eq!(m.data(), b"v=xyz"),
            _ => panic!(),
        }
        assert!(buf.is_empty());
    }
}
