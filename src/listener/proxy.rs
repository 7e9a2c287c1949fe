//! The PROXY protocol on the TCP listeners (`listen.proxy_protocol_from`):
//! a connection from a trusted load balancer opens with a v1 or v2 header
//! naming the real client, and that client becomes the connection's peer,
//! so hba rules, `loopbacksslmode`, SHOW CLIENTS and the logs see it.
//!
//! As PgBouncer does, a trusted source MUST send the header: otherwise one
//! missing `send-proxy` would quietly make every client look like the load
//! balancer, which the hba rules may trust. A header from any other address
//! is refused by the client negotiation (its first bytes cannot be a startup
//! packet), so a client cannot pick its own address.
//!
//! The header is read in the connection's own task, never in the accept
//! loop, within `client_login_timeout`, and exactly: the bytes after it (an
//! SSLRequest, a direct-TLS ClientHello) must reach the negotiation still on
//! the socket, where the first byte is peeked to tell direct TLS apart.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use crate::stream::Socket;
use ipnet::IpNet;
use tokio::io::AsyncReadExt;

use super::{ConnContext, PeerAddr, Transport};
use crate::protocol::proxy::{self, Header, Malformed, Origin, Scan};
use crate::stream::Stream;

/// Why a connection from a trusted source was refused.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// No whole header in time.
    #[error("no complete PROXY protocol header within {0:?} (listen.client_login_timeout)")]
    Timeout(Duration),
    /// The peer closed before the header was whole.
    #[error("connection closed before a complete PROXY protocol header")]
    Closed,
    /// Reading failed.
    #[error("reading the PROXY protocol header: {0}")]
    Io(#[from] io::Error),
    /// The bytes are not a header (or not a valid one).
    #[error("{0}")]
    Malformed(#[from] Malformed),
}

/// Whether `ip` is one of the load balancers in `trusted`.
pub fn is_trusted(trusted: &[IpNet], ip: IpAddr) -> bool {
    // An IPv4 client of a dual-stack socket shows as ::ffff:a.b.c.d.
    let ip = ip.to_canonical();
    trusted.iter().any(|net| net.contains(&ip))
}

/// The connection's context once its PROXY header, if it owes one, is read:
/// unchanged for a peer outside `trusted` (and on the Unix socket), the
/// real client's for a relayed one.
pub async fn admit(
    stream: &mut Stream,
    ctx: ConnContext,
    trusted: &[IpNet],
    timeout: Duration,
) -> Result<ConnContext, ProxyError> {
    let (Stream::Tcp(sock), Some(ip)) = (&mut *stream, ctx.peer_ip()) else {
        return Ok(ctx);
    };
    if !is_trusted(trusted, ip) {
        return Ok(ctx);
    }
    let header = tokio::time::timeout(timeout, read_header(sock))
        .await
        .map_err(|_| ProxyError::Timeout(timeout))??;
    Ok(relayed(ctx, &header))
}

/// Takes exactly one header off `sock`. Each round peeks at what has
/// arrived and takes only bytes [`proxy::scan`] says are the header's, so a
/// header split across segments is waited for, never overrun.
async fn read_header(sock: &mut Socket) -> Result<Header, ProxyError> {
    let mut buf = vec![0u8; proxy::MAX_HEADER_LEN];
    let mut have = 0;
    loop {
        let n = sock.peek(&mut buf[have..]).await?;
        if n == 0 {
            return Err(ProxyError::Closed);
        }
        match proxy::scan(&buf[..have + n]) {
            Scan::Complete(header) => {
                sock.read_exact(&mut buf[have..header.len]).await?;
                return Ok(header);
            }
            Scan::Partial => {
                sock.read_exact(&mut buf[have..have + n]).await?;
                have += n;
            }
            Scan::Invalid(e) => return Err(e.into()),
        }
    }
}

/// `ctx` with the header's client as the peer; LOCAL (a health check) and
/// addressless headers keep the socket's own peer, as the spec says.
fn relayed(mut ctx: ConnContext, header: &Header) -> ConnContext {
    if let Origin::Tcp { source, .. } = header.origin {
        let proxy = std::mem::replace(&mut ctx.peer, PeerAddr::Tcp(source));
        ctx.via = Some(proxy);
        ctx.transport = Transport::for_tcp_peer(&source);
    }
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::proxy::Version;
    use std::time::Instant;

    fn ctx(peer: &str) -> ConnContext {
        let addr: std::net::SocketAddr = peer.parse().unwrap();
        ConnContext {
            id: 1,
            transport: Transport::for_tcp_peer(&addr),
            peer: PeerAddr::Tcp(addr),
            via: None,
            accepted_at: Instant::now(),
        }
    }

    #[test]
    fn trust_is_by_cidr_and_sees_through_mapped_addresses() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/24".parse().unwrap(), "::1/128".parse().unwrap()];
        assert!(is_trusted(&trusted, "10.0.0.9".parse().unwrap()));
        assert!(is_trusted(&trusted, "::ffff:10.0.0.9".parse().unwrap()));
        assert!(is_trusted(&trusted, "::1".parse().unwrap()));
        assert!(!is_trusted(&trusted, "10.0.1.9".parse().unwrap()));
        assert!(!is_trusted(&[], "10.0.0.9".parse().unwrap()));
    }

    #[test]
    fn a_relayed_client_becomes_the_peer_and_its_class() {
        let header = Header {
            version: Version::V2,
            origin: Origin::Tcp {
                source: "127.0.0.5:4000".parse().unwrap(),
                destination: "10.0.0.1:6432".parse().unwrap(),
            },
            len: 28,
        };
        let c = relayed(ctx("10.0.0.2:5000"), &header);
        assert_eq!(c.peer.to_string(), "127.0.0.5:4000");
        assert_eq!(c.peer_ip(), Some("127.0.0.5".parse().unwrap()));
        assert_eq!(c.transport, Transport::LoopbackTcp);
        assert_eq!(
            c.via.map(|v| v.to_string()).as_deref(),
            Some("10.0.0.2:5000")
        );
        // And the other way: a loopback proxy relaying a remote client.
        let header = Header {
            origin: Origin::Tcp {
                source: "192.0.2.1:4000".parse().unwrap(),
                destination: "127.0.0.1:6432".parse().unwrap(),
            },
            ..header
        };
        assert_eq!(
            relayed(ctx("127.0.0.1:5000"), &header).transport,
            Transport::RemoteTcp
        );
    }

    #[test]
    fn local_and_unknown_keep_the_socket_peer() {
        for origin in [Origin::Local, Origin::Unknown] {
            let header = Header {
                version: Version::V2,
                origin,
                len: 16,
            };
            let c = relayed(ctx("10.0.0.2:5000"), &header);
            assert_eq!((c.peer.to_string(), c.via), ("10.0.0.2:5000".into(), None));
            assert_eq!(c.transport, Transport::RemoteTcp);
        }
    }
}
