//! The matrix's "method used" column: psql does not say which
//! authentication method ran, so a raw client logs in too and records the
//! authentication requests it was sent (3 cleartext password, 5 MD5,
//! 10/11/12 SASL, 0 OK) and the exact ErrorResponse, over the Unix socket,
//! plain TCP, and TCP after SSLRequest and a TLS handshake.

use std::path::Path;
use std::time::Duration;

use crate::common::wire::{request_packet, Failure, TlsVerify, SSL_REQUEST_CODE};
use crate::common::{Endpoint, RawConn, Reply};

/// The wire transports: label and whether TCP (Some) with TLS (true).
pub const WIRE_TRANSPORTS: [(&str, Option<bool>); 3] = [
    ("wire unix", None),
    ("wire tcp", Some(false)),
    ("wire tcp+TLS", Some(true)),
];

/// One login's authentication requests and its end, in one line.
pub fn wire_outcome(
    socket_dir: &Path,
    port: u16,
    tcp: Option<bool>,
    user: &str,
    password: Option<&str>,
    db: &str,
) -> String {
    let ep = match tcp {
        None => Endpoint::Unix(socket_dir.join(format!(".s.PGSQL.{port}"))),
        Some(_) => Endpoint::Tcp(port),
    };
    let mut raw = RawConn::connect(&ep);
    if tcp == Some(true) {
        raw.send(&request_packet(SSL_REQUEST_CODE))
            .expect("send SSLRequest");
        match raw.read_request_answer(Duration::from_secs(15)) {
            Reply::Byte(b'S') => {}
            other => return format!("SSLRequest answered {other:?}"),
        }
        if let Err(e) = raw.start_tls(&TlsVerify::None) {
            return format!("TLS handshake failed: {e}");
        }
    }
    let res = raw.login(&[("user", user), ("database", db)], password);
    let end = match res {
        Ok(_) => "logged in".to_string(),
        Err(Failure::Error(e)) => format!("{} {}: {}", e.severity, e.code, e.message),
        // Our own client gave up, e.g. "server asked for a password".
        Err(Failure::Auth(why)) => format!("client: {why}"),
        Err(Failure::Unexpected(reply)) => format!("unexpected {reply:?}"),
    };
    format!("requests {:?}, {end}", raw.auth_codes)
}
