//! The raw client's byte stream: TCP, a Unix socket, or TLS over either
//! after SSLRequest.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use openssl::ssl::SslStream;

/// A plain TCP or Unix-socket stream, or TLS over one.
pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// TLS on top of one of the above, after SSLRequest and `S`.
    Tls(Box<SslStream<Stream>>),
    /// Only while the plain stream moves into a TLS session.
    Detached,
}

fn detached() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "stream detached")
}

impl Stream {
    pub(super) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.get_ref().set_read_timeout(t),
            Stream::Detached => Err(detached()),
        }
    }
    /// TCP_CORK on or off: while on, writes gather into full segments, so
    /// several TLS records can reach the peer in one read.
    pub(super) fn set_cork(&self, on: bool) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let fd = match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Tls(s) => return s.get_ref().set_cork(on),
            Stream::Unix(_) | Stream::Detached => return Ok(()),
        };
        let v: libc::c_int = on.into();
        // SAFETY: a valid descriptor and a c_int option value of its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CORK,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        match rc {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }
    pub(super) fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
            Stream::Tls(s) => s.get_ref().shutdown_write(),
            Stream::Detached => Err(detached()),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Detached => Err(detached()),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            Stream::Detached => Err(detached()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
            Stream::Detached => Err(detached()),
        }
    }
}
