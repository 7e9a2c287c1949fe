//! `sslnegotiation` (libpq 17): whether TLS toward the server starts with
//! an SSLRequest or at once (direct TLS, which only PostgreSQL 17 or later
//! accepts), and libpq's rule on which `sslmode` may go with it.

use super::ConnInfoError;
use crate::config::{BackendHost, ConnInfo, SslMode};

/// `sslnegotiation` (libpq 17): how TLS starts toward the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SslNegotiation {
    /// SSLRequest, then the handshake if the server answers `S` (the default,
    /// and the only way before PostgreSQL 17).
    #[default]
    Postgres,
    /// The TLS handshake at once, with ALPN "postgresql" (PostgreSQL 17 or
    /// later; a server that does not know it fails the connection).
    Direct,
}

impl SslNegotiation {
    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SslNegotiation::Postgres => "postgres",
            SslNegotiation::Direct => "direct",
        }
    }
}

/// Reads an `sslnegotiation` value.
pub(super) fn parse(key: &str, value: String) -> Result<SslNegotiation, ConnInfoError> {
    match value.as_str() {
        "postgres" => Ok(SslNegotiation::Postgres),
        "direct" => Ok(SslNegotiation::Direct),
        _ => Err(ConnInfoError::InvalidValue {
            key: key.to_string(),
            value,
            reason: "expected postgres or direct".to_string(),
        }),
    }
}

/// libpq 17 refuses direct TLS under a `sslmode` that allows plaintext:
/// toward a server older than 17 it would fall back to plain without the
/// user noticing (fe-connect.c). On a Unix socket, where libpq never uses
/// TLS, `socketsslmode=disable` stays plain; a socket host that uses TLS
/// at all needs `socketsslmode` require or stronger for the same reason.
pub(super) fn check(info: &ConnInfo) -> Result<(), ConnInfoError> {
    if info.sslnegotiation != SslNegotiation::Direct {
        return Ok(());
    }
    if !info.sslmode.requires_tls() {
        return Err(ConnInfoError::WeakSslMode {
            key: "sslmode",
            mode: info.sslmode,
        });
    }
    let socket = info
        .hosts
        .iter()
        .any(|h| matches!(h.host, BackendHost::Unix(_)));
    let mode = info.socketsslmode;
    if socket && mode != SslMode::Disable && !mode.requires_tls() {
        return Err(ConnInfoError::WeakSslMode {
            key: "socketsslmode",
            mode,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<ConnInfo, ConnInfoError> {
        ConnInfo::parse(s)
    }

    #[test]
    fn the_default_is_postgres_and_both_values_parse() {
        let info = parse_str("host=h").unwrap();
        assert_eq!(info.sslnegotiation, SslNegotiation::Postgres);
        assert!(!info.redacted().contains("sslnegotiation"));
        let info = parse_str("host=h sslmode=require sslnegotiation=direct").unwrap();
        assert_eq!(info.sslnegotiation, SslNegotiation::Direct);
        assert!(info.redacted().contains("sslnegotiation=direct"));
        let uri = parse_str("postgresql://h/app?sslmode=verify-ca&sslnegotiation=direct").unwrap();
        assert_eq!(uri.sslnegotiation, SslNegotiation::Direct);
        // A later key wins, as in libpq.
        let info = parse_str("sslnegotiation=direct sslnegotiation=postgres").unwrap();
        assert_eq!(info.sslnegotiation, SslNegotiation::Postgres);
    }

    #[test]
    fn direct_needs_a_mode_that_refuses_plaintext_with_libpqs_message() {
        for mode in ["disable", "allow", "prefer"] {
            let e = parse_str(&format!("host=h sslmode={mode} sslnegotiation=direct")).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("weak sslmode \"{mode}\" may not be used with sslnegotiation=direct (use \"require\", \"verify-ca\", or \"verify-full\")")
            );
        }
        // libpq's default sslmode is prefer, so direct alone is refused too.
        assert!(matches!(
            parse_str("host=h sslnegotiation=direct"),
            Err(ConnInfoError::WeakSslMode { key: "sslmode", .. })
        ));
        for mode in ["require", "verify-ca", "verify-full"] {
            parse_str(&format!("host=h sslmode={mode} sslnegotiation=direct")).unwrap();
        }
    }

    #[test]
    fn a_socket_host_stays_plain_or_needs_a_strong_socketsslmode() {
        let base = "host=/tmp sslmode=require sslnegotiation=direct";
        parse_str(base).unwrap();
        parse_str(&format!("{base} socketsslmode=require")).unwrap();
        let e = parse_str(&format!("{base} socketsslmode=prefer")).unwrap_err();
        assert!(
            matches!(
                e,
                ConnInfoError::WeakSslMode {
                    key: "socketsslmode",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string().starts_with("weak socketsslmode \"prefer\""),
            "{e}"
        );
        // Without a socket host, socketsslmode is never used.
        parse_str("host=h sslmode=require sslnegotiation=direct socketsslmode=prefer").unwrap();
    }
}
