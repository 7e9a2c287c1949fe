//! The listener's tests: binding (SO_REUSEPORT) and the socket options
//! accepted TCP sockets end up with.

use super::*;
use crate::config::Keepalive;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::mpsc;

/// Hands each accepted stream to the test, with the TCP options a
/// RELOAD may change between accepts.
struct Catch {
    opts: Mutex<TcpOptions>,
    accepted: mpsc::UnboundedSender<Accepted>,
}

impl Serve for Catch {
    fn tcp_options(&self) -> TcpOptions {
        *self.opts.lock().expect("options")
    }
    fn next_id(&self) -> u64 {
        0
    }
    fn serve(&self, conn: Accepted, _: ConnContext, _: &mut crate::stream::EarlyReads) {
        let _ = self.accepted.send(conn);
    }
}

/// What an accepted client socket ends up with: TCP_NODELAY always, and
/// the keepalive options of the moment, whether they came from the
/// listening socket (the default options) or were set on the socket
/// itself (after a RELOAD changed them, or when they are tuned).
#[tokio::test]
async fn accepted_sockets_get_nodelay_and_the_current_keepalive() -> std::io::Result<()> {
    let tuned = TcpOptions {
        keepalive_idle: Some(Duration::from_secs(31)),
        ..TcpOptions::default()
    };
    let off = TcpOptions {
        keepalive: Keepalive::Off,
        ..TcpOptions::default()
    };
    for first in [TcpOptions::default(), off, tuned] {
        let listener = bind_tcp("127.0.0.1:0".parse().expect("address"), false)?;
        let addr = listener.local_addr()?;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let catch = Arc::new(Catch {
            opts: Mutex::new(first),
            accepted: tx,
        });
        let l = Listening::new(listener.into_std()?.into())?;
        // Two clients wait before the accept loop runs, as on a socket a
        // service manager hands over: the listener had no options when
        // the kernel made their connections.
        let mut clients = vec![
            tokio::net::TcpStream::connect(addr).await?,
            tokio::net::TcpStream::connect(addr).await?,
        ];
        let task = tokio::spawn(accept_tcp(l, catch.clone()));
        // The options of the moment, then others as a RELOAD brings them.
        for (i, opts) in [
            first,
            first,
            first,
            off,
            TcpOptions::default(),
            tuned,
            first,
        ]
        .into_iter()
        .enumerate()
        {
            *catch.opts.lock().expect("options") = opts;
            if i >= 2 {
                clients.push(tokio::net::TcpStream::connect(addr).await?);
            }
            let Some(conn) = rx.recv().await else {
                panic!("no TCP connection accepted");
            };
            let s = socket2::SockRef::from(&conn);
            assert!(s.nodelay()?, "{first:?} then {opts:?}");
            assert_eq!(
                s.keepalive()?,
                opts.keepalive == Keepalive::On,
                "{first:?} then {opts:?}"
            );
            if let Some(idle) = opts.keepalive_idle {
                assert_eq!(s.keepalive_time()?, idle);
            }
        }
        task.abort();
    }
    Ok(())
}

/// Only untuned options are left to the listening socket.
#[tokio::test]
async fn a_tuned_keepalive_stays_per_socket() -> std::io::Result<()> {
    let listener = bind_tcp("127.0.0.1:0".parse().expect("address"), false)?;
    let plain = TcpOptions::default();
    assert_eq!(
        crate::sockopt::set_on_listener(&listener, &plain),
        Some(plain)
    );
    let tuned = TcpOptions {
        user_timeout: Some(Duration::from_millis(500)),
        ..plain
    };
    assert_eq!(crate::sockopt::set_on_listener(&listener, &tuned), None);
    Ok(())
}

#[tokio::test]
async fn reuseport_lets_a_second_listener_share_the_port() -> std::io::Result<()> {
    let first = bind_tcp("127.0.0.1:0".parse().expect("address"), true)?;
    let addr = first.local_addr()?;
    let second = bind_tcp(addr, true)?;
    assert_eq!(second.local_addr()?, addr);
    // Without it on both sides, the port stays taken.
    let lone = bind_tcp("127.0.0.1:0".parse().expect("address"), false)?;
    assert!(bind_tcp(lone.local_addr()?, false).is_err());
    assert!(bind_tcp(lone.local_addr()?, true).is_err());
    Ok(())
}
