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
//!
//! When the packet has not arrived, the read is a system call for nothing:
//! over TCP with a few clients connecting at once, the pooler often accepts
//! before the client has returned from `connect` (measured: 85% of early
//! reads empty at four clients, against 6.5% with one). [`EarlyReads`] learns
//! per listener whether they pay.

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
    kind: Kind,
}

/// Which [`Stream`] an accepted connection becomes.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Tcp,
    Unix,
}

impl Accepted {
    /// A TCP connection.
    pub fn tcp(fd: OwnedFd) -> Self {
        Accepted {
            fd,
            kind: Kind::Tcp,
        }
    }

    /// A Unix-socket connection.
    pub fn unix(fd: OwnedFd) -> Self {
        Accepted {
            fd,
            kind: Kind::Unix,
        }
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
        Ok(match self.kind {
            Kind::Tcp => Stream::Tcp(sock),
            Kind::Unix => Stream::Unix(sock),
        })
    }
}

/// Whether reading accepted connections early pays on one listener: a
/// score that an early read finding data raises by [`FOUND`] and one
/// finding nothing lowers by one (a wasted `recv` costs about a third of
/// the event-loop turn a found packet saves). At zero, only one connection
/// in [`PROBE_EVERY`] is read early, to notice when they pay again.
#[derive(Debug)]
pub struct EarlyReads {
    score: u8,
    skipped: u8,
}

/// What an early read that found data adds to the score.
const FOUND: u8 = 3;
/// The score's ceiling: how many empty reads in a row turn early reads off.
const CEILING: u8 = 12;
/// At a score of zero, one connection in this many is read early.
const PROBE_EVERY: u8 = 16;

impl Default for EarlyReads {
    fn default() -> Self {
        EarlyReads {
            score: CEILING,
            skipped: 0,
        }
    }
}

impl EarlyReads {
    /// Reads `conn` into `buf` before it is registered, if early reads pay
    /// on this listener; learns from what it found.
    pub fn read(&mut self, conn: &Accepted, buf: &mut FrameBuf) {
        if self.score == 0 {
            self.skipped += 1;
            if self.skipped < PROBE_EVERY {
                return;
            }
            self.skipped = 0;
        }
        self.learn(conn.read_now(buf) > 0);
    }

    fn learn(&mut self, found: bool) {
        self.score = if found {
            self.score.saturating_add(FOUND).min(CEILING)
        } else {
            self.score.saturating_sub(1)
        };
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

    #[test]
    fn early_reads_stop_when_they_find_nothing_and_probe_until_they_find_data_again(
    ) -> io::Result<()> {
        let (conn, mut peer) = pair()?;
        let mut buf = FrameBuf::new(64, 64);
        let mut early = EarlyReads::default();
        for _ in 0..CEILING {
            early.read(&conn, &mut buf);
        }
        assert_eq!(early.score, 0, "twelve empty reads turn them off");
        peer.write_all(b"x")?;
        for _ in 1..PROBE_EVERY {
            early.read(&conn, &mut buf);
        }
        assert!(buf.is_empty(), "off: no connection is read early");
        early.read(&conn, &mut buf);
        assert_eq!(buf.readable(), b"x", "the sixteenth is read: a probe");
        assert_eq!(early.score, FOUND);
        Ok(())
    }

    #[test]
    fn early_reads_that_find_data_a_quarter_of_the_time_stay_on() {
        let mut early = EarlyReads::default();
        for _ in 0..100 {
            for found in [true, false, false, false] {
                early.learn(found);
            }
            assert!(early.score > 0);
        }
        let mut off = false;
        for _ in 0..100 {
            for found in [false, false, true, false, false] {
                early.learn(found);
                off |= early.score == 0;
            }
        }
        assert!(off, "a fifth of the time: they turn off");
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
