//! TLS: the per-transport policy, the OpenSSL acceptor and connector, the
//! client certificate toward servers and channel-binding data; the only
//! place that knows about certificates.

pub mod acceptor;
pub mod alpn;
pub mod channel_binding;
mod client_cert;
pub mod connector;
mod crl;
pub mod policy;
pub mod validity;
pub mod verify;

pub use acceptor::{build_acceptor, certificate_not_after, Acceptor, TlsError};
pub use connector::{check_databases, BackendTls};
pub use validity::expiry_warnings;
