//! The peer class: how a client (or a backend) is reached, which decides
//! the TLS policy that applies to it.

use std::fmt;

/// How a client reached the pooler; decides which TLS policy applies.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
// The names as a takeover sends them.
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// A Unix-domain socket: the file system already protects it.
    Unix,
    /// TCP from a loopback address (127.0.0.0/8, ::1).
    LoopbackTcp,
    /// TCP from any other address.
    RemoteTcp,
}

impl Transport {
    /// Short label used in logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Unix => "unix",
            Transport::LoopbackTcp => "tcp-loopback",
            Transport::RemoteTcp => "tcp",
        }
    }

    /// Classifies a TCP peer address.
    pub fn for_tcp_peer(addr: &std::net::SocketAddr) -> Transport {
        let loopback = match addr.ip() {
            std::net::IpAddr::V4(v4) => v4.is_loopback(),
            std::net::IpAddr::V6(v6) => {
                v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
        };
        if loopback {
            Transport::LoopbackTcp
        } else {
            Transport::RemoteTcp
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_loopback_peers() {
        let v4: std::net::SocketAddr = "127.0.0.5:1".parse().unwrap();
        let v6: std::net::SocketAddr = "[::1]:1".parse().unwrap();
        let mapped: std::net::SocketAddr = "[::ffff:127.0.0.1]:1".parse().unwrap();
        let remote: std::net::SocketAddr = "10.1.2.3:1".parse().unwrap();
        assert_eq!(Transport::for_tcp_peer(&v4), Transport::LoopbackTcp);
        assert_eq!(Transport::for_tcp_peer(&v6), Transport::LoopbackTcp);
        assert_eq!(Transport::for_tcp_peer(&mapped), Transport::LoopbackTcp);
        assert_eq!(Transport::for_tcp_peer(&remote), Transport::RemoteTcp);
    }
}
