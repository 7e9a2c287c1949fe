//! TLS toward PostgreSQL, with libpq's meanings of `sslmode`: `socketsslmode`
//! for Unix-socket backends, `sslmode` for TCP ones.

use std::path::Path;
use std::sync::Arc;

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode, SslVersion};

use super::{SslMode, TlsError};

/// How one pool talks TLS to its server; built once per pool.
#[derive(Clone)]
pub struct BackendTls {
    /// The libpq mode in force for this backend's transport.
    pub mode: SslMode,
    /// Whether the backend is a Unix socket (for error messages).
    pub unix: bool,
    connector: Option<Arc<SslConnector>>,
}

impl std::fmt::Debug for BackendTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendTls")
            .field("mode", &self.mode)
            .field("unix", &self.unix)
            .finish()
    }
}

/// What to do at the start of a backend connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Send no SSLRequest.
    Plain,
    /// Ask; go on in plain if the server answers `N`.
    Prefer,
    /// Ask; fail if the server answers `N`.
    Require,
}

impl BackendTls {
    /// Plain connections only.
    pub fn disabled() -> Self {
        BackendTls {
            mode: SslMode::Disable,
            unix: false,
            connector: None,
        }
    }

    /// Builds the connector for `mode`; verify-ca and verify-full need `rootcert`.
    pub fn new(mode: SslMode, unix: bool, rootcert: Option<&Path>) -> Result<Self, TlsError> {
        let connector = match mode {
            SslMode::Disable | SslMode::Allow => None,
            _ => Some(Arc::new(build(mode, rootcert)?)),
        };
        Ok(BackendTls {
            mode,
            unix,
            connector,
        })
    }

    /// The opening libpq would make in this mode. `allow` starts in plain, like
    /// libpq's first attempt (pgharbor does not retry with TLS).
    pub fn opening(&self) -> Opening {
        match self.mode {
            SslMode::Disable | SslMode::Allow => Opening::Plain,
            SslMode::Prefer => Opening::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Opening::Require,
        }
    }

    /// The connector, when the mode uses TLS at all.
    pub fn connector(&self) -> Option<&SslConnector> {
        self.connector.as_deref()
    }

    /// Whether the certificate must name the host.
    pub fn verify_hostname(&self) -> bool {
        self.mode == SslMode::VerifyFull
    }

    /// The error for a server that answered `N` where TLS is required.
    pub fn refused_message(&self) -> String {
        if self.unix {
            "server does not support SSL on its Unix socket, but socketsslmode requires it (stock PostgreSQL always answers N to SSLRequest on a Unix socket; use socketsslmode=disable or prefer)".into()
        } else {
            "server does not support SSL, but SSL was required (sslmode)".into()
        }
    }
}

fn build(mode: SslMode, rootcert: Option<&Path>) -> Result<SslConnector, TlsError> {
    let err = |e: openssl::error::ErrorStack| TlsError::Identity(e.to_string());
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(err)?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2))
        .map_err(err)?;
    match mode {
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let Some(root) = rootcert else {
                return Err(TlsError::RootCert(format!(
                    "sslmode={mode} needs sslrootcert in the database conninfo"
                )));
            };
            b.set_ca_file(root)
                .map_err(|e| TlsError::RootCert(format!("sslrootcert {}: {e}", root.display())))?;
            b.set_verify(SslVerifyMode::PEER);
        }
        // libpq's require checks nothing (unless a root certificate is given,
        // which then behaves like verify-ca).
        _ => match rootcert {
            Some(root) => {
                b.set_ca_file(root).map_err(|e| {
                    TlsError::RootCert(format!("sslrootcert {}: {e}", root.display()))
                })?;
                b.set_verify(SslVerifyMode::PEER);
            }
            None => b.set_verify(SslVerifyMode::NONE),
        },
    }
    Ok(b.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings_follow_libpq() {
        let o = |m| BackendTls::new(m, false, None).map(|t| t.opening());
        assert_eq!(o(SslMode::Disable).unwrap(), Opening::Plain);
        assert_eq!(o(SslMode::Allow).unwrap(), Opening::Plain);
        assert_eq!(o(SslMode::Prefer).unwrap(), Opening::Prefer);
        assert_eq!(o(SslMode::Require).unwrap(), Opening::Require);
        assert!(
            o(SslMode::VerifyCa).is_err(),
            "verify-ca without a root certificate"
        );
        assert!(o(SslMode::VerifyFull).is_err());
    }

    #[test]
    fn unix_refusal_explains_stock_postgres() {
        let t = BackendTls::new(SslMode::Require, true, None).unwrap();
        assert!(t.refused_message().contains("Unix socket"));
    }
}
