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

/// Lets OpenSSL read as much as the socket holds instead of a record's
/// exact length: a record is one system call instead of two (header, then
/// body), and a read that comes back short tells the runtime the socket is
/// drained, so the next read waits for readiness instead of asking the
/// kernel for an EAGAIN once per message.
pub(crate) fn read_whole_records(b: &mut openssl::ssl::SslContextBuilder) {
    b.set_read_ahead(true);
}

// SSL_has_pending (OpenSSL 1.1.0 and later) is not bound by openssl-sys.
extern "C" {
    fn SSL_has_pending(s: *const openssl_sys::SSL) -> std::ffi::c_int;
}

/// True when OpenSSL holds bytes of the connection not yet returned by a
/// read: decrypted ones, or (with read-ahead) received and not decrypted,
/// which `SslRef::pending` does not count.
pub(crate) fn has_pending(ssl: &openssl::ssl::SslRef) -> bool {
    use foreign_types::ForeignTypeRef as _;
    // SAFETY: the pointer comes from a live SslRef borrowed for the call,
    // and SSL_has_pending only reads the connection's buffers.
    unsafe { SSL_has_pending(ssl.as_ptr()) == 1 }
}
