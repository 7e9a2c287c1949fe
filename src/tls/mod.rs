//! TLS: the per-transport policy and the native-tls acceptor/connector; the
//! only place that knows about certificates.

pub mod acceptor;
pub mod connector;
pub mod policy;

pub use acceptor::{build_acceptor, Acceptor, TlsError};
pub use connector::BackendTls;
pub use policy::{SslMode, Transport};
