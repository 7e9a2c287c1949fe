//! Listening and accepting, shared by every mode: a Unix socket path or a
//! TCP address, and `TCP_NODELAY` on accepted TCP sockets, as both poolers
//! set it.

use std::io;
use std::os::fd::{OwnedFd, RawFd};

use crate::Listen;

/// A bound listener for a loop that accepts through io_uring.
pub fn bind(listen: &Listen) -> io::Result<OwnedFd> {
    Ok(match listen {
        Listen::Unix(path) => {
            let _ = std::fs::remove_file(path);
            std::os::unix::net::UnixListener::bind(path)?.into()
        }
        Listen::Tcp(addr) => std::net::TcpListener::bind(addr)?.into(),
    })
}

/// Sets `TCP_NODELAY` on an accepted TCP socket.
pub fn nodelay(fd: RawFd) {
    let on: libc::c_int = 1;
    // SAFETY: `fd` is an open socket; `on` outlives the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// A client accepted on tokio.
pub enum Accepted {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

/// Accepts on tokio until an error, handing each client to `serve` (TCP
/// ones with `TCP_NODELAY` set).
pub async fn accept_loop(listen: &Listen, mut serve: impl FnMut(Accepted)) -> io::Result<()> {
    match listen {
        Listen::Unix(path) => {
            let _ = std::fs::remove_file(path);
            let l = tokio::net::UnixListener::bind(path)?;
            loop {
                serve(Accepted::Unix(l.accept().await?.0));
            }
        }
        Listen::Tcp(addr) => {
            let l = tokio::net::TcpListener::bind(addr).await?;
            loop {
                let (c, _) = l.accept().await?;
                c.set_nodelay(true)?;
                serve(Accepted::Tcp(c));
            }
        }
    }
}

impl Accepted {
    /// The socket as a plain fd, out of tokio's reactor.
    pub fn into_fd(self) -> io::Result<RawFd> {
        use std::os::fd::IntoRawFd;
        Ok(match self {
            Accepted::Unix(s) => s.into_std()?.into_raw_fd(),
            Accepted::Tcp(s) => s.into_std()?.into_raw_fd(),
        })
    }
}
