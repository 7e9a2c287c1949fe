//! The few calls whose binding differs between the system's OpenSSL and
//! AWS-LC's libssl (the `aws-lc` feature, the default): same API through
//! rust-openssl, but AWS-LC has functions where OpenSSL has `SSL_CTX_ctrl`
//! macros, and rust-openssl leaves some of either unbound.

#[cfg(not(feature = "aws-lc"))]
use std::ffi::{c_int, c_long};
use std::path::Path;

use foreign_types::ForeignTypeRef as _;
use openssl::error::ErrorStack;
use openssl::ssl::{SslContextBuilder, SslContextRef, SslMode, SslVerifyMode};
use openssl::x509::store::{File, HashDir, X509LookupRef};
use openssl::x509::X509Ref;
#[cfg(not(feature = "aws-lc"))]
use openssl::{ssl::SslFiletype, x509::X509};

/// The verification asked of a client that must show a certificate.
/// OpenSSL's `CLIENT_ONCE` keeps a renegotiation from asking again; AWS-LC
/// never renegotiates as a server, so it has no such flag.
#[cfg(not(feature = "aws-lc"))]
pub(super) const CLIENT_VERIFY: SslVerifyMode =
    SslVerifyMode::PEER.union(SslVerifyMode::CLIENT_ONCE);
#[cfg(feature = "aws-lc")]
pub(super) const CLIENT_VERIFY: SslVerifyMode = SslVerifyMode::PEER;

/// No session tickets, in TLS 1.3 as well.
pub(super) fn no_tickets(b: &mut SslContextBuilder) -> Result<(), ErrorStack> {
    #[cfg(not(feature = "aws-lc"))]
    return b.set_num_tickets(0);
    #[cfg(feature = "aws-lc")]
    // SAFETY: the context is live and exclusively borrowed.
    return match unsafe { openssl_sys::SSL_CTX_set_num_tickets(b.as_ptr(), 0) } {
        1 => Ok(()),
        _ => Err(ErrorStack::get()),
    };
}

/// The certificate the context shows its peers.
pub(super) fn certificate(ctx: &SslContextRef) -> Option<&X509Ref> {
    #[cfg(not(feature = "aws-lc"))]
    return ctx.certificate();
    #[cfg(feature = "aws-lc")]
    // SAFETY: get0 returns the context's own certificate (or null) without
    // a reference, so it lives as long as the borrowed context.
    return unsafe {
        let cert = openssl_sys::SSL_CTX_get0_certificate(ctx.as_ptr());
        (!cert.is_null()).then(|| X509Ref::from_ptr(cert))
    };
}

/// Asks the library to compress, where it can (OpenSSL built with zlib);
/// AWS-LC has no TLS compression, so the request goes unheard, as libpq's
/// does with such a library.
pub(super) fn allow_compression(b: &mut openssl::ssl::SslConnectorBuilder) {
    #[cfg(not(feature = "aws-lc"))]
    b.clear_options(openssl::ssl::SslOptions::NO_COMPRESSION);
    #[cfg(feature = "aws-lc")]
    let _ = b;
}

/// Loads the PEM CRLs of `file` into the store behind `lookup`.
pub(super) fn load_crl_file(lookup: &mut X509LookupRef<File>, file: &Path) -> Result<(), String> {
    #[cfg(not(feature = "aws-lc"))]
    return lookup
        .load_crl_file(file, SslFiletype::PEM)
        .map(|_| ())
        .map_err(|e| e.to_string());
    #[cfg(feature = "aws-lc")]
    // SAFETY: the lookup is live and borrowed, the path a C string for the call.
    return with_c_path(file, |path| unsafe {
        openssl_sys::X509_load_crl_file(lookup.as_ptr(), path, openssl_sys::X509_FILETYPE_PEM)
    });
}

/// Makes `dir` (an `openssl rehash` directory) a place the store looks for
/// CRLs during a check.
pub(super) fn add_crl_dir(lookup: &mut X509LookupRef<HashDir>, dir: &Path) -> Result<(), String> {
    #[cfg(not(feature = "aws-lc"))]
    return lookup
        .add_dir(&dir.to_string_lossy(), SslFiletype::PEM)
        .map_err(|e| e.to_string());
    #[cfg(feature = "aws-lc")]
    // SAFETY: as in load_crl_file.
    return with_c_path(dir, |path| unsafe {
        openssl_sys::X509_LOOKUP_add_dir(lookup.as_ptr(), path, openssl_sys::X509_FILETYPE_PEM)
    });
}

/// Calls an X509_LOOKUP function with `path` as a C string: it loads the
/// CRLs of a file (returning how many) or adds a directory (returning 1),
/// and 0 means it failed, with the reason on the error queue.
#[cfg(feature = "aws-lc")]
fn with_c_path(
    path: &Path,
    call: impl FnOnce(*const std::ffi::c_char) -> std::ffi::c_int,
) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| "the path holds a NUL byte".to_string())?;
    if call(path.as_ptr()) > 0 {
        Ok(())
    } else {
        Err(ErrorStack::get().to_string())
    }
}

