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

use std::ffi::c_int;
use std::io;
use std::pin::Pin;
use std::ptr;
use std::task::{Context, Poll};

use foreign_types::{ForeignType as _, ForeignTypeRef as _};
use openssl::error::ErrorStack;
use openssl::ssl::{ErrorCode, Ssl, SslContextRef, SslRef, SslVerifyMode};
use openssl_sys as ffi;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::socket::Socket;
use super::tls_bio::{method, Call};

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
        match self.step_with(cx, early, |ssl| (unsafe { ffi::SSL_do_handshake(ssl) }, ())) {
            Step::Done(()) => Poll::Ready(Ok(())),
            Step::Blocked => Poll::Pending,
            Step::Failed(e) => Poll::Ready(Err(e)),
        }
    }

    /// Sends close_notify, without waiting for the peer's: all a
    /// connection about to be closed needs (closing the socket ends its
    /// sending side too).
    pub fn poll_close_notify(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let step = self.step(cx, |ssl| {
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

    /// Runs one OpenSSL operation with the BIO pointed at this call's
    /// socket halves and task context; `op` returns OpenSSL's return value
    /// (positive for success) and its result.
    fn step<T>(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(*mut ffi::SSL) -> (c_int, T),
    ) -> Step<T> {
        self.step_with(cx, &mut &[][..], op)
    }

    /// [`TlsStream::step`] with bytes read early, which the BIO serves
    /// before the socket's (what it takes of them is gone from `early`
    /// after).
    fn step_with<T>(
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
        *early = &early_bytes[early_bytes.len() - call.early.len()..];
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
        let step = this.step(cx, |ssl| {
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
        let step = this.step(cx, |ssl| {
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
