//! The rows' servers: the protocol version, the library, and the server
//! context each builds once per row.

use std::sync::Arc;

use openssl::ssl::{
    SslAcceptor, SslContext, SslMethod, SslMode, SslOptions, SslSessionCacheMode, SslVersion,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::NoServerSessionStorage;
use rustls::ServerConfig;

use crate::certs::CertFiles;
use crate::{ALPN, ALPN_WIRE};

/// The row's protocol version; both sides are pinned to it.
#[derive(Clone, Copy, PartialEq)]
pub enum Version {
    Tls13,
    Tls12,
}

impl Version {
    /// As OpenSSL's `version_str` names it, with a space for the "v".
    pub fn name(self) -> &'static str {
        match self {
            Version::Tls13 => "TLS 1.3",
            Version::Tls12 => "TLS 1.2",
        }
    }
    /// The version for OpenSSL's min and max.
    pub fn openssl(self) -> SslVersion {
        match self {
            Version::Tls13 => SslVersion::TLS1_3,
            Version::Tls12 => SslVersion::TLS1_2,
        }
    }
}

/// The row's server library (and rustls provider).
#[derive(Clone, Copy, PartialEq)]
pub enum Library {
    OpenSsl,
    RustlsAwsLc,
    RustlsRing,
}

impl Library {
    /// The name in the table's server column.
    pub fn name(self) -> &'static str {
        match self {
            Library::OpenSsl => "openssl",
            Library::RustlsAwsLc => "rustls-aws-lc-rs",
            Library::RustlsRing => "rustls-ring",
        }
    }
}

/// A server context built once per row and shared by its handshakes, as
/// pgharbor shares one acceptor.
pub enum Server {
    OpenSsl(SslContext),
    Rustls(Arc<ServerConfig>),
}

/// The acceptor pgharbor's src/tls/acceptor.rs builds: Mozilla intermediate
/// v5, ALPN "postgresql" selected, no tickets, no session cache, released
/// buffers; pinned to one protocol version here.
pub fn openssl_server(cert: &CertFiles, version: Version) -> SslContext {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())
        .expect("SslAcceptor::mozilla_intermediate_v5");
    b.set_alpn_select_callback(|_, offer| {
        openssl::ssl::select_next_proto(ALPN_WIRE, offer).ok_or(openssl::ssl::AlpnError::NOACK)
    });
    b.set_certificate_chain_file(&cert.crt)
        .expect("OpenSSL: server certificate");
    b.set_private_key_file(&cert.key, openssl::ssl::SslFiletype::PEM)
        .expect("OpenSSL: server key");
    b.check_private_key().expect("OpenSSL: key matches cert");
    b.set_min_proto_version(Some(version.openssl()))
        .expect("min version");
    b.set_max_proto_version(Some(version.openssl()))
        .expect("max version");
    b.set_options(SslOptions::NO_TICKET);
    b.set_num_tickets(0).expect("set_num_tickets");
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    b.set_mode(SslMode::RELEASE_BUFFERS);
    b.build().into_context()
}

/// rustls with the provider's defaults (cipher suites, key-exchange groups),
/// one protocol version, ALPN "postgresql", no session storage, no tickets.
pub fn rustls_server(cert: &CertFiles, version: Version, provider: CryptoProvider) -> ServerConfig {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert.crt)
        .expect("rustls: open server certificate")
        .collect::<Result<_, _>>()
        .expect("rustls: parse server certificate");
    let key = PrivateKeyDer::from_pem_file(&cert.key).expect("rustls: read server key");
    let versions: &[&rustls::SupportedProtocolVersion] = match version {
        Version::Tls13 => &[&rustls::version::TLS13],
        Version::Tls12 => &[&rustls::version::TLS12],
    };
    let mut c = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("rustls: protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("rustls: certificate and key");
    c.alpn_protocols = vec![ALPN.to_vec()];
    // Full handshakes only: nothing stored, no ticket sent. (The default
    // ticketer already never produces stateless tickets.)
    c.session_storage = Arc::new(NoServerSessionStorage {});
    c.send_tls13_tickets = 0;
    c
}
