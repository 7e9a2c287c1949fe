//! TLS toward PostgreSQL, with libpq's meanings of `sslmode`: `socketsslmode`
//! for Unix-socket backends, `sslmode` for TCP ones; and of the other TLS
//! keywords (client certificate, CRLs, protocol versions, SNI, compression).

use std::path::Path;
use std::sync::Arc;

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode, SslVersion};
use openssl::x509::X509;

use super::{client_cert, TlsError};
use crate::config::SslMode;
use crate::config::{
    BackendHost, ChannelBinding, ClientCertMode, Compression, Config, ConnInfo, HostSpec, Sni,
    SslNegotiation, TlsOptions, TlsProtocol,
};

/// How one pool talks TLS to its server; built once per pool.
#[derive(Clone)]
pub struct BackendTls {
    /// The libpq mode in force for this backend's transport.
    pub mode: SslMode,
    /// Whether the backend is a Unix socket (for error messages).
    pub unix: bool,
    /// `channel_binding`, which the SCRAM exchange needs.
    pub channel_binding: ChannelBinding,
    connector: Option<Arc<SslConnector>>,
    /// What verify-full checks and SNI sends: `host`, even with `hostaddr`.
    server_name: Option<String>,
    sni: Sni,
    negotiation: SslNegotiation,
}