/// A certificate file with no chain after the leaf: OpenSSL completes the
/// chain from the trust store (`tls.ca_file`) on every handshake, a
/// certificate verification per login. Built here once instead, with the
/// same result (whatever the store yields, errors ignored); left to
/// OpenSSL's per-handshake way if building fails (a CA below the security
/// level), so what clients are sent never changes.
///
/// The built chain moves to the context's extra certificates: OpenSSL
/// copies the certificate's own chain into every connection (a stack, even
/// an empty one, for each TLS client's life), never the extra ones, and
/// with automatic chaining off it sends the same certificates.
#[cfg(not(feature = "aws-lc"))]
pub(super) fn build_chain_once(b: &mut SslContextBuilder) {
    // SSL_CTX_build_cert_chain, SSL_CTX_get0_chain_certs and
    // SSL_CTX_clear_chain_certs: macros over SSL_CTX_ctrl in ssl.h.
    const SSL_CTRL_CHAIN: c_int = 88;
    const SSL_CTRL_BUILD_CERT_CHAIN: c_int = 105;
    const SSL_CTRL_GET_CHAIN_CERTS: c_int = 115;
    const IGNORE_ERROR_AND_CLEAR: c_long = 0x8 | 0x10;
    // SAFETY: the context is live and exclusively borrowed, the command
    // takes no pointer argument.
    let built = unsafe {
        openssl_sys::SSL_CTX_ctrl(
            b.as_ptr(),
            SSL_CTRL_BUILD_CERT_CHAIN,
            IGNORE_ERROR_AND_CLEAR,
            std::ptr::null_mut(),
        )
    };
    if built <= 0 {
        let why = openssl::error::ErrorStack::get();
        tracing::debug!(error = %why, "certificate chain left to each handshake");
        return;
    }
    let mut chain: *mut openssl_sys::stack_st_X509 = std::ptr::null_mut();
    // SAFETY: get0 writes a pointer to the context's own stack (or null)
    // and takes no reference; the certificates are copied (up-referenced)
    // out of it before the clear below frees it.
    let certs: Vec<X509> = unsafe {
        openssl_sys::SSL_CTX_ctrl(
            b.as_ptr(),
            SSL_CTRL_GET_CHAIN_CERTS,
            0,
            (&mut chain as *mut *mut openssl_sys::stack_st_X509).cast(),
        );
        if chain.is_null() {
            return;
        }
        <openssl::stack::StackRef<X509> as foreign_types::ForeignTypeRef>::from_ptr(chain)
            .iter()
            .map(|c| c.to_owned())
            .collect()
    };
    // The extra certificates first: they count only once the certificate's
    // own chain is cleared, so a failure here leaves the built chain in use.
    for cert in certs {
        if let Err(e) = b.add_extra_chain_cert(cert) {
            tracing::debug!(error = %e, "built certificate chain kept per connection");
            return;
        }
    }
    // SAFETY: as above; a null stack clears the certificate's chain.
    unsafe {
        openssl_sys::SSL_CTX_ctrl(b.as_ptr(), SSL_CTRL_CHAIN, 0, std::ptr::null_mut());
    }
    b.set_mode(SslMode::NO_AUTO_CHAIN);
}

/// A certificate file with no chain after the leaf: AWS-LC, unlike OpenSSL,
/// never completes the chain from the trust store (`tls.ca_file`) by itself
/// (`SSL_MODE_NO_AUTO_CHAIN` is its default). Built here once, as the
/// OpenSSL build does, so clients are sent the same certificates with
/// either library; if building fails, the per-handshake completion
/// OpenSSL would fall back to is turned on instead.
#[cfg(feature = "aws-lc")]
pub(super) fn build_chain_once(b: &mut SslContextBuilder) {
    const IGNORE_ERROR_AND_CLEAR: std::ffi::c_int = openssl_sys::SSL_BUILD_CHAIN_FLAG_IGNORE_ERROR
        | openssl_sys::SSL_BUILD_CHAIN_FLAG_CLEAR_ERROR;
    // SAFETY: the context is live and exclusively borrowed.
    let built =
        unsafe { openssl_sys::SSL_CTX_build_cert_chain(b.as_ptr(), IGNORE_ERROR_AND_CLEAR) };
    if built <= 0 {
        let why = ErrorStack::get();
        tracing::debug!(error = %why, "certificate chain left to each handshake");
        // SAFETY: as above.
        unsafe { openssl_sys::SSL_CTX_clear_mode(b.as_ptr(), SslMode::NO_AUTO_CHAIN.bits() as _) };
    }
}

/// The key-exchange group a finished handshake used, by OpenSSL's short
/// name (`X25519`, `prime256v1`); `None` without one (TLS 1.2 RSA key
/// exchange) or for a group the library has no name for.
pub(super) fn negotiated_group(ssl: &openssl::ssl::SslRef) -> Option<&'static str> {
    #[cfg(not(feature = "aws-lc"))]
    // SSL_get_negotiated_group: a macro over SSL_ctrl in OpenSSL 3's ssl.h.
    const SSL_CTRL_GET_NEGOTIATED_GROUP: c_int = 134;
    // SAFETY: the session is live and borrowed; the control takes no pointer.
    #[cfg(not(feature = "aws-lc"))]
    let nid = unsafe {
        openssl_sys::SSL_ctrl(
            ssl.as_ptr(),
            SSL_CTRL_GET_NEGOTIATED_GROUP,
            0,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: as above.
    #[cfg(feature = "aws-lc")]
    let nid = unsafe { openssl_sys::SSL_get_negotiated_group(ssl.as_ptr()) };
    let nid = std::ffi::c_int::try_from(nid).ok().filter(|n| *n > 0)?;
    // SAFETY: OBJ_nid2sn returns a pointer into the library's static object
    // table, or null for an unknown NID.
    let name = unsafe { openssl_sys::OBJ_nid2sn(nid) };
    if name.is_null() {
        return None;
    }
    // SAFETY: a static, NUL-terminated C string (checked non-null above).
    unsafe { std::ffi::CStr::from_ptr(name) }.to_str().ok()
}
