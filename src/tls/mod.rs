//! TLS: the per-transport policy, the OpenSSL acceptor and connector, the
//! client certificate toward servers and channel-binding data; the only
//! place that knows about certificates.

pub mod acceptor;
pub mod alpn;
pub mod channel_binding;
mod client_cert;
pub mod connector;
mod crl;
pub mod label;
mod native;
pub mod policy;
mod suites;
pub mod validity;
pub mod verify;

pub use acceptor::{build_acceptor, certificate_not_after, Acceptor, TlsError};
pub use connector::{check_databases, BackendTls};
pub use validity::expiry_warnings;

/// Lets OpenSSL read as much as the socket holds instead of a record's
/// exact length: a record is one system call instead of two (header, then
/// body), and a read that comes back short tells the runtime the socket is
/// drained, so the next read waits for readiness instead of asking the
/// kernel for an EAGAIN once per message.
pub(crate) fn read_whole_records(b: &mut openssl::ssl::SslContextBuilder) {
    b.set_read_ahead(true);
}
