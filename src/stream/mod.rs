//! The byte streams pgharbor speaks over (TCP, Unix socket), the halves the
//! relay uses to move both directions at once, and framed reads on top of
//! [`FrameBuf`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::protocol::{Frame, FrameBuf, Violation};

mod accepted;
mod socket;
mod tls;
mod tls_bio;
mod tls_reason;
#[cfg(test)]
mod tls_tests;

pub use accepted::{Accepted, EarlyReads};
pub use socket::{Socket, SocketRead, SocketWrite};
pub use tls::{TlsError, TlsStream};

/// A connected socket of either transport, possibly under TLS.
#[derive(Debug)]
pub enum Stream {
    /// TCP.
    Tcp(Socket),
    /// Unix-domain socket.
    Unix(Socket),
    /// TLS over either of the above.
    Tls(TlsStream),
    /// Placeholder while the socket is handed to a TLS handshake; every I/O fails.
    Detached(Detached),
}

/// Read half borrowed from a [`Stream`]; no allocation, and no lock for plain sockets.
pub enum ReadHalf<'a> {
    /// TCP or Unix-domain socket.
    Plain(SocketRead<'a>),
    /// TLS (one session object serves both directions, so tokio's split locks it).
    Tls(tokio::io::ReadHalf<&'a mut TlsStream>),
    /// No socket.
    Detached(Detached),
}

/// Write half borrowed from a [`Stream`].
pub enum WriteHalf<'a> {
    /// TCP or Unix-domain socket.
    Plain(SocketWrite<'a>),
    /// TLS.
    Tls(tokio::io::WriteHalf<&'a mut TlsStream>),
    /// No socket.
    Detached(Detached),
}

/// The I/O object behind [`Stream::Detached`]: every operation fails.
#[derive(Debug, Default)]
pub struct Detached;

fn detached() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "socket handed to a TLS handshake",
    )
}

impl AsyncRead for Detached {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Err(detached()))
    }
}

impl AsyncWrite for Detached {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(detached()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Stream {
    /// Ready once the connection has data (or EOF), without a buffer to
    /// read into, so an idle client holds none (nor a waiter: see
    /// [`Socket::poll_readable`]).
    pub fn poll_readable(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let ready = std::task::Poll::Ready(Ok(()));
        match self {
            Stream::Tcp(s) | Stream::Unix(s) => s.poll_readable(cx),
            // Bytes OpenSSL holds (decrypted, or read ahead and not yet
            // decrypted) are ready now; otherwise the next byte must come
            // from the socket. With read-ahead OpenSSL's reads are short once
            // the socket is drained, so the runtime's readiness is true.
            Stream::Tls(tls) if !has_pending(tls.ssl()) => tls.socket().poll_readable(cx),
            Stream::Tls(_) | Stream::Detached(_) => ready,
        }
    }

    /// The socket of a plain (not TLS) stream, to hand to another process.
    pub fn plain_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        match self {
            Stream::Tcp(s) | Stream::Unix(s) => Some(s.as_fd()),
            Stream::Tls(_) | Stream::Detached(_) => None,
        }
    }

    /// Borrows both halves so the relay can read and write concurrently.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        match self {
            Stream::Tcp(s) | Stream::Unix(s) => {
                let (r, w) = s.split();
                (ReadHalf::Plain(r), WriteHalf::Plain(w))
            }
            Stream::Tls(s) => {
                let (r, w) = tokio::io::split(s);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
            Stream::Detached(_) => (ReadHalf::Detached(Detached), WriteHalf::Detached(Detached)),
        }
    }

    /// Runs the client side of a TLS handshake toward a server named `host`.
    pub async fn connect_tls(
        &mut self,
        connector: &openssl::ssl::SslConnector,
        host: &str,
        verify_hostname: bool,
        sni: bool,
    ) -> io::Result<()> {
        let mut config = connector.configure().map_err(io::Error::other)?;
        config.set_verify_hostname(verify_hostname);
        // OpenSSL never sends an IP address as SNI; `sni` is libpq's sslsni.
        config.set_use_server_name_indication(sni);
        let ssl = config.into_ssl(host).map_err(io::Error::other)?;
        let mut tls = self.detach_for_tls(ssl)?;
        if let Err(e) = tls.connect().await {
            // OpenSSL's error stack only says "certificate verify failed"; the
            // verify result says why (unknown CA, expired, wrong host name).
            let verify = tls.ssl().verify_result();
            let text = if verify == openssl::x509::X509VerifyResult::OK {
                tls_reason::text(&e)
            } else if [
                openssl_sys::X509_V_ERR_HOSTNAME_MISMATCH,
                openssl_sys::X509_V_ERR_IP_ADDRESS_MISMATCH,
            ]
            .contains(&verify.as_raw())
            {
                format!("server certificate does not match host name \"{host}\"")
            } else {
                format!("certificate verify failed: {}", verify.error_string())
            };
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, text));
        }
        *self = Stream::Tls(tls);
        Ok(())
    }

    /// The server's (or client's) certificate, on a TLS stream that has one.
    pub fn peer_certificate(&self) -> Option<openssl::x509::X509> {
        match self {
            Stream::Tls(tls) => tls.ssl().peer_certificate(),
            _ => None,
        }
    }

    /// The uid of the process at the other end of a Unix socket
    /// (SO_PEERCRED), under TLS too; `None` on TCP.
    pub fn peer_uid(&self) -> Option<io::Result<u32>> {
        match self {
            Stream::Unix(s) => Some(s.peer_uid()),
            Stream::Tls(tls) if tls.socket().is_unix() => Some(tls.socket().peer_uid()),
            _ => None,
        }
    }

    /// True when the bytes are encrypted.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// Runs the server side of a TLS handshake on this socket.
    pub async fn accept_tls(
        &mut self,
        acceptor: &openssl::ssl::SslAcceptor,
        early: &[u8],
    ) -> io::Result<()> {
        let ssl = tls::session(acceptor.context())?;
        let mut tls = self.detach_for_tls(ssl)?;
        tls.accept(early)
            .await
            .map_err(|e| tls_reason::handshake_failure(&e))?;
        *self = Stream::Tls(tls);
        Ok(())
    }

    /// Ends a connection about to be closed: a TLS one with close_notify
    /// (no shutdown of the socket first: closing it sends the FIN);
    /// nothing for a plain one.
    pub async fn close_notify(&mut self) -> io::Result<()> {
        match self {
            Stream::Tls(tls) => std::future::poll_fn(|cx| tls.poll_close_notify(cx)).await,
            _ => Ok(()),
        }
    }

    /// Takes the plain socket out (leaving [`Stream::Detached`]) and puts
    /// `ssl` over it, for a handshake.
    fn detach_for_tls(&mut self, ssl: openssl::ssl::Ssl) -> io::Result<TlsStream> {
        let socket = match std::mem::replace(self, Stream::Detached(Detached)) {
            Stream::Tcp(s) | Stream::Unix(s) => s,
            other => {
                *self = other;
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "TLS needs a plain socket under it",
                ));
            }
        };
        TlsStream::new(ssl, socket)
    }
}

