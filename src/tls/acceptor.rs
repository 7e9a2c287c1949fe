//! The front-end TLS acceptor: built once from the configured PEM files (and
//! again on reload), never per connection.
//!
//! It is OpenSSL proper (through `stream::TlsStream`) rather than native-tls:
//! native-tls's server side is pinned to Mozilla's old "intermediate"
//! profile, which turns TLS 1.3 off and puts ChaCha20 ahead of AES-GCM. On a
//! CPU with AES instructions that makes bulk transfer far slower than direct
//! PostgreSQL (which negotiates TLS 1.3 with AES-GCM), and it cannot ask for
//! client certificates.

use std::path::Path;
use std::sync::Arc;

use openssl::asn1::Asn1Time;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslAcceptor, SslMethod, SslMode, SslOptions, SslSessionCacheMode, SslVersion};
use openssl::x509::X509;

use crate::config::{TlsConfig, TlsVersion};

/// Why the certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("{key}: cannot read {path}: {source}")]
    Read {
        /// Config key naming the file.
        key: &'static str,
        /// The file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The private key is not a PEM key OpenSSL can read.
    #[error("tls.key_file: {0}")]
    Key(String),
    /// The certificate file holds no usable PEM certificate.
    #[error("tls.cert_file: {0}")]
    Cert(String),
    /// A backend's `sslrootcert` cannot be used.
    #[error("{0}")]
    RootCert(String),
    /// A backend's client certificate (`sslcert`, `sslkey`) cannot be used.
    #[error("{0}")]
    ClientCert(String),
    /// A database entry's backend TLS cannot be set up.
    #[error("{key}: {source}")]
    Database {
        /// `databases.NAME.conninfo`.
        key: String,
        /// Why.
        source: Box<TlsError>,
    },
    /// `tls.ca_file` or the CRLs cannot be used.
    #[error("{0}")]
    ClientCa(String),
    /// The TLS library refused `tls.tls13_ciphers`.
    #[error("tls.tls13_ciphers: {0}")]
    Suites(String),
    /// Certificate and key do not form a usable identity.
    #[error("tls.cert_file/tls.key_file: {0}")]
    Identity(String),
}

/// A ready acceptor, shared by every handshake.
pub type Acceptor = Arc<SslAcceptor>;

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        key,
        path: path.display().to_string(),
        source,
    })
}

/// Builds the acceptor for `tls`, or `None` when no certificate is configured.
pub fn build_acceptor(tls: &TlsConfig) -> Result<Option<Acceptor>, TlsError> {
    let (Some(cert_path), Some(key_path)) = (&tls.cert_file, &tls.key_file) else {
        return Ok(None);
    };
    let chain = X509::stack_from_pem(&read("tls.cert_file", cert_path)?)
        .map_err(|e| TlsError::Cert(format!("not a PEM certificate: {e}")))?;
    let Some((leaf, intermediates)) = chain.split_first() else {
        return Err(TlsError::Cert("no certificate in the file".into()));
    };
    super::validity::refuse_invalid(leaf, &cert_path.display().to_string())
        .map_err(TlsError::Cert)?;
    let key: PKey<Private> = PKey::private_key_from_pem(&read("tls.key_file", key_path)?)
        .map_err(|e| TlsError::Key(format!("not a PEM private key OpenSSL can read: {e}")))?;

    let identity = |e: openssl::error::ErrorStack| TlsError::Identity(e.to_string());
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).map_err(identity)?;
    super::alpn::select_postgresql(&mut b);
    b.set_certificate(leaf).map_err(identity)?;
    for cert in intermediates {
        b.add_extra_chain_cert(cert.clone()).map_err(identity)?;
    }
    let mismatch = |_| TlsError::Identity("the private key does not match the certificate".into());
    b.set_private_key(&key).map_err(mismatch)?;
    b.check_private_key().map_err(mismatch)?;
    let min = match tls.min_protocol_version {
        TlsVersion::Tls10 => SslVersion::TLS1,
        TlsVersion::Tls11 => SslVersion::TLS1_1,
        TlsVersion::Tls12 => SslVersion::TLS1_2,
        TlsVersion::Tls13 => SslVersion::TLS1_3,
    };
    b.set_min_proto_version(Some(min)).map_err(identity)?;
    super::suites::prefer(&mut b, &tls.tls13_ciphers)
        .map_err(|e| TlsError::Suites(e.to_string()))?;
    super::verify::configure(&mut b, tls)?;
    if intermediates.is_empty() {
        super::native::build_chain_once(&mut b);
    }
    // libpq never resumes a session, so tickets and a session cache only cost
    // CPU and memory per handshake (TLS 1.3 servers send two tickets by
    // default). PostgreSQL turns both off too.
    b.set_options(SslOptions::NO_TICKET);
    super::native::no_tickets(&mut b).map_err(identity)?;
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    // Idle clients are many: let OpenSSL free a connection's record buffers
    // between reads and writes.
    b.set_mode(SslMode::RELEASE_BUFFERS);
    super::read_whole_records(&mut b);
    Ok(Some(Arc::new(b.build())))
}

/// When the acceptor's certificate (the one clients are shown) expires, as
/// a Unix timestamp: its notAfter, read from the certificate OpenSSL loaded.
pub fn certificate_not_after(acceptor: &SslAcceptor) -> Option<i64> {
    let cert = super::native::certificate(acceptor.context())?;
    let epoch = Asn1Time::from_unix(0).ok()?;
    let since = epoch.diff(cert.not_after()).ok()?;
    Some(i64::from(since.days) * 86_400 + i64::from(since.secs))
}
