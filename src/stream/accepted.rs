//! A connection just accepted, read once before the runtime watches it.
//!
//! A client sends its first packet (startup, SSLRequest or ClientHello) as
//! soon as its connect returns, so by the time the pooler wakes for the
//! listening socket and accepts, the packet has usually arrived. PgBouncer
//! reads it at once. A socket registered with epoll first cannot: the
//! registration (edge-triggered) reports the data already there, and the
//! client's task waits a turn of the event loop for that report, or, had it
//! read anyway, meets the report later and spends a `recv` on nothing.
//! Reading before registering costs neither: the socket joins epoll empty.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{recv, MsgFlags};

use super::{Socket, Stream};
use crate::protocol::FrameBuf;

/// An accepted, non-blocking connection not yet registered with the runtime.
#[derive(Debug)]
pub struct Accepted {
    fd: OwnedFd,
    unix: bool,
}

impl Accepted {
    /// A TCP connection.
    pub fn tcp(fd: OwnedFd) -> Self {
        Accepted { fd, unix: false }
    }

    /// A Unix-socket connection.
    pub fn unix(fd: OwnedFd) -> Self {
        Accepted { fd, unix: true }
    }

    /// Reads what already arrived into `buf`, without waiting; the bytes
    /// read. Zero when nothing came yet, and also at end of file or on an
    /// error: the registered socket's first read finds either again.
    pub fn read_now(&self, buf: &mut FrameBuf) -> usize {
        loop {
            match recv(self.fd.as_raw_fd(), buf.spare(), MsgFlags::empty()) {
                Ok(n) => {
                    buf.filled(n);
                    return n;
                }
                Err(Errno::EINTR) => continue,
                Err(_) => return 0,
            }
        }
    }

    /// Registers the socket with the runtime, for reading.
    pub fn into_stream(self) -> io::Result<Stream> {
        let sock = Socket::new(self.fd)?;
        Ok(if self.unix {
            Stream::Unix(sock)
        } else {
            Stream::Tcp(sock)
        })
    }
}

impl AsFd for Accepted {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    use tokio::io::AsyncReadExt;

    fn pair() -> io::Result<(Accepted, UnixStream)> {
        let (a, b) = UnixStream::pair()?;
        a.set_nonblocking(true)?;
        Ok((Accepted::unix(OwnedFd::from(a)), b))
    }

    #[tokio::test]
    async fn what_arrived_before_is_read_at_once_and_what_follows_through_the_stream(
    ) -> io::Result<()> {
        let (conn, mut peer) = pair()?;
        let mut buf = FrameBuf::new(64, 64);
        peer.write_all(b"\0\0\0\x08\x04\xd2\x16\x2f")?;
        assert_eq!(conn.read_now(&mut buf), 8);
        assert_eq!(buf.readable(), b"\0\0\0\x08\x04\xd2\x16\x2f");
        let mut stream = conn.into_stream()?;
        assert!(matches!(stream, Stream::Unix(_)));
        peer.write_all(b"next")?;
        let mut got = [0u8; 4];
        stream.read_exact(&mut got).await?;
        assert_eq!(&got, b"next");
        Ok(())
    }

    #[tokio::test]
    async fn nothing_yet_reads_nothing_and_the_stream_waits_for_it() -> io::Result<()> {
        let (conn, mut peer) = pair()?;
        let mut buf = FrameBuf::new(64, 64);
        assert_eq!(conn.read_now(&mut buf), 0);
        assert!(buf.is_empty());
        let mut stream = conn.into_stream()?;
        let read = tokio::spawn(async move {
            let mut got = [0u8; 5];
            stream.read_exact(&mut got).await.map(|_| got)
        });
        tokio::task::yield_now().await;
        peer.write_all(b"later")?;
        assert_eq!(&read.await.map_err(io::Error::other)??, b"later");
        Ok(())
    }

    #[tokio::test]
    async fn a_peer_gone_at_once_reads_nothing_then_end_of_file() -> io::Result<()> {
        let (conn, peer) = pair()?;
        drop(peer);
        let mut buf = FrameBuf::new(64, 64);
        assert_eq!(conn.read_now(&mut buf), 0);
        let mut stream = conn.into_stream()?;
        let mut got = [0u8; 1];
        assert_eq!(stream.read(&mut got).await?, 0);
        Ok(())
    }
}
