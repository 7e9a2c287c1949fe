//! What a TLS session negotiated, as SHOW CLIENTS and SHOW SERVERS show it
//! in PgBouncer's form: `TLSv1.3/TLS_AES_128_GCM_SHA256/ECDH=X25519`.
//!
//! Every idle client keeps its label in the registry, so a label is two
//! bytes: an index into a process-wide table of the (protocol, suite,
//! group) triples seen. Each part is a name from the TLS library's static
//! tables, so the table is bounded by what the library knows (a few
//! protocols, tens of suites, ten-odd groups), whatever clients send.

use std::fmt;
use std::num::NonZeroU16;
use std::sync::RwLock;

use openssl::ssl::SslRef;

/// One (protocol, suite, key-exchange group) triple, as the library names them.
type Triple = (&'static str, &'static str, Option<&'static str>);

/// Every triple seen, in order; a label is its index plus one.
static SEEN: RwLock<Vec<Triple>> = RwLock::new(Vec::new());

/// A connection's negotiated TLS parameters, formatted when shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(NonZeroU16);

impl Label {
    /// The label of a finished handshake; `None` only if the session has no
    /// suite yet or the table is full (which the library's names bound far
    /// below).
    pub fn of(ssl: &SslRef) -> Option<Label> {
        let suite = ssl.current_cipher()?.name();
        let triple = (
            ssl.version_str(),
            suite,
            super::native::negotiated_group(ssl),
        );
        Label::intern(triple)
    }

    /// The label of a stream's TLS session; `None` for a plain stream.
    pub fn of_stream(stream: &crate::stream::Stream) -> Option<Label> {
        match stream {
            crate::stream::Stream::Tls(tls) => Label::of(tls.ssl()),
            _ => None,
        }
    }

    fn intern(triple: Triple) -> Option<Label> {
        let label = |i: usize| {
            u16::try_from(i + 1)
                .ok()
                .and_then(NonZeroU16::new)
                .map(Label)
        };
        let found = |seen: &[Triple]| seen.iter().position(|t| *t == triple);
        if let Some(i) = SEEN.read().ok().and_then(|seen| found(&seen)) {
            return label(i);
        }
        let mut seen = SEEN.write().ok()?;
        match found(&seen) {
            Some(i) => label(i),
            None if seen.len() < usize::from(u16::MAX) => {
                seen.push(triple);
                label(seen.len() - 1)
            }
            None => None,
        }
    }

    fn triple(self) -> Option<Triple> {
        let seen = SEEN.read().ok()?;
        seen.get(usize::from(self.0.get()) - 1).copied()
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.triple() {
            Some((protocol, suite, Some(group))) => write!(f, "{protocol}/{suite}/ECDH={group}"),
            Some((protocol, suite, None)) => write!(f, "{protocol}/{suite}"),
            None => f.write_str("TLS"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_triple_is_interned_once_and_shown_in_pgbouncers_form() {
        let a = ("TLSv1.3", "TLS_AES_128_GCM_SHA256", Some("X25519"));
        let b = (
            "TLSv1.2",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            Some("prime256v1"),
        );
        let c = ("TLSv1.2", "AES128-GCM-SHA256", None);
        let la = Label::intern(a).unwrap();
        let lb = Label::intern(b).unwrap();
        assert_ne!(la, lb);
        assert_eq!(Label::intern(a), Some(la));
        assert_eq!(la.to_string(), "TLSv1.3/TLS_AES_128_GCM_SHA256/ECDH=X25519");
        assert_eq!(
            lb.to_string(),
            "TLSv1.2/ECDHE-ECDSA-AES128-GCM-SHA256/ECDH=prime256v1"
        );
        assert_eq!(
            Label::intern(c).unwrap().to_string(),
            "TLSv1.2/AES128-GCM-SHA256"
        );
        assert_eq!(std::mem::size_of::<Option<Label>>(), 2);
    }
}
