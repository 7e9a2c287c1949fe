//! A connected TCP or Unix socket that waits for writability only while a
//! write is blocked.
//!
//! tokio's `TcpStream` and `UnixStream` register every socket with epoll for
//! reading and writing, edge-triggered. On a Unix socket the kernel signals
//! "writable" each time the peer reads what we sent (`unix_write_space`), so
//! every reply a client or PostgreSQL reads wakes the pooler from
//! `epoll_wait` for nothing: about one wasted sleep and wake-up per login
//! round trip and per transaction, on a two-core machine where a context
//! switch costs more than the message. PgBouncer's event loop asks for
//! writability only when a send has failed; so does this type: the socket
//! is registered for reading, a send goes straight to the kernel, and only
//! a send that finds the buffer full registers a second descriptor of the
//! same socket for writability (epoll keys registrations by descriptor),
//! kept while writes keep blocking and dropped once one goes through at the
//! first try.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use socket2::SockRef;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A connected, non-blocking stream socket (TCP or Unix).
#[derive(Debug)]
pub struct Socket {
    io: AsyncFd<OwnedFd>,
    /// The descriptor registered for writability while writes block;
    /// boxed, since most sockets never need it and idle clients are many.
    room: Option<Box<AsyncFd<OwnedFd>>>,
}

/// Reading side borrowed from a [`Socket`].
pub struct SocketRead<'a>(&'a AsyncFd<OwnedFd>);

/// Writing side borrowed from a [`Socket`].
pub struct SocketWrite<'a> {
    io: &'a AsyncFd<OwnedFd>,
    room: &'a mut Option<Box<AsyncFd<OwnedFd>>>,
}

impl Socket {
    /// Takes a connected socket, which must be non-blocking, and registers
    /// it with the runtime for reading.
    pub fn new(fd: OwnedFd) -> io::Result<Socket> {
        Ok(Socket {
            io: register(fd, Interest::READABLE)?,
            room: None,
        })
    }

    /// A tokio TCP stream's socket (it is registered anew: for connects,
    /// not the accept path).
    pub fn from_tcp(s: tokio::net::TcpStream) -> io::Result<Socket> {
        Socket::new(OwnedFd::from(s.into_std()?))
    }

    /// A tokio Unix stream's socket (registered anew, as [`Socket::from_tcp`]).
    pub fn from_unix(s: tokio::net::UnixStream) -> io::Result<Socket> {
        Socket::new(OwnedFd::from(s.into_std()?))
    }

    /// The socket's options and addresses, through `socket2`.
    pub fn sock_ref(&self) -> SockRef<'_> {
        SockRef::from(self.io.get_ref())
    }

    /// Ready once the socket has data or end of file, without reading.
    /// The waker goes into the runtime's slot for the socket's reader, not
    /// into a waiter the caller's future must hold: an idle client's task
    /// carries no room for it.
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_read_ready(cx).map_ok(|_ready| ())
    }

    /// Peeks at the next byte through the runtime's readiness: `WouldBlock`
    /// without a system call when nothing arrived since the last read.
    pub fn try_peek_byte(&self) -> io::Result<usize> {
        let mut byte = [MaybeUninit::<u8>::uninit()];
        self.io
            .try_io(Interest::READABLE, |fd| SockRef::from(fd).peek(&mut byte))
    }

    /// Peeks at the next byte, asking the kernel whatever the runtime's
    /// readiness says.
    pub fn peek_byte_now(&self) -> io::Result<usize> {
        let mut byte = [MaybeUninit::<u8>::uninit()];
        self.sock_ref().peek(&mut byte)
    }

    /// Waits for data, then copies up to `buf.len()` bytes of it without
    /// consuming them.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.io.readable().await?;
            // SAFETY: an initialised byte slice is a valid MaybeUninit slice;
            // recv only writes into it.
            let dst = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
            match guard.try_io(|fd| SockRef::from(fd).peek(dst)) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// True for a Unix-domain socket (asks the kernel: for rare questions).
    pub fn is_unix(&self) -> bool {
        self.sock_ref().local_addr().is_ok_and(|a| a.is_unix())
    }

    /// The uid of the process at the other end of a Unix socket.
    pub fn peer_uid(&self) -> io::Result<u32> {
        let cred = nix::sys::socket::getsockopt(
            self.io.get_ref(),
            nix::sys::socket::sockopt::PeerCredentials,
        )?;
        Ok(cred.uid())
    }

    /// Borrows both sides so the relay can read and write concurrently.
    pub fn split(&mut self) -> (SocketRead<'_>, SocketWrite<'_>) {
        (
            SocketRead(&self.io),
            SocketWrite {
                io: &self.io,
                room: &mut self.room,
            },
        )
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}

fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the OwnedFd is open, and the AsyncFd owns it (so keeps it
    // open and the same) until the AsyncFd is dropped.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
}

