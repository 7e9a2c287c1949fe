//! The BIO method every TLS stream shares, and its callbacks: reads and
//! writes go to the socket halves of the call in progress ([`Call`], named
//! by the BIO's data pointer only while OpenSSL runs inside a call of
//! [`super::tls::TlsStream`]'s), reads first from the bytes the handshake
//! was given early.

use std::ffi::{c_char, c_int, c_long, c_void};
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::ptr;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use openssl_sys as ffi;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::socket::{SocketRead, SocketWrite};

// rust-openssl binds OpenSSL's setters under fixed names; AWS-LC's
// bindings are its own headers'.
#[cfg(feature = "aws-lc")]
use ffi::{
    BIO_meth_set_ctrl as meth_set_ctrl, BIO_meth_set_read as meth_set_read,
    BIO_meth_set_write as meth_set_write,
};
#[cfg(not(feature = "aws-lc"))]
use ffi::{
    BIO_meth_set_ctrl__fixed_rust as meth_set_ctrl, BIO_meth_set_read__fixed_rust as meth_set_read,
    BIO_meth_set_write__fixed_rust as meth_set_write,
};

/// What a BIO callback reaches through the BIO's data pointer, for one call
/// into OpenSSL.
pub(super) struct Call<'a, 'b> {
    pub(super) read: SocketRead<'a>,
    pub(super) write: SocketWrite<'a>,
    pub(super) cx: &'a mut Context<'b>,
    /// What is left of the peer's bytes read off the socket before the
    /// handshake, which reads take before the socket's.
    pub(super) early: &'a [u8],
    /// The socket's error, for the caller.
    pub(super) error: Option<io::Error>,
    /// A read or write is waiting for the socket: the task will be woken.
    pub(super) blocked: bool,
}

/// The process's one BIO method (never freed: every stream may use it).
pub(super) struct Method(pub(super) *mut ffi::BIO_METHOD);

// SAFETY: the method is written once, before it is shared, and only read
// by OpenSSL afterwards.
unsafe impl Send for Method {}
// SAFETY: as above.
unsafe impl Sync for Method {}

/// The method, made at first use.
pub(super) fn method() -> io::Result<&'static Method> {
    static METHOD: OnceLock<Option<Method>> = OnceLock::new();
    METHOD
        .get_or_init(|| {
            // SAFETY: a new method is exclusively ours until it is stored;
            // the callbacks match OpenSSL's signatures.
            unsafe {
                let m = ffi::BIO_meth_new(ffi::BIO_TYPE_NONE, c"pgharbor".as_ptr());
                if m.is_null() {
                    return None;
                }
                let ok = meth_set_write(m, Some(bwrite)) == 1
                    && meth_set_read(m, Some(bread)) == 1
                    && meth_set_ctrl(m, Some(ctrl)) == 1;
                ok.then_some(Method(m))
            }
        })
        .as_ref()
        .ok_or_else(|| io::Error::other("OpenSSL could not make a BIO method"))
}

/// The call a BIO is serving, or None outside one.
///
/// # Safety
/// `bio` is a BIO of this method; its data is null or points at a live
/// `Call` (set by `TlsStream::step_with`).
unsafe fn call<'c>(bio: *mut ffi::BIO) -> Option<&'c mut Call<'c, 'c>> {
    ffi::BIO_get_data(bio).cast::<Call<'c, 'c>>().as_mut()
}

unsafe extern "C" fn bread(bio: *mut ffi::BIO, buf: *mut c_char, len: c_int) -> c_int {
    ffi::BIO_clear_retry_flags(bio);
    let Some(call) = call(bio) else { return -1 };
    let len = usize::try_from(len).unwrap_or(0);
    if !call.early.is_empty() {
        let n = call.early.len().min(len);
        // SAFETY: OpenSSL hands a buffer valid for `len` bytes, and `n`
        // is no more than `len` nor than the early bytes left.
        ptr::copy_nonoverlapping(call.early.as_ptr(), buf.cast::<u8>(), n);
        call.early = &call.early[n..];
        return c_int::try_from(n).unwrap_or(c_int::MAX);
    }
    // SAFETY: OpenSSL hands a buffer valid for `len` bytes.
    let dst = std::slice::from_raw_parts_mut(buf.cast::<MaybeUninit<u8>>(), len);
    let mut dst = ReadBuf::uninit(dst);
    match Pin::new(&mut call.read).poll_read(call.cx, &mut dst) {
        Poll::Ready(Ok(())) => c_int::try_from(dst.filled().len()).unwrap_or(c_int::MAX),
        Poll::Ready(Err(e)) => {
            call.error = Some(e);
            -1
        }
        Poll::Pending => {
            call.blocked = true;
            ffi::BIO_set_retry_read(bio);
            -1
        }
    }
}

unsafe extern "C" fn bwrite(bio: *mut ffi::BIO, buf: *const c_char, len: c_int) -> c_int {
    ffi::BIO_clear_retry_flags(bio);
    let Some(call) = call(bio) else { return -1 };
    let len = usize::try_from(len).unwrap_or(0);
    // SAFETY: OpenSSL hands bytes valid for `len`.
    let data = std::slice::from_raw_parts(buf.cast::<u8>(), len);
    match Pin::new(&mut call.write).poll_write(call.cx, data) {
        Poll::Ready(Ok(n)) => c_int::try_from(n).unwrap_or(c_int::MAX),
        Poll::Ready(Err(e)) => {
            call.error = Some(e);
            -1
        }
        Poll::Pending => {
            call.blocked = true;
            ffi::BIO_set_retry_write(bio);
            -1
        }
    }
}

unsafe extern "C" fn ctrl(_: *mut ffi::BIO, cmd: c_int, _: c_long, _: *mut c_void) -> c_long {
    // Writes go straight to the socket: there is nothing to flush. Every
    // other control is unsupported, as in rust-openssl's BIO.
    c_long::from(cmd == ffi::BIO_CTRL_FLUSH)
}
