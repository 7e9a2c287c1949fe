//! The byte streams pgharbor speaks over (TCP, Unix socket), the halves the
//! relay uses to move both directions at once, and framed reads on top of
//! [`FrameBuf`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{tcp, unix, TcpStream, UnixStream};

use crate::protocol::{Frame, FrameBuf, Violation};

/// A connected socket of either transport.
#[derive(Debug)]
pub enum Stream {
    /// TCP.
    Tcp(TcpStream),
    /// Unix-domain socket.
    Unix(UnixStream),
}

/// Read half borrowed from a [`Stream`]; no lock, no allocation.
pub enum ReadHalf<'a> {
    /// TCP.
    Tcp(tcp::ReadHalf<'a>),
    /// Unix-domain socket.
    Unix(unix::ReadHalf<'a>),
}

/// Write half borrowed from a [`Stream`].
pub enum WriteHalf<'a> {
    /// TCP.
    Tcp(tcp::WriteHalf<'a>),
    /// Unix-domain socket.
    Unix(unix::WriteHalf<'a>),
}

impl Stream {
    /// Borrows both halves so the relay can read and write concurrently.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Unix(s) => {
                let (r, w) = s.split();
                (ReadHalf::Unix(r), WriteHalf::Unix(w))
            }
        }
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

delegate_read!(Stream, Tcp, Unix);
delegate_write!(Stream, Tcp, Unix);
delegate_read!(ReadHalf<'_>, Tcp, Unix);
delegate_write!(WriteHalf<'_>, Tcp, Unix);

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
    let n = r.read(buf.spare()).await?;
    if n == 0 {
        return Err(ReadError::Eof);
    }
    buf.filled(n);
    Ok(n)
}

/// Reads until one tagged message of at most `max_len` bytes is buffered.
pub async fn read_tagged<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut FrameBuf,
    max_len: usize,
) -> Result<Frame, ReadError> {
    loop {
        if let Some(f) = buf.tagged_frame(max_len)? {
            return Ok(f);
        }
        fill(r, buf).await?;
    }
}

/// Reads until one untagged startup packet is buffered.
pub async fn read_startup<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut FrameBuf,
    max_len: usize,
) -> Result<Frame, ReadError> {
    loop {
        if let Some(f) = buf.startup_frame(max_len)? {
            return Ok(f);
        }
        fill(r, buf).await?;
    }
}
