//! TLS over a [`Socket`], through one BIO method that every connection shares.
//!
//! rust-openssl's `SslStream` (under tokio-openssl) builds a BIO method for
//! each stream (`BIO_meth_new`) and boxes the stream with its error and
//! panic slots behind the BIO: about 200 bytes for every TLS client, idle
//! or not, on top of the BIO itself. PgBouncer hands OpenSSL the socket
//! (`SSL_set_fd`) and pays only for the BIO. Here the method is built once,
//! the socket stays inline in [`TlsStream`], and the BIO's data pointer
//! names the current call (socket halves, task context, error slot) only
//! while OpenSSL runs inside it: the reads and writes still go through
//! [`Socket`]'s readiness, so a TLS client waits on the runtime exactly as
//! a plain one does (reading only, writability asked for only while a send
//! blocks).

use std::ffi::{c_char, c_int, c_long, c_void};
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::ptr;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use foreign_types::{ForeignType as _, ForeignTypeRef as _};
use openssl::error::ErrorStack;
use openssl::ssl::{ErrorCode, Ssl, SslContextRef, SslRef, SslVerifyMode};
use openssl_sys as ffi;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::socket::{Socket, SocketRead, SocketWrite};

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

/// A TLS connection: OpenSSL's session object and the socket under it.
/// Which transport carries it is not kept: it would widen every
/// [`super::Stream`] for the rare question (peer authentication under TLS)
/// that `getsockname` answers.
#[derive(Debug)]
pub struct TlsStream {
    ssl: Ssl,
    socket: Socket,
}

/// Why a TLS operation failed: OpenSSL's code and, when there is one, the
/// socket's error or OpenSSL's error queue.
#[derive(Debug)]
pub struct TlsError {
    code: ErrorCode,
    cause: Option<Cause>,
}

#[derive(Debug)]
enum Cause {
    Io(io::Error),
    Ssl(ErrorStack),
}

impl TlsError {
    /// OpenSSL's `SSL_get_error` code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The socket's error, when the BIO hit one.
    pub fn io_error(&self) -> Option<&io::Error> {
        match &self.cause {
            Some(Cause::Io(e)) => Some(e),
            _ => None,
        }
    }

    /// OpenSSL's error queue, when it said why.
    pub fn ssl_error(&self) -> Option<&ErrorStack> {
        match &self.cause {
            Some(Cause::Ssl(e)) => Some(e),
            _ => None,
        }
    }

    fn into_io(self) -> io::Error {
        match self.cause {
            Some(Cause::Io(e)) => e,
            _ => io::Error::other(self.to_string()),
        }
    }
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.cause {
            Some(Cause::Io(e)) => write!(f, "{e}"),
            Some(Cause::Ssl(e)) => write!(f, "{e}"),
            None if self.code == ErrorCode::ZERO_RETURN => {
                f.write_str("the TLS session was closed")
            }
            None if self.code == ErrorCode::SYSCALL => f.write_str("unexpected end of file"),
            None => write!(f, "OpenSSL error code {}", self.code.as_raw()),
        }
    }
}

impl std::error::Error for TlsError {}

/// What a BIO callback reaches through the BIO's data pointer, for one call
/// into OpenSSL.
struct Call<'a, 'b> {
    read: SocketRead<'a>,
    write: SocketWrite<'a>,
    cx: &'a mut Context<'b>,
    /// The peer's bytes read off the socket before the handshake, which
    /// reads take before the socket's; and how many of them were taken.
    early: &'a [u8],
    early_taken: usize,
    /// The socket's error, for the caller.
    error: Option<io::Error>,
    /// A read or write is waiting for the socket: the task will be woken.
    blocked: bool,
}

/// How one step of OpenSSL ended.
enum Step<T> {
    Done(T),
    /// Not done yet; the task will be woken.
    Blocked,
    Failed(TlsError),
}

/// A session for `ctx`. rust-openssl's `Ssl::new` stores a copy of the
/// context in every session's ex-data (a boxed handle and a two-block
/// OpenSSL stack, about 100 bytes of each TLS client's life), which its
/// certificate-verify trampoline reads to find the callback. A context
/// that asks for no client certificate never calls that trampoline, so
/// its sessions are made with `SSL_new` alone (which holds the context
/// itself); one that verifies clients gets `Ssl::new`'s.
pub fn session(ctx: &SslContextRef) -> io::Result<Ssl> {
    if ctx.verify_mode() != SslVerifyMode::NONE {
        return Ssl::new(ctx).map_err(io::Error::other);
    }
    // SAFETY: the context is live; SSL_new returns an owned session or null.
    unsafe {
        let ssl = ffi::SSL_new(ctx.as_ptr());
        if ssl.is_null() {
            return Err(io::Error::other(ErrorStack::get()));
        }
        Ok(Ssl::from_ptr(ssl))
    }
}