fn poll_read(
    io: &AsyncFd<OwnedFd>,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    loop {
        let mut guard = ready!(io.poll_read_ready(cx))?;
        // SAFETY: recv writes only initialised bytes into the unfilled part,
        // and `assume_init` below covers exactly the bytes it wrote.
        let dst = unsafe { buf.unfilled_mut() };
        let want = dst.len();
        match guard.try_io(|fd| SockRef::from(fd).recv(dst)) {
            Ok(Ok(n)) => {
                // As tokio does: a short read on epoll means the socket is
                // drained, so the next read waits instead of asking the
                // kernel for an EAGAIN.
                if n > 0 && n < want {
                    guard.clear_ready();
                }
                // SAFETY: recv initialised the first `n` unfilled bytes.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            Ok(Err(e)) => return Poll::Ready(Err(e)),
            Err(_would_block) => continue,
        }
    }
}

/// A send that never raises SIGPIPE.
fn send(fd: &OwnedFd, data: &[u8]) -> io::Result<usize> {
    SockRef::from(fd).send_with_flags(data, libc::MSG_NOSIGNAL)
}

fn poll_write(
    io: &AsyncFd<OwnedFd>,
    room: &mut Option<Box<AsyncFd<OwnedFd>>>,
    cx: &mut Context<'_>,
    data: &[u8],
) -> Poll<io::Result<usize>> {
    match send(io.get_ref(), data) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            if room.is_none() {
                let twin = io.get_ref().try_clone()?;
                *room = Some(Box::new(register(twin, Interest::WRITABLE)?));
            }
        }
        done => {
            // Room at the first try: writes stopped blocking.
            *room = None;
            return Poll::Ready(done);
        }
    }
    let Some(twin) = room.as_ref() else {
        return Poll::Ready(Err(io::Error::other("write registration missing")));
    };
    loop {
        let mut guard = ready!(twin.poll_write_ready(cx))?;
        match guard.try_io(|_| send(io.get_ref(), data)) {
            Ok(result) => return Poll::Ready(result),
            Err(_would_block) => continue,
        }
    }
}

fn shutdown(io: &AsyncFd<OwnedFd>) -> Poll<io::Result<()>> {
    match SockRef::from(io.get_ref()).shutdown(std::net::Shutdown::Write) {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Poll::Ready(Ok(())),
        r => Poll::Ready(r),
    }
}

// The whole socket reads and writes through its halves: one implementation.
impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().split().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().split().1).poll_write(cx, data)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().split().1).poll_shutdown(cx)
    }
}

impl AsyncRead for SocketRead<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        poll_read(self.0, cx, buf)
    }
}

impl AsyncWrite for SocketWrite<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let s = self.get_mut();
        poll_write(s.io, s.room, cx, data)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        shutdown(self.io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pair() -> io::Result<(Socket, std::os::unix::net::UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        a.set_nonblocking(true)?;
        Ok((Socket::new(OwnedFd::from(a))?, b))
    }

    #[tokio::test]
    async fn bytes_cross_both_ways_and_eof_reads_zero() -> io::Result<()> {
        let (mut s, mut peer) = pair()?;
        use std::io::{Read, Write};
        peer.write_all(b"hello")?;
        let mut got = [0u8; 16];
        let n = s.read(&mut got).await?;
        assert_eq!(&got[..n], b"hello");
        s.write_all(b"world").await?;
        let mut back = [0u8; 5];
        peer.read_exact(&mut back)?;
        assert_eq!(&back, b"world");
        drop(peer);
        assert_eq!(s.read(&mut got).await?, 0);
        Ok(())
    }

    #[tokio::test]
    async fn a_write_into_a_full_buffer_waits_for_the_reader_then_completes() -> io::Result<()> {
        let (mut s, peer) = pair()?;
        let data = vec![7u8; 4 << 20];
        let len = data.len();
        let (drained, wait_drained) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || -> io::Result<Vec<u8>> {
            use std::io::Read;
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut peer = peer;
            let mut all = vec![0u8; len];
            peer.read_exact(&mut all)?;
            let _ = drained.send(());
            peer.read_to_end(&mut all)?;
            Ok(all)
        });
        let started = std::time::Instant::now();
        s.write_all(&data).await?;
        // 4 MiB cannot fit a socket buffer: the write waited for the reader.
        assert!(started.elapsed() >= std::time::Duration::from_millis(45));
        wait_drained
            .recv()
            .map_err(|_| io::Error::other("reader gone"))?;
        s.write_all(b"!").await?;
        assert!(
            s.room.is_none(),
            "a write with room at once drops the registration"
        );
        s.shutdown().await?;
        let all = reader
            .join()
            .map_err(|_| io::Error::other("reader panicked"))??;
        assert_eq!(all.len(), len + 1);
        assert!(all[..len].iter().all(|&b| b == 7) && all[len] == b'!');
        Ok(())
    }

    #[tokio::test]
    async fn peeks_leave_the_bytes_and_a_quiet_socket_would_block() -> io::Result<()> {
        let (mut s, mut peer) = pair()?;
        assert_eq!(
            s.peek_byte_now().map_err(|e| e.kind()),
            Err(io::ErrorKind::WouldBlock)
        );
        use std::io::Write;
        peer.write_all(b"xy")?;
        let mut two = [0u8; 2];
        assert_eq!(s.peek(&mut two).await?, 2);
        assert_eq!(s.try_peek_byte()?, 1);
        let mut got = [0u8; 2];
        s.read_exact(&mut got).await?;
        assert_eq!(&got, b"xy");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(s.peer_uid()?, std::fs::metadata("/proc/self")?.uid());
        Ok(())
    }
}
