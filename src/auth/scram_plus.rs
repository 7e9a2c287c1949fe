//! Channel binding on the server side of SCRAM (toward clients), as
//! PostgreSQL's auth-scram.c has it: -PLUS is offered only over TLS; the
//! mechanism the client picks commits it to a gs2 header; and under -PLUS
//! the client-final `c=` must carry the tls-server-end-point hash of *our*
//! certificate, so a man in the middle who terminates TLS with another
//! certificate cannot relay the login.

use super::channel_binding::{Gs2, SCRAM, SCRAM_PLUS};
use super::crypto;
use super::scram::ScramError;

/// The only channel-binding type PostgreSQL supports, and so do we.
const TLS_SERVER_END_POINT: &str = "tls-server-end-point";
/// PostgreSQL's sanitize_str keeps this many characters of a peer's string.
const SANITIZED_MAX: usize = 30;

/// The AuthenticationSASL list (scram_get_mechanisms): -PLUS first over
/// TLS, so a client that can bind prefers it; plain SCRAM only otherwise.
pub fn mechanisms(tls: bool) -> &'static [&'static str] {
    if tls {
        &[SCRAM_PLUS, SCRAM]
    } else {
        &[SCRAM]
    }
}

/// What channel binding one server-side exchange runs with, decided by the
/// connection and the mechanism the client picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerBinding {
    /// A plain connection: -PLUS was not offered, so `y` is a fair answer.
    NotOffered,
    /// TLS, and the client picked SCRAM-SHA-256: -PLUS was offered, so a
    /// `y` ("I could bind, but you cannot") means someone removed it.
    Declined,
    /// The client picked SCRAM-SHA-256-PLUS: the tls-server-end-point hash
    /// of our certificate, which `c=` must carry.
    ServerEndPoint(Vec<u8>),
}

impl ServerBinding {
    /// From the mechanism named in SASLInitialResponse (auth-scram.c
    /// scram_init): -PLUS only over TLS, where `cert_hash` (called only
    /// then) gives the hash of our certificate.
    pub fn select(
        mechanism: &str,
        tls: bool,
        cert_hash: impl FnOnce() -> Result<Vec<u8>, String>,
    ) -> Result<ServerBinding, ScramError> {
        match (mechanism, tls) {
            (SCRAM_PLUS, true) => match cert_hash() {
                Ok(hash) if !hash.is_empty() => Ok(ServerBinding::ServerEndPoint(hash)),
                Ok(_) => Err(ScramError::CertificateHash("empty hash".into())),
                Err(e) => Err(ScramError::CertificateHash(e)),
            },
            (SCRAM, true) => Ok(ServerBinding::Declined),
            (SCRAM, false) => Ok(ServerBinding::NotOffered),
            // Including -PLUS over a plain connection: it was never offered.
            _ => Err(ScramError::InvalidMechanism),
        }
    }

    /// True when the client picked SCRAM-SHA-256-PLUS.
    pub fn in_use(&self) -> bool {
        matches!(self, ServerBinding::ServerEndPoint(_))
    }
}