macro_rules! delegate_read {
    ($ty:ty, $($variant:ident),+) => {
        impl AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }
    };
}

macro_rules! delegate_write {
    ($ty:ty, $($variant:ident),+) => {
        impl AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_write(cx, buf),)+
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_flush(cx),)+
                }
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_shutdown(cx),)+
                }
            }
        }
    };
}

delegate_read!(Stream, Tcp, Unix, Tls, Detached);
delegate_write!(Stream, Tcp, Unix, Tls, Detached);
delegate_read!(ReadHalf<'_>, Plain, Tls, Detached);
delegate_write!(WriteHalf<'_>, Plain, Tls, Detached);

/// Why a framed read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The socket failed.
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection.
    #[error("connection closed by peer")]
    Eof,
    /// The peer sent something that is not the protocol.
    #[error("protocol violation: {0}")]
    Violation(#[from] Violation),
}

/// Reads once into the buffer's free space; cancel-safe (no bytes are lost if dropped).
pub async fn fill<R: AsyncRead + Unpin>(r: &mut R, buf: &mut FrameBuf) -> Result<usize, ReadError> {
    std::future::poll_fn(|cx| poll_fill(r, cx, buf)).await
}

/// [`fill`] as a poll, for a caller that waits on something else in the
/// same poll without a future's state for each.
pub fn poll_fill<R: AsyncRead + Unpin>(
    r: &mut R,
    cx: &mut Context<'_>,
    buf: &mut FrameBuf,
) -> Poll<Result<usize, ReadError>> {
    let mut spare = ReadBuf::new(buf.spare());
    std::task::ready!(Pin::new(r).poll_read(cx, &mut spare))?;
    let n = spare.filled().len();
    if n == 0 {
        return Poll::Ready(Err(ReadError::Eof));
    }
    buf.filled(n);
    Poll::Ready(Ok(n))
}

/// Reads until `frame` finds a whole frame in the buffer.
async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut FrameBuf,
    frame: impl Fn(&mut FrameBuf) -> Result<Option<Frame>, Violation>,
) -> Result<Frame, ReadError> {
    loop {
        if let Some(f) = frame(buf)? {
            return Ok(f);
        }
        fill(r, buf).await?;
    }
}

/// Reads until one tagged message of at most `max_len` bytes is buffered.
pub async fn read_tagged<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut FrameBuf,
    max_len: usize,
) -> Result<Frame, ReadError> {
    read_frame(r, buf, |b| b.tagged_frame(max_len)).await
}

/// Reads until one untagged startup packet is buffered.
pub async fn read_startup<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut FrameBuf,
    max_len: usize,
) -> Result<Frame, ReadError> {
    read_frame(r, buf, |b| b.startup_frame(max_len)).await
}

// SSL_has_pending (OpenSSL 1.1.0 and later) is not bound by openssl-sys for
// OpenSSL; AWS-LC's bindings have it.
#[cfg(not(feature = "aws-lc"))]
extern "C" {
    fn SSL_has_pending(s: *const openssl_sys::SSL) -> std::ffi::c_int;
}
#[cfg(feature = "aws-lc")]
use openssl_sys::SSL_has_pending;

/// True when OpenSSL holds bytes of the connection not yet returned by a
/// read: decrypted ones, or (with read-ahead) received and not decrypted,
/// which `SslRef::pending` does not count.
pub(crate) fn has_pending(ssl: &openssl::ssl::SslRef) -> bool {
    use foreign_types::ForeignTypeRef as _;
    // SAFETY: the pointer comes from a live SslRef borrowed for the call,
    // and SSL_has_pending only reads the connection's buffers.
    unsafe { SSL_has_pending(ssl.as_ptr()) == 1 }
}
