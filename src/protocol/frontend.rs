//! Parsing what a client sends before and during authentication. Every
//! parser takes a body already length-checked by [`super::codec`].

use super::{
    be_u32, Violation, CANCEL_REQUEST_CODE, GSSENC_REQUEST_CODE, PROTOCOL_3_0, SSL_REQUEST_CODE,
};

/// The first packet of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupRequest {
    /// SSLRequest.
    Ssl,
    /// GSSENCRequest.
    GssEnc,
    /// CancelRequest with the key from BackendKeyData.
    Cancel {
        /// Process id as the client saw it.
        pid: i32,
        /// Secret key as the client saw it.
        secret: i32,
    },
    /// A StartupMessage for protocol 3.x.
    Startup(StartupMessage),
}

/// A protocol 3.x StartupMessage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupMessage {
    /// Minor protocol version the client asked for.
    pub minor: u16,
    /// Parameters in the order sent, `_pq_.` options excluded.
    pub params: Vec<(String, String)>,
    /// `_pq_.` protocol options the client asked for (we support none).
    pub protocol_options: Vec<String>,
}

impl StartupMessage {
    /// Value of a parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a startup packet was refused; each maps to PostgreSQL's reaction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupError {
    /// Not protocol 3 (PostgreSQL: FATAL 0A000).
    #[error("unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0")]
    UnsupportedVersion {
        /// Major version asked for.
        major: u16,
        /// Minor version asked for.
        minor: u16,
    },
    /// Malformed packet (PostgreSQL: FATAL 08P01).
    #[error("{0}")]
    Malformed(Violation),
}

fn malformed(msg: &str) -> StartupError {
    StartupError::Malformed(Violation::new(msg))
}

/// Parses the body of an untagged startup packet (after its length word).
pub fn parse_startup(body: &[u8]) -> Result<StartupRequest, StartupError> {
    if body.len() < 4 {
        return Err(malformed("invalid length of startup packet"));
    }
    let code = be_u32(body);
    match code {
        SSL_REQUEST_CODE | GSSENC_REQUEST_CODE if body.len() != 4 => {
            Err(malformed("invalid length of startup packet"))
        }
        SSL_REQUEST_CODE => Ok(StartupRequest::Ssl),
        GSSENC_REQUEST_CODE => Ok(StartupRequest::GssEnc),
        CANCEL_REQUEST_CODE => {
            if body.len() != 12 {
                return Err(malformed("invalid length of cancel request packet"));
            }
            Ok(StartupRequest::Cancel {
                pid: be_u32(&body[4..]) as i32,
                secret: be_u32(&body[8..]) as i32,
            })
        }
        _ => {
            let (major, minor) = ((code >> 16) as u16, (code & 0xffff) as u16);
            if code & 0xffff_0000 != PROTOCOL_3_0 {
                return Err(StartupError::UnsupportedVersion { major, minor });
            }
            parse_params(&body[4..], minor).map(StartupRequest::Startup)
        }
    }
}

/// Parses the NUL-terminated name/value list of a StartupMessage, as PostgreSQL's
/// ProcessStartupPacket does.
fn parse_params(mut rest: &[u8], minor: u16) -> Result<StartupMessage, StartupError> {
    let mut msg = StartupMessage {
        minor,
        params: Vec::new(),
        protocol_options: Vec::new(),
    };
    if rest.last() != Some(&0) {
        return Err(malformed(
            "invalid startup packet layout: expected terminator as last byte",
        ));
    }
    loop {
        let (name, after) = split_cstr(rest).ok_or_else(|| {
            malformed("invalid startup packet layout: expected terminator as last byte")
        })?;
        if name.is_empty() {
            if !after.is_empty() {
                return Err(malformed(
                    "invalid startup packet layout: expected terminator as last byte",
                ));
            }
            break;
        }
        let (value, after) = split_cstr(after).ok_or_else(|| {
            malformed("invalid startup packet layout: expected terminator as last byte")
        })?;
        let name = utf8(name)?;
        let value = utf8(value)?;
        if let Some(opt) = name.strip_prefix("_pq_.") {
            let _ = opt;
            msg.protocol_options.push(name.to_string());
        } else {
            msg.params.push((name.to_string(), value.to_string()));
        }
        rest = after;
    }
    Ok(msg)
}

fn utf8(b: &[u8]) -> Result<&str, StartupError> {
    std::str::from_utf8(b).map_err(|_| malformed("invalid byte sequence in startup packet"))
}

/// Splits off a NUL-terminated string.
pub fn split_cstr(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let nul = memchr::memchr(0, b)?;
    Some((&b[..nul], &b[nul + 1..]))
}

/// Body of a PasswordMessage carrying a password or md5 response: one C string.
pub fn parse_password(body: &[u8]) -> Result<&[u8], Violation> {
    match split_cstr(body) {
        Some((pw, [])) => Ok(pw),
        _ => Err(Violation::new("invalid password packet")),
    }
}