/// Reads the gs2-cbind-flag that starts client-first-message and checks it
/// against `binding` (read_client_first_message); returns the header as
/// [`Gs2`] (what `c=` must repeat) and the rest, from the authzid on.
pub(super) fn read_cbind_flag<'a>(
    text: &'a str,
    binding: &ServerBinding,
) -> Result<(Gs2, &'a str), ScramError> {
    let flag = text.as_bytes().first().copied();
    let rest = text.get(1..).unwrap_or("");
    let gs2 = match (flag, binding) {
        (Some(b'n' | b'y'), ServerBinding::ServerEndPoint(_)) => {
            return Err(ScramError::Malformed(
                "the client selected SCRAM-SHA-256-PLUS, \
                 but the message does not include channel binding data",
            ))
        }
        (Some(b'n'), _) => Gs2::No,
        // The downgrade RFC 5802 section 6 guards against: the client saw
        // no -PLUS in an offer that had it.
        (Some(b'y'), ServerBinding::Declined) => return Err(ScramError::BindingNegotiation),
        (Some(b'y'), _) => Gs2::NotOffered,
        (Some(b'p'), ServerBinding::ServerEndPoint(hash)) => {
            let value = rest.strip_prefix('=').ok_or(ScramError::Malformed(
                "expected character \"=\" for attribute \"p\"",
            ))?;
            let (name, after) = value.split_once(',').unwrap_or((value, ""));
            if name != TLS_SERVER_END_POINT {
                return Err(ScramError::UnsupportedBindingType(sanitize(name)));
            }
            return Ok((Gs2::ServerEndPoint(hash.clone()), after));
        }
        (Some(b'p'), _) => {
            return Err(ScramError::Malformed(
                "the client selected SCRAM-SHA-256 without channel binding, \
                 but the message includes channel binding data",
            ))
        }
        _ => return Err(ScramError::Malformed("unexpected channel-binding flag")),
    };
    let after = rest.strip_prefix(',').ok_or(ScramError::Malformed(
        "comma expected after the channel-binding flag",
    ))?;
    Ok((gs2, after))
}

/// Checks client-final's `c=` (read_client_final_message): the gs2 header
/// of client-first again, plus our certificate's hash under -PLUS.
pub(super) fn check_c(c: &str, gs2: &Gs2) -> Result<(), ScramError> {
    if c == crypto::b64_encode(&gs2.cbind_input()) {
        return Ok(());
    }
    Err(match gs2 {
        // Another certificate's hash: the client's TLS ends somewhere else.
        Gs2::ServerEndPoint(_) => ScramError::BindingCheckFailed,
        Gs2::No | Gs2::NotOffered => {
            ScramError::Malformed("unexpected channel-binding attribute in client-final-message")
        }
    })
}

/// PostgreSQL's sanitize_str, for quoting a peer's string in an error:
/// printable ASCII kept, every other byte a `?`, at most 30 characters.
fn sanitize(s: &str) -> String {
    s.bytes()
        .take(SANITIZED_MAX)
        .map(|b| {
            if (0x21..=0x7e).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_keeps_printable_ascii_only() {
        assert_eq!(sanitize("tls-unique"), "tls-unique");
        assert_eq!(sanitize("a b\u{e9}"), "a?b??");
        assert_eq!(sanitize(&"x".repeat(40)).len(), 30);
    }

    #[test]
    fn plus_is_offered_and_accepted_only_over_tls() {
        assert_eq!(mechanisms(true), &[SCRAM_PLUS, SCRAM]);
        assert_eq!(mechanisms(false), &[SCRAM]);
        let hash = || Ok(vec![1, 2, 3]);
        assert_eq!(
            ServerBinding::select(SCRAM_PLUS, true, hash),
            Ok(ServerBinding::ServerEndPoint(vec![1, 2, 3]))
        );
        assert_eq!(
            ServerBinding::select(SCRAM, true, hash),
            Ok(ServerBinding::Declined)
        );
        assert_eq!(
            ServerBinding::select(SCRAM, false, hash),
            Ok(ServerBinding::NotOffered)
        );
        for (mechanism, tls) in [
            (SCRAM_PLUS, false),
            ("scram-sha-256", true),
            ("SCRAM-SHA-1", true),
            ("", false),
        ] {
            assert_eq!(
                ServerBinding::select(mechanism, tls, || panic!("hashed for {mechanism}")),
                Err(ScramError::InvalidMechanism)
            );
        }
        assert!(matches!(
            ServerBinding::select(SCRAM_PLUS, true, || Err("no digest".into())),
            Err(ScramError::CertificateHash(_))
        ));
        assert!(matches!(
            ServerBinding::select(SCRAM_PLUS, true, || Ok(Vec::new())),
            Err(ScramError::CertificateHash(_))
        ));
    }
}
