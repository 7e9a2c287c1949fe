//! TCP keepalive and user timeout, applied to a connected socket: client
//! sockets as they are accepted (`[listen]`), backend sockets as they are
//! opened (the conninfo's libpq keywords). Through `socket2`, which already
//! carries the per-platform TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT /
//! TCP_USER_TIMEOUT constants; Unix sockets never get here.

use std::io;

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

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