impl std::fmt::Debug for BackendTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendTls")
            .field("mode", &self.mode)
            .field("unix", &self.unix)
            .field("server_name", &self.server_name)
            .field("channel_binding", &self.channel_binding)
            .field("negotiation", &self.negotiation)
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
            channel_binding: ChannelBinding::Prefer,
            connector: None,
            server_name: None,
            sni: Sni::Send,
            negotiation: SslNegotiation::Postgres,
        }
    }

    /// The TLS toward each host of a database entry, in list order. Reads
    /// the certificate files, so `pgharbor check` and start-up call it
    /// too: a bad key is reported before any client comes. One connector
    /// per mode in use (TCP and socket hosts may differ), shared by the
    /// hosts; each host keeps its own name for verify-full and SNI.
    pub fn for_hosts(info: &ConnInfo) -> Result<Vec<Self>, TlsError> {
        let mut built: Vec<(SslMode, Option<Arc<SslConnector>>)> = Vec::new();
        let mut out = Vec::with_capacity(info.hosts.len());
        for host in &info.hosts {
            let mode = info.tls_mode(host);
            let connector = match built.iter().find(|(m, _)| *m == mode) {
                Some((_, c)) => c.clone(),
                None => {
                    let c = match mode {
                        SslMode::Disable | SslMode::Allow => None,
                        _ => Some(Arc::new(build(
                            mode,
                            info.sslrootcert.as_deref(),
                            &info.tls,
                        )?)),
                    };
                    built.push((mode, c.clone()));
                    c
                }
            };
            out.push(BackendTls {
                mode,
                unix: matches!(host.host, BackendHost::Unix(_)),
                channel_binding: info.tls.channel_binding,
                connector,
                server_name: host.tls_server_name().map(str::to_string),
                sni: info.tls.sni,
                negotiation: info.sslnegotiation,
            });
        }
        Ok(out)
    }

    /// Builds the connector for `mode` alone (libpq's defaults for the rest);
    /// verify-ca and verify-full need `rootcert`.
    pub fn new(mode: SslMode, unix: bool, rootcert: Option<&Path>) -> Result<Self, TlsError> {
        let host = if unix {
            BackendHost::Unix("/".into())
        } else {
            BackendHost::Tcp("localhost".into())
        };
        let info = ConnInfo {
            hosts: vec![HostSpec {
                host,
                ..HostSpec::default()
            }],
            sslmode: mode,
            socketsslmode: mode,
            sslrootcert: rootcert.map(Path::to_path_buf),
            ..ConnInfo::default()
        };
        let mut all = Self::for_hosts(&info)?;
        // One host in, one out.
        Ok(all.remove(0))
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

    /// Whether TLS starts at once, without SSLRequest (`sslnegotiation=direct`,
    /// in a mode that uses TLS: a socket under `socketsslmode=disable` stays plain).
    pub fn direct(&self) -> bool {
        self.negotiation == SslNegotiation::Direct && self.opening() == Opening::Require
    }

    /// The connector, when the mode uses TLS at all.
    pub fn connector(&self) -> Option<&SslConnector> {
        self.connector.as_deref()
    }

    /// Whether the certificate must name the host.
    pub fn verify_hostname(&self) -> bool {
        self.mode == SslMode::VerifyFull
    }

    /// The name to check and send: `host` (not `hostaddr`); "localhost" for
    /// a socket, which has none.
    pub fn server_name(&self) -> &str {
        self.server_name.as_deref().unwrap_or("localhost")
    }

    /// Whether to send SNI (`sslsni`); never without a name.
    pub fn send_sni(&self) -> bool {
        self.sni == Sni::Send && self.server_name.is_some()
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

/// Builds every database entry's backend TLS once, as `pgharbor check` and
/// start-up do, so an unreadable key or a wrong `sslpassword` is reported
/// before the first client rather than to it.
pub fn check_databases(config: &Config) -> Result<(), TlsError> {
    for (name, db) in &config.databases {
        BackendTls::for_hosts(&db.conninfo).map_err(|e| TlsError::Database {
            key: format!("databases.{name}.conninfo"),
            source: Box::new(e),
        })?;
    }
    Ok(())
}

fn version(v: Option<TlsProtocol>) -> Option<SslVersion> {
    v.map(|v| match v {
        TlsProtocol::Tls1_0 => SslVersion::TLS1,
        TlsProtocol::Tls1_1 => SslVersion::TLS1_1,
        TlsProtocol::Tls1_2 => SslVersion::TLS1_2,
        TlsProtocol::Tls1_3 => SslVersion::TLS1_3,
    })
}

fn build(
    mode: SslMode,
    rootcert: Option<&Path>,
    opts: &TlsOptions,
) -> Result<SslConnector, TlsError> {
    let err = |e: openssl::error::ErrorStack| TlsError::Identity(e.to_string());
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(err)?;
    let versions = |what: &str, e: openssl::error::ErrorStack| {
        TlsError::Identity(format!("could not set {what} SSL protocol version: {e}"))
    };
    b.set_min_proto_version(version(opts.min_protocol))
        .map_err(|e| versions("minimum", e))?;
    b.set_max_proto_version(version(opts.max_protocol))
        .map_err(|e| versions("maximum", e))?;
    if opts.compression == Compression::Requested {
        super::native::allow_compression(&mut b);
    }
    super::alpn::offer_postgresql(&mut b).map_err(err)?;
    super::read_whole_records(&mut b);
    // libpq's require checks nothing, unless a root certificate is given,
    // which then behaves like verify-ca.
    let root = match (mode, rootcert) {
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            return Err(TlsError::RootCert(format!(
                "sslmode={mode} needs sslrootcert in the database conninfo"
            )))
        }
        (_, root) => root,
    };
    match root {
        Some(root) => {
            readable_roots(root)?;
            b.set_ca_file(root)
                .map_err(|e| TlsError::RootCert(format!("sslrootcert {}: {e}", root.display())))?;
            b.set_verify(SslVerifyMode::PEER);
            load_crls(&mut b, opts)?;
        }
        None => b.set_verify(SslVerifyMode::NONE),
    }
    if let (ClientCertMode::Allow, Some(cert), Some(key)) =
        (opts.cert_mode, &opts.sslcert, &opts.sslkey)
    {
        if let Some(id) = client_cert::load(cert, key, opts.sslpassword.as_deref())? {
            let e = |e: openssl::error::ErrorStack| TlsError::ClientCert(e.to_string());
            b.set_certificate(&id.leaf).map_err(e)?;
            for c in id.chain {
                b.add_extra_chain_cert(c).map_err(e)?;
            }
            b.set_private_key(&id.key).map_err(e)?;
            b.check_private_key().map_err(|e| {
                TlsError::ClientCert(format!(
                    "certificate does not match private key file \"{}\": {e}",
                    key.display()
                ))
            })?;
        }
    }
    Ok(b.build())
}

/// Reads `sslrootcert` first, so a missing or damaged file is reported in
/// words (OpenSSL's own error is a stack of internal function names).
fn readable_roots(root: &Path) -> Result<(), TlsError> {
    let shown = root.display();
    let pem = std::fs::read(root)
        .map_err(|e| TlsError::RootCert(format!("sslrootcert \"{shown}\": cannot read: {e}")))?;
    match X509::stack_from_pem(&pem) {
        Ok(certs) if !certs.is_empty() => Ok(()),
        Ok(_) => Err(TlsError::RootCert(format!(
            "sslrootcert \"{shown}\": no PEM certificate in the file"
        ))),
        Err(e) => Err(TlsError::RootCert(format!(
            "sslrootcert \"{shown}\": not a PEM certificate: {e}"
        ))),
    }
}

/// `sslcrl` and `sslcrldir`, checked against the whole chain, only where a
/// root certificate verifies it. As libpq: a CRL that cannot be loaded is
/// ignored ("we do not require CRL"), here with a warning.
fn load_crls(b: &mut openssl::ssl::SslConnectorBuilder, opts: &TlsOptions) -> Result<(), TlsError> {
    let loaded = super::crl::load(b, opts.sslcrl.as_deref(), opts.sslcrldir.as_deref())
        .map_err(|e| TlsError::RootCert(e.to_string()))?;
    if let (Some(Err(e)), Some(file)) = (&loaded.file, &opts.sslcrl) {
        tracing::warn!(sslcrl = %file.display(), error = %e, "sslcrl not loaded; no CRL check (as libpq)");
    }
    if let (Some(Err(e)), Some(dir)) = (&loaded.dir, &opts.sslcrldir) {
        tracing::warn!(sslcrldir = %dir.display(), error = %e, "sslcrldir not loaded; no CRL check (as libpq)");
    }
    Ok(())
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