impl TlsStream {
    /// Puts `ssl` over `socket`; the handshake is still to run.
    pub fn new(ssl: Ssl, socket: Socket) -> io::Result<TlsStream> {
        let method = method()?;
        // SAFETY: the method lives for the whole process; BIO_new returns an
        // owned BIO or null, and SSL_set_bio takes that one reference (both
        // directions share it), so SSL_free frees it.
        unsafe {
            let bio = ffi::BIO_new(method.0);
            if bio.is_null() {
                return Err(io::Error::other(ErrorStack::get()));
            }
            ffi::BIO_set_init(bio, 1);
            ffi::SSL_set_bio(ssl.as_ptr(), bio, bio);
        }
        Ok(TlsStream { ssl, socket })
    }

    /// The TLS session.
    pub fn ssl(&self) -> &SslRef {
        &self.ssl
    }

    /// The socket under the session.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }

    /// Runs the server side of the handshake. `early` is what the client
    /// sent that was already read off the socket (the start of a direct
    /// TLS ClientHello): the handshake reads it first.
    pub async fn accept(&mut self, mut early: &[u8]) -> Result<(), TlsError> {
        self.ssl.set_accept_state();
        std::future::poll_fn(|cx| self.poll_handshake(cx, &mut early)).await?;
        if !early.is_empty() {
            // Only a ClientHello comes before the server's answer: more
            // would be records sent blind, which nobody reads.
            return Err(TlsError {
                code: ErrorCode::SSL,
                cause: Some(Cause::Io(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the client sent data before the handshake ended",
                ))),
            });
        }
        Ok(())
    }

    /// Sends close_notify, without waiting for the peer's: all a
    /// connection about to be closed needs (closing the socket ends its
    /// sending side too).
    pub fn poll_close_notify(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let step = self.step(cx, &mut &[][..], |ssl| {
            // SAFETY: the SSL is live for the call.
            let ret = unsafe { ffi::SSL_shutdown(ssl) };
            // 0 (sent) and 1 (both sides closed) are both done for a sender.
            (if ret >= 0 { 1 } else { ret }, ())
        });
        match step {
            Step::Done(()) => Poll::Ready(Ok(())),
            Step::Blocked => Poll::Pending,
            Step::Failed(e) if e.code == ErrorCode::ZERO_RETURN => Poll::Ready(Ok(())),
            Step::Failed(e) => Poll::Ready(Err(e.into_io())),
        }
    }

    /// Runs the client side of the handshake.
    pub async fn connect(&mut self) -> Result<(), TlsError> {
        self.ssl.set_connect_state();
        std::future::poll_fn(|cx| self.poll_handshake(cx, &mut &[][..])).await
    }

    fn poll_handshake(
        &mut self,
        cx: &mut Context<'_>,
        early: &mut &[u8],
    ) -> Poll<Result<(), TlsError>> {
        // SAFETY: the SSL is live for the call.
        match self.step(cx, early, |ssl| (unsafe { ffi::SSL_do_handshake(ssl) }, ())) {
            Step::Done(()) => Poll::Ready(Ok(())),
            Step::Blocked => Poll::Pending,
            Step::Failed(e) => Poll::Ready(Err(e)),
        }
    }

    /// Runs one OpenSSL operation with the BIO pointed at this call's
    /// socket halves, task context and bytes read early (what the BIO
    /// takes of them is gone from `early` after); `op` returns OpenSSL's
    /// return value (positive for success) and its result.
    fn step<T>(
        &mut self,
        cx: &mut Context<'_>,
        early: &mut &[u8],
        op: impl FnOnce(*mut ffi::SSL) -> (c_int, T),
    ) -> Step<T> {
        let ssl = self.ssl.as_ptr();
        let (read, write) = self.socket.split();
        let early_bytes: &[u8] = std::mem::take(early);
        let mut call = Call {
            read,
            write,
            cx,
            early: early_bytes,
            early_taken: 0,
            error: None,
            blocked: false,
        };
        // SAFETY: the BIO is the SSL's own (set in `new`, freed with it);
        // its data points at `call` only until OpenSSL returns, and OpenSSL
        // touches the BIO only inside the calls made here.
        let ret = unsafe {
            let bio = ffi::SSL_get_rbio(ssl);
            ffi::BIO_set_data(bio, (&mut call as *mut Call<'_, '_>).cast());
            let ret = op(ssl);
            ffi::BIO_set_data(bio, ptr::null_mut());
            ret
        };
        *early = &early_bytes[call.early_taken..];
        if ret.0 > 0 {
            return Step::Done(ret.1);
        }
        // SAFETY: as above; SSL_get_error reads the session's state.
        let code = ErrorCode::from_raw(unsafe { ffi::SSL_get_error(ssl, ret.0) });
        let cause = match code {
            ErrorCode::WANT_READ | ErrorCode::WANT_WRITE if call.error.is_none() => {
                if !call.blocked {
                    // OpenSSL consumed a record that carried no application
                    // data and wants another go: yield to the runtime first,
                    // so that no peer can keep this thread in a loop.
                    call.cx.waker().wake_by_ref();
                }
                return Step::Blocked;
            }
            ErrorCode::WANT_READ | ErrorCode::WANT_WRITE => call.error.take().map(Cause::Io),
            ErrorCode::SSL => Some(Cause::Ssl(ErrorStack::get())),
            ErrorCode::SYSCALL => {
                let queue = ErrorStack::get();
                if queue.errors().is_empty() {
                    call.error.take().map(Cause::Io)
                } else {
                    Some(Cause::Ssl(queue))
                }
            }
            _ => None,
        };
        Step::Failed(TlsError { code, cause })
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // SAFETY: SSL_read_ex writes only initialised bytes into the
        // unfilled part, and `assume_init` below covers what it wrote.
        let dst = unsafe { buf.unfilled_mut() };
        if dst.is_empty() {
            return Poll::Ready(Ok(()));
        }
        let step = this.step(cx, &mut &[][..], |ssl| {
            let mut n = 0usize;
            // SAFETY: `dst` is valid for its length for the call.
            let ret = unsafe { ffi::SSL_read_ex(ssl, dst.as_mut_ptr().cast(), dst.len(), &mut n) };
            (ret, n)
        });
        let n = match step {
            Step::Done(n) => n,
            Step::Blocked => return Poll::Pending,
            // A close_notify, or (as rust-openssl reads it) an end of file
            // with nothing to say why: the peer is gone.
            Step::Failed(e) if e.code == ErrorCode::ZERO_RETURN => 0,
            Step::Failed(e) if e.code == ErrorCode::SYSCALL && e.io_error().is_none() => 0,
            Step::Failed(e) => return Poll::Ready(Err(e.into_io())),
        };
        // SAFETY: SSL_read_ex initialised the first `n` unfilled bytes.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let step = this.step(cx, &mut &[][..], |ssl| {
            let mut n = 0usize;
            // SAFETY: `data` is valid for its length for the call; the
            // context's modes allow a retry with another buffer.
            let ret = unsafe { ffi::SSL_write_ex(ssl, data.as_ptr().cast(), data.len(), &mut n) };
            (ret, n)
        });
        match step {
            Step::Done(n) => Poll::Ready(Ok(n)),
            Step::Blocked => Poll::Pending,
            Step::Failed(e) => Poll::Ready(Err(e.into_io())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Sends close_notify (without waiting for the peer's), then shuts the
    /// socket's sending side.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_close_notify(cx))?;
        Pin::new(&mut this.socket).poll_shutdown(cx)
    }
}

/// The process's one BIO method (never freed: every stream may use it).
struct Method(*mut ffi::BIO_METHOD);

// SAFETY: the method is written once, before it is shared, and only read
// by OpenSSL afterwards.
unsafe impl Send for Method {}
// SAFETY: as above.
unsafe impl Sync for Method {}

fn method() -> io::Result<&'static Method> {
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
/// `Call` (set by [`TlsStream::step`]).
unsafe fn call<'c>(bio: *mut ffi::BIO) -> Option<&'c mut Call<'c, 'c>> {
    ffi::BIO_get_data(bio).cast::<Call<'c, 'c>>().as_mut()
}

unsafe extern "C" fn bread(bio: *mut ffi::BIO, buf: *mut c_char, len: c_int) -> c_int {
    ffi::BIO_clear_retry_flags(bio);
    let Some(call) = call(bio) else { return -1 };
    let len = usize::try_from(len).unwrap_or(0);
    let early = &call.early[call.early_taken..];
    if !early.is_empty() {
        let n = early.len().min(len);
        // SAFETY: OpenSSL hands a buffer valid for `len` bytes, and `n`
        // is no more than `len` nor than the early bytes left.
        ptr::copy_nonoverlapping(early.as_ptr(), buf.cast::<u8>(), n);
        call.early_taken += n;
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
