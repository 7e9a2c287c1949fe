//! The libpq `sslmode` values, a policy value the config owns; `tls` applies it.

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
}
