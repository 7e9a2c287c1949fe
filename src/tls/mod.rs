//! TLS: the per-transport policy and the native-tls acceptor/connector.

pub mod policy;

pub use policy::{SslMode, Transport};
