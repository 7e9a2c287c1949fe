//! TLS policy: which transports must, may or must not use TLS. No I/O here.

use std::fmt;
use std::str::FromStr;

/// libpq-style TLS mode, used for both the front end and the back end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SslMode {
    /// Never use TLS.
    Disable,
    /// Plain first; TLS only if the other side insists.
    Allow,
    /// TLS if the other side offers it, plain otherwise.
    Prefer,
    /// TLS or nothing; no certificate check.
    Require,
    /// TLS with a certificate signed by a trusted CA.
    VerifyCa,
    /// TLS with a trusted certificate whose name matches the host.
    VerifyFull,
}

impl SslMode {
    /// All modes, in libpq order.
    pub const ALL: [SslMode; 6] = [
        SslMode::Disable,
        SslMode::Allow,
        SslMode::Prefer,
        SslMode::Require,
        SslMode::VerifyCa,
        SslMode::VerifyFull,
    ];

    /// The libpq spelling of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// True when a plain (unencrypted) session is unacceptable.
    pub fn requires_tls(self) -> bool {
        matches!(
            self,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        )
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for a string that is not a libpq sslmode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid sslmode {0:?} (expected disable, allow, prefer, require, verify-ca or verify-full)"
)]
pub struct ParseSslModeError(pub String);

impl FromStr for SslMode {
    type Err = ParseSslModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SslMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ParseSslModeError(s.to_string()))
    }
}

/// How a client reached the pooler; decides which TLS policy applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// A Unix-domain socket: the file system already protects it.
    Unix,
    /// TCP from a loopback address (127.0.0.0/8, ::1).
    LoopbackTcp,
    /// TCP from any other address.
    RemoteTcp,
}

impl Transport {
    /// Short label used in logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Unix => "unix",
            Transport::LoopbackTcp => "tcp-loopback",
            Transport::RemoteTcp => "tcp",
        }
    }

    /// Classifies a TCP peer address.
    pub fn for_tcp_peer(addr: &std::net::SocketAddr) -> Transport {
        let loopback = match addr.ip() {
            std::net::IpAddr::V4(v4) => v4.is_loopback(),
            std::net::IpAddr::V6(v6) => {
                v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
        };
        if loopback {
            Transport::LoopbackTcp
        } else {
            Transport::RemoteTcp
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The refusal for a plain StartupMessage under a policy that requires TLS,
/// or None when plain is acceptable. Decided before any password is asked
/// for, so no secret ever crosses a link the policy says must be encrypted.
pub fn refuse_plain_startup(mode: SslMode, transport: Transport) -> Option<&'static str> {
    if !mode.requires_tls() {
        return None;
    }
    Some(match transport {
        Transport::Unix => {
            "SSL required on the Unix socket (socketsslmode); note that libpq never uses SSL on Unix sockets"
        }
        Transport::LoopbackTcp | Transport::RemoteTcp => "SSL required",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_libpq_mode() {
        for m in SslMode::ALL {
            assert_eq!(m.as_str().parse::<SslMode>(), Ok(m));
        }
        assert!("Require".parse::<SslMode>().is_err());
        assert!("".parse::<SslMode>().is_err());
    }

    #[test]
    fn plain_startup_is_refused_exactly_when_tls_is_required() {
        for mode in SslMode::ALL {
            for t in [
                Transport::Unix,
                Transport::LoopbackTcp,
                Transport::RemoteTcp,
            ] {
                assert_eq!(
                    refuse_plain_startup(mode, t).is_some(),
                    matches!(
                        mode,
                        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
                    ),
                    "{mode} over {t}"
                );
            }
        }
        assert!(refuse_plain_startup(SslMode::Require, Transport::Unix)
            .is_some_and(|m| m.contains("libpq never uses SSL on Unix sockets")));
    }

    #[test]
    fn classifies_loopback_peers() {
        let v4: std::net::SocketAddr = "127.0.0.5:1".parse().unwrap();
        let v6: std::net::SocketAddr = "[::1]:1".parse().unwrap();
        let mapped: std::net::SocketAddr = "[::ffff:127.0.0.1]:1".parse().unwrap();
        let remote: std::net::SocketAddr = "10.1.2.3:1".parse().unwrap();
        assert_eq!(Transport::for_tcp_peer(&v4), Transport::LoopbackTcp);
        assert_eq!(Transport::for_tcp_peer(&v6), Transport::LoopbackTcp);
        assert_eq!(Transport::for_tcp_peer(&mapped), Transport::LoopbackTcp);
        assert_eq!(Transport::for_tcp_peer(&remote), Transport::RemoteTcp);
    }
}