/// A SASLInitialResponse: mechanism name and the initial client response.
pub fn parse_sasl_initial(body: &[u8]) -> Result<(&str, &[u8]), Violation> {
    let bad = || Violation::new("malformed SASLInitialResponse message");
    let (mech, rest) = split_cstr(body).ok_or_else(bad)?;
    let mech = std::str::from_utf8(mech).map_err(|_| bad())?;
    if rest.len() < 4 {
        return Err(bad());
    }
    let len = be_u32(rest) as i32;
    let data = &rest[4..];
    if len < 0 || len as usize != data.len() {
        return Err(bad());
    }
    Ok((mech, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn startup(params: &[(&str, &str)], version: u32) -> Vec<u8> {
        let mut b = version.to_be_bytes().to_vec();
        for (k, v) in params {
            b.extend_from_slice(k.as_bytes());
            b.push(0);
            b.extend_from_slice(v.as_bytes());
            b.push(0);
        }
        b.push(0);
        b
    }

    #[test]
    fn parses_a_libpq_startup() {
        let body = startup(&[("user", "alice"), ("database", "app")], PROTOCOL_3_0);
        match parse_startup(&body).unwrap() {
            StartupRequest::Startup(m) => {
                assert_eq!(m.minor, 0);
                assert_eq!(m.get("user"), Some("alice"));
                assert_eq!(m.get("database"), Some("app"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn separates_protocol_options_and_minor_versions() {
        let body = startup(
            &[("user", "a"), ("_pq_.compression", "on")],
            PROTOCOL_3_0 | 2,
        );
        match parse_startup(&body).unwrap() {
            StartupRequest::Startup(m) => {
                assert_eq!(m.minor, 2);
                assert_eq!(m.protocol_options, vec!["_pq_.compression".to_string()]);
                assert_eq!(m.params.len(), 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refuses_protocol_2() {
        let body = startup(&[("user", "a")], 2 << 16);
        assert_eq!(
            parse_startup(&body),
            Err(StartupError::UnsupportedVersion { major: 2, minor: 0 })
        );
    }

    #[test]
    fn refuses_malformed_layouts() {
        let mut unterminated = PROTOCOL_3_0.to_be_bytes().to_vec();
        unterminated.extend_from_slice(b"user\0alice");
        assert!(parse_startup(&unterminated).is_err());
        let mut dangling = PROTOCOL_3_0.to_be_bytes().to_vec();
        dangling.extend_from_slice(b"user\0\0");
        assert!(parse_startup(&dangling).is_err(), "name without value");
        let mut trailing = PROTOCOL_3_0.to_be_bytes().to_vec();
        trailing.extend_from_slice(b"\0junk\0");
        assert!(parse_startup(&trailing).is_err());
        let mut bad_utf8 = PROTOCOL_3_0.to_be_bytes().to_vec();
        bad_utf8.extend_from_slice(b"user\0\xff\0\0");
        assert!(parse_startup(&bad_utf8).is_err());
        assert!(parse_startup(&[0, 0]).is_err());
        let mut ssl_long = SSL_REQUEST_CODE.to_be_bytes().to_vec();
        ssl_long.push(0);
        assert!(parse_startup(&ssl_long).is_err());
        assert!(parse_startup(&CANCEL_REQUEST_CODE.to_be_bytes()).is_err());
    }

    #[test]
    fn parses_cancel_and_negotiation_codes() {
        assert_eq!(
            parse_startup(&SSL_REQUEST_CODE.to_be_bytes()),
            Ok(StartupRequest::Ssl)
        );
        assert_eq!(
            parse_startup(&GSSENC_REQUEST_CODE.to_be_bytes()),
            Ok(StartupRequest::GssEnc)
        );
        let mut c = CANCEL_REQUEST_CODE.to_be_bytes().to_vec();
        c.extend_from_slice(&5i32.to_be_bytes());
        c.extend_from_slice(&(-6i32).to_be_bytes());
        assert_eq!(
            parse_startup(&c),
            Ok(StartupRequest::Cancel { pid: 5, secret: -6 })
        );
    }

    #[test]
    fn a_cancel_request_is_exactly_a_3_0_key() {
        let key = |len: usize| {
            let mut c = CANCEL_REQUEST_CODE.to_be_bytes().to_vec();
            c.extend((0..len).map(|i| i as u8));
            c
        };
        // pgharbor offers clients protocol 3.0 only, so it never hands out
        // a 3.2 key (secrets up to 256 bytes): any other length is broken.
        for len in [0, 4, 7, 9, 12, 4 + 32, 4 + 256] {
            assert_eq!(
                parse_startup(&key(len)),
                Err(malformed("invalid length of cancel request packet")),
                "{len} bytes of key"
            );
        }
        // Every 8 bytes are a key, whatever their sign bits.
        assert_eq!(
            parse_startup(&key(8)),
            Ok(StartupRequest::Cancel {
                pid: 0x0001_0203,
                secret: 0x0405_0607
            })
        );
        let mut all_ones = CANCEL_REQUEST_CODE.to_be_bytes().to_vec();
        all_ones.extend([0xff; 8]);
        assert_eq!(
            parse_startup(&all_ones),
            Ok(StartupRequest::Cancel {
                pid: -1,
                secret: -1
            })
        );
    }

    #[test]
    fn parses_sasl_messages_and_rejects_bad_lengths() {
        let mut b = b"SCRAM-SHA-256\0".to_vec();
        b.extend_from_slice(&3u32.to_be_bytes());
        b.extend_from_slice(b"n,,");
        assert_eq!(
            parse_sasl_initial(&b).unwrap(),
            ("SCRAM-SHA-256", &b"n,,"[..])
        );
        let mut short = b"SCRAM-SHA-256\0".to_vec();
        short.extend_from_slice(&9u32.to_be_bytes());
        short.extend_from_slice(b"n,,");
        assert!(parse_sasl_initial(&short).is_err());
        assert!(parse_sasl_initial(b"SCRAM").is_err());
        assert!(parse_password(b"secret\0").is_ok());
        assert!(parse_password(b"secret").is_err());
        assert!(parse_password(b"a\0b\0").is_err());
    }
}
