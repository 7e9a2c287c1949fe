//! Accepting connections: `accept4` straight into a non-blocking
//! descriptor, registered later for reading only (see
//! [`crate::stream::Accepted`]), instead of tokio's listeners, whose
//! streams register at once and for writing too, and would have to be
//! deregistered and registered again (two system calls per login).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use socket2::SockAddr;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A listening socket (TCP or Unix), registered for readability.
pub struct Listening {
    fd: AsyncFd<OwnedFd>,
    /// The queue of connections was found empty at least once.
    drained: AtomicBool,
}

impl Listening {
    /// Takes a bound, listening, non-blocking socket.
    pub fn new(fd: OwnedFd) -> io::Result<Listening> {
        // SAFETY: the OwnedFd is open and the AsyncFd owns it until dropped.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Listening {
            fd,
            drained: AtomicBool::new(false),
        })
    }

    /// The next connection, not yet registered with the runtime, and its
    /// peer's address.
    pub async fn accept(&self) -> io::Result<(OwnedFd, SockAddr)> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|l| accept4(l.as_raw_fd())) {
                Ok(Ok(accepted)) => return Ok(accepted),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {
                    self.drained.store(true, Ordering::Relaxed);
                    continue;
                }
            }
        }
    }

    /// Whether every connection accepted from now on was made after this
    /// was built: the queue has been found empty since. The ones made
    /// before (a socket inherited from a service manager or an earlier
    /// process holds them) carry the listener's options of that time.
    pub fn drained(&self) -> bool {
        self.drained.load(Ordering::Relaxed)
    }

    /// The TCP address the socket listens on, if it is a TCP one.
    pub fn local_tcp_addr(&self) -> Option<SocketAddr> {
        socket2::SockRef::from(self.fd.get_ref())
            .local_addr()
            .ok()?
            .as_socket()
    }
}

impl AsFd for Listening {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }
}

fn accept4(listener: i32) -> io::Result<(OwnedFd, SockAddr)> {
    // SAFETY: accept4 writes at most `len` bytes of address into the storage
    // try_init hands it and sets `len` to what it wrote; the descriptor it
    // returns is new and ours alone.
    let (fd, addr) = unsafe {
        SockAddr::try_init(|storage, len| {
            let fd = libc::accept4(
                listener,
                storage.cast(),
                len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            );
            if fd < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(OwnedFd::from_raw_fd(fd))
            }
        })?
    };
    Ok((fd, addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepts_tcp_and_unix_clients_with_their_addresses() -> io::Result<()> {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0")?;
        tcp.set_nonblocking(true)?;
        let addr = tcp.local_addr()?;
        let l = Listening::new(OwnedFd::from(tcp))?;
        assert_eq!(l.local_tcp_addr(), Some(addr));
        let client = tokio::net::TcpStream::connect(addr).await?;
        let (_fd, peer) = l.accept().await?;
        assert_eq!(peer.as_socket(), Some(client.local_addr()?));

        let dir = std::env::temp_dir().join(format!("pgharbor-accept-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("s");
        let unix = std::os::unix::net::UnixListener::bind(&path)?;
        unix.set_nonblocking(true)?;
        let l = Listening::new(OwnedFd::from(unix))?;
        assert_eq!(l.local_tcp_addr(), None);
        let _client = tokio::net::UnixStream::connect(&path).await?;
        let (fd, _) = l.accept().await?;
        let sock = crate::stream::Socket::new(fd)?;
        assert!(sock.peer_uid().is_ok());
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
