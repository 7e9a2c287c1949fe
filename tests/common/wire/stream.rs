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
