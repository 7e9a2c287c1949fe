//! TCP keepalive and user timeout, applied to a connected socket: client
//! sockets as they are accepted (`[listen]`), backend sockets as they are
//! opened (the conninfo's libpq keywords). Through `socket2`, which already
//! carries the per-platform TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT /
//! TCP_USER_TIMEOUT constants; Unix sockets never get here. And
//! TCP_DEFER_ACCEPT on TCP listeners.

use std::io;
use std::os::fd::AsRawFd;

use crate::config::{Keepalive, TcpOptions};
use socket2::{SockRef, TcpKeepalive};

/// Sets `opts` on `sock`; options left at `None` keep the system default.
pub fn apply(sock: &impl std::os::fd::AsFd, opts: &TcpOptions) -> io::Result<()> {
    let s = SockRef::from(sock);
    match opts.keepalive {
        Keepalive::Off => s.set_keepalive(false)?,
        Keepalive::On => {
            let mut ka = TcpKeepalive::new();
            if let Some(idle) = opts.keepalive_idle {
                ka = ka.with_time(idle);
            }
            if let Some(interval) = opts.keepalive_interval {
                ka = ka.with_interval(interval);
            }
            if let Some(count) = opts.keepalive_count {
                ka = ka.with_retries(count);
            }
            s.set_tcp_keepalive(&ka)?;
        }
    }
    if let Some(timeout) = opts.user_timeout {
        s.set_tcp_user_timeout(Some(timeout))?;
    }
    Ok(())
}

/// Sets on a listening socket what each connection it accepts then starts
/// with, since Linux copies a listener's socket options into the sockets
/// it accepts: TCP_NODELAY always, and `opts` when they are only
/// SO_KEEPALIVE on or off. That spares two system calls per TCP login.
/// Returns the options accepted sockets carry; `None` when each must still
/// be given them. A tuned keepalive stays per socket: after a RELOAD that
/// drops the tuning, a listener's TCP_KEEPIDLE could not be taken back to
/// the system's default.
pub fn set_on_listener(listener: &impl std::os::fd::AsFd, opts: &TcpOptions) -> Option<TcpOptions> {
    let s = SockRef::from(listener);
    s.set_nodelay(true).ok()?;
    if opts.tuned() {
        return None;
    }
    s.set_keepalive(opts.keepalive == Keepalive::On).ok()?;
    Some(*opts)
}

/// Turns TCP_DEFER_ACCEPT on or off on a TCP listener. On, the kernel
/// hands over a connection once its first data arrived, or after one
/// SYN-ACK retransmission (about a second) for a client that sends
/// nothing, which then meets `client_login_timeout` as before. The accept
/// loop's early read (`stream::Accepted`) then always finds the startup
/// packet, and the pooler is not woken for a connection until there is
/// something to do. Neither socket2 nor nix has the option.
pub fn set_defer_accept(listener: &impl AsRawFd, on: bool) -> io::Result<()> {
    // Seconds, which Linux turns into a count of SYN-ACK retransmissions:
    // 1 is one retransmission.
    let secs: libc::c_int = i32::from(on);
    // SAFETY: the descriptor is a socket the caller owns for the call, and
    // the option value is a c_int that outlives it, with its size given.
    let rc = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&secs as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// TCP_DEFER_ACCEPT as the kernel reports it back (in seconds, from
    /// the retransmission count it keeps).
    fn defer_accept(listener: &impl AsRawFd) -> io::Result<libc::c_int> {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a live socket, and a c_int with its size to write into.
        let rc = unsafe {
            libc::getsockopt(
                listener.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc == 0 {
            Ok(v)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    #[test]
    fn defer_accept_goes_on_and_off() -> io::Result<()> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        assert_eq!(defer_accept(&listener)?, 0, "off by default in the kernel");
        set_defer_accept(&listener, true)?;
        assert!(defer_accept(&listener)? > 0);
        set_defer_accept(&listener, false)?;
        assert_eq!(defer_accept(&listener)?, 0);
        Ok(())
    }

    /// Checks what the kernel reports back for each option (getsockopt).
    #[tokio::test]
    async fn the_kernel_reports_what_was_set() -> io::Result<()> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let sock = tokio::net::TcpStream::connect(listener.local_addr()?).await?;
        let opts = TcpOptions {
            keepalive: Keepalive::On,
            keepalive_idle: Some(Duration::from_secs(31)),
            keepalive_interval: Some(Duration::from_secs(7)),
            keepalive_count: Some(4),
            user_timeout: Some(Duration::from_millis(1500)),
        };
        apply(&sock, &opts)?;
        let s = SockRef::from(&sock);
        assert!(s.keepalive()?);
        assert_eq!(s.keepalive_time()?, Duration::from_secs(31));
        assert_eq!(s.keepalive_interval()?, Duration::from_secs(7));
        assert_eq!(s.keepalive_retries()?, 4);
        assert_eq!(s.tcp_user_timeout()?, Some(Duration::from_millis(1500)));
        let off = TcpOptions {
            keepalive: Keepalive::Off,
            ..TcpOptions::default()
        };
        apply(&sock, &off)?;
        assert!(!s.keepalive()?);
        Ok(())
    }
}
