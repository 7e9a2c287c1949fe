//! ALPN for direct TLS (PostgreSQL 17's `sslnegotiation=direct`), on both
//! sides, as PostgreSQL 17 and libpq 17 do it.
//!
//! Without the SSLRequest in front of the handshake, nothing on the wire
//! says the peer means to speak PostgreSQL's protocol: ALPN "postgresql" is
//! what says it, so a TLS client of some other protocol pointed at the wrong
//! port (the ALPACA class of cross-protocol attacks) is never served. Hence:
//! - the acceptor selects "postgresql" and refuses any other offer with the
//!   fatal no_application_protocol alert, on either path (be-secure-openssl.c
//!   `alpn_cb`, per RFC 7301); a client that offers no ALPN at all (libpq 15
//!   after SSLRequest) is not asked for it;
//! - a direct client whose handshake settled on no protocol is refused after
//!   the handshake (backend_startup.c `ProcessSSLStartup`);
//! - the connector offers "postgresql" on both paths, as libpq 17 does, and
//!   after a direct handshake refuses a server that did not select it
//!   (fe-secure-openssl.c `open_client_SSL`).

use openssl::error::ErrorStack;
use openssl::ssl::{select_next_proto, AlpnError, SslContextBuilder, SslRef};

use crate::stream::Stream;

/// The protocol name PostgreSQL registered for ALPN.
pub const PG_ALPN_PROTOCOL: &[u8] = b"postgresql";

/// The same as an ALPN protocol list on the wire: one length-prefixed name.
pub const PG_ALPN_WIRE: &[u8] = b"\x0apostgresql";

/// Server side: the message PostgreSQL 17 logs (COMMERROR, never sent to
/// the client) when a direct TLS client did not negotiate ALPN.
pub const DIRECT_WITHOUT_ALPN: &str =
    "received direct SSL connection request without ALPN protocol negotiation extension";

/// Client side: libpq 17's error when a server accepted direct TLS without
/// selecting any ALPN protocol.
pub const SERVER_WITHOUT_ALPN: &str =
    "direct SSL connection was established without ALPN protocol negotiation extension";

/// Client side: libpq 17's error when a server selected another protocol.
pub const SERVER_UNEXPECTED_ALPN: &str =
    "SSL connection was established with unexpected ALPN protocol";

/// Makes an acceptor select "postgresql" from a client's ALPN offer.
pub fn select_postgresql(b: &mut SslContextBuilder) {
    b.set_alpn_select_callback(|_, offer| choose(offer));
}

/// The protocol to select from a client's offer (wire form); an offer
/// without "postgresql" is refused with the fatal no_application_protocol
/// alert, as PostgreSQL's `alpn_cb` does.
fn choose(offer: &[u8]) -> Result<&[u8], AlpnError> {
    select_next_proto(PG_ALPN_WIRE, offer).ok_or(AlpnError::ALERT_FATAL)
}

/// Makes a connector offer "postgresql" (libpq 17 always does).
pub fn offer_postgresql(b: &mut SslContextBuilder) -> Result<(), ErrorStack> {
    b.set_alpn_protos(PG_ALPN_WIRE)
}

/// The TLS session of a stream, once its handshake is done.
fn session(stream: &Stream) -> Option<&SslRef> {
    match stream {
        Stream::Tls(tls) => Some(tls.ssl()),
        _ => None,
    }
}

/// Whether a direct TLS client negotiated "postgresql"; PostgreSQL's
/// refusal otherwise. The acceptor selects nothing else, so any protocol
/// at all is "postgresql"; the comparison is kept as PostgreSQL keeps it.
pub fn check_direct_client(stream: &Stream) -> Result<(), &'static str> {
    match session(stream).and_then(SslRef::selected_alpn_protocol) {
        Some(PG_ALPN_PROTOCOL) => Ok(()),
        Some(_) => Err("received SSL connection request with unexpected ALPN protocol"),
        None => Err(DIRECT_WITHOUT_ALPN),
    }
}

/// Whether a server reached by direct TLS selected "postgresql"; libpq
/// 17's error otherwise.
pub fn check_direct_server(stream: &Stream) -> Result<(), &'static str> {
    match session(stream).and_then(SslRef::selected_alpn_protocol) {
        Some(PG_ALPN_PROTOCOL) => Ok(()),
        Some(_) => Err(SERVER_UNEXPECTED_ALPN),
        None => Err(SERVER_WITHOUT_ALPN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_form_is_the_length_prefixed_name() {
        assert_eq!(PG_ALPN_WIRE[0] as usize, PG_ALPN_PROTOCOL.len());
        assert_eq!(&PG_ALPN_WIRE[1..], PG_ALPN_PROTOCOL);
    }

    #[test]
    fn only_postgresql_is_selected_and_anything_else_is_a_fatal_alert() {
        assert_eq!(choose(PG_ALPN_WIRE).ok(), Some(PG_ALPN_PROTOCOL));
        // Found wherever it is in the client's list.
        let offer = b"\x02h2\x08http/1.1\x0apostgresql";
        assert_eq!(choose(offer).ok(), Some(PG_ALPN_PROTOCOL));
        for offer in [
            &b"\x02h2\x08http/1.1"[..],
            b"\x0bpostgresql2",
            b"\x09postgresq",
        ] {
            assert!(
                matches!(choose(offer), Err(e) if e == AlpnError::ALERT_FATAL),
                "{offer:?}"
            );
        }
    }

    #[test]
    fn a_plain_stream_has_negotiated_nothing() {
        let plain = Stream::Detached(crate::stream::Detached);
        assert_eq!(check_direct_client(&plain), Err(DIRECT_WITHOUT_ALPN));
        assert_eq!(check_direct_server(&plain), Err(SERVER_WITHOUT_ALPN));
    }
}
