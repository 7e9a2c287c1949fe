//! For tests/proxy_protocol.rs: PROXY protocol headers as a load balancer
//! writes them, TCP connections from a chosen loopback address (the
//! "balancer" or a "client"), a pooler that trusts the balancer, and what
//! SHOW CLIENTS says.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use super::wait::wait_show;
use super::wire::{Failure, QueryResult};
use super::{ErrorFields, Pooler, PoolerOpts, RawConn, Reply, SCRAM_USER, TEST_DB};

/// How long one step may take.
const STEP: Duration = Duration::from_secs(20);

/// A TCP connection to 127.0.0.1:`port` from `src`.
pub fn connect_from(src: &str, port: u16) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let from: SocketAddr = format!("{src}:0").parse().expect("source address");
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    sock.bind(&from.into())
        .unwrap_or_else(|e| panic!("bind {from}: {e}"));
    sock.connect_timeout(&to.into(), STEP)
        .unwrap_or_else(|e| panic!("connect {from} -> {to}: {e}"));
    sock.into()
}

/// A v1 line for a TCP client at `src` that connected to port 6432.
pub fn v1(src: &str) -> Vec<u8> {
    let src: SocketAddr = src.parse().expect("client address");
    let (proto, dst) = match src {
        SocketAddr::V4(_) => ("TCP4", "10.0.0.1"),
        SocketAddr::V6(_) => ("TCP6", "fd00::1"),
    };
    format!("PROXY {proto} {} {dst} {} 6432\r\n", src.ip(), src.port()).into_bytes()
}

/// A v2 header: version 2, `cmd`, `fam`, then `block` as its payload.
pub fn v2_raw(cmd: u8, fam: u8, block: &[u8]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.push(0x20 | cmd);
    h.push(fam);
    h.extend_from_slice(&(block.len() as u16).to_be_bytes());
    h.extend_from_slice(block);
    h
}

/// A v2 PROXY header for a TCP client at `src`, with one TLV after the
/// addresses (PP2_TYPE_AUTHORITY), as HAProxy may send.
pub fn v2(src: &str) -> Vec<u8> {
    let src: SocketAddr = src.parse().expect("client address");
    let (fam, mut block) = match src.ip() {
        IpAddr::V4(ip) => (0x11, [ip.octets(), [10, 0, 0, 1]].concat()),
        IpAddr::V6(ip) => {
            let dst: Ipv6Addr = "fd00::1".parse().expect("v6");
            (0x21, [ip.octets(), dst.octets()].concat())
        }
    };
    block.extend_from_slice(&src.port().to_be_bytes());
    block.extend_from_slice(&6432u16.to_be_bytes());
    block.extend_from_slice(&[0x02, 0, 7]);
    block.extend_from_slice(b"db.test");
    v2_raw(0x1, fam, &block)
}

/// PROXY v2 LOCAL, as a load balancer's health check sends it.
pub fn v2_local() -> Vec<u8> {
    v2_raw(0x0, 0x00, &[])
}

/// The trusted load balancer's source address.
pub const LB: &str = "127.0.0.3";
/// Where the HAProxy test's clients connect from.
pub const CLIENT: &str = "127.0.0.2";

pub fn opts() -> PoolerOpts {
    PoolerOpts::default()
        .admin_users(&[SCRAM_USER.0])
        .listen_toml(&format!("proxy_protocol_from = [\"{LB}/32\"]"))
}

/// A raw client "behind the load balancer": from [`LB`], `header` first.
pub fn relayed(p: &Pooler, header: &[u8]) -> RawConn {
    let mut raw = RawConn::from_tcp(connect_from(LB, p.port()));
    raw.send(header).expect("send PROXY header");
    raw
}

pub fn login(raw: &mut RawConn, user: &str, password: &str) -> Result<(), ErrorFields> {
    match raw.login(&[("user", user), ("database", TEST_DB)], Some(password)) {
        Ok(_) => Ok(()),
        Err(Failure::Error(e)) => Err(e),
        Err(other) => panic!("{user}: no ErrorResponse: {other:?}"),
    }
}

pub fn scram_login(raw: &mut RawConn) {
    login(raw, SCRAM_USER.0, SCRAM_USER.1).unwrap_or_else(|e| panic!("login: {e:?}"));
}

/// SHOW CLIENTS' (addr, port, tls) once it lists `n` clients, sorted.
pub fn clients(p: &Pooler, n: usize) -> Vec<(String, String, String)> {
    let what = format!("SHOW CLIENTS never listed {n} clients");
    rows_of(&wait_show(p, "SHOW CLIENTS", &what, |c| c.rows.len() == n))
}

/// (addr, port, tls) of each SHOW CLIENTS row, sorted.
pub fn rows_of(r: &QueryResult) -> Vec<(String, String, String)> {
    let col = |name: &str| -> Vec<String> {
        r.column(name)
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect()
    };
    let (addr, port, tls) = (col("addr"), col("port"), col("tls"));
    // Whether the client uses TLS is what these tests ask; what its session
    // negotiated (`TLSv1.3/suite/ECDH=group`) is tls_ciphers.rs's to check.
    let uses_tls = |t: &String| {
        if t.starts_with("TLSv") {
            "TLS".into()
        } else {
            t.clone()
        }
    };
    let mut rows: Vec<_> = (0..addr.len())
        .map(|i| (addr[i].clone(), port[i].clone(), uses_tls(&tls[i])))
        .collect();
    rows.sort();
    rows
}

pub fn row(addr: &str, port: u16, tls: bool) -> (String, String, String) {
    let tls = if tls { "TLS" } else { "" };
    (addr.to_string(), port.to_string(), tls.to_string())
}

/// A connection that must be closed without a reply.
pub fn assert_closed(mut raw: RawConn, what: &str) {
    match raw.read_msg(STEP) {
        Reply::Closed => {}
        other => panic!("{what}: expected a close, got {}", other.summary()),
    }
}

/// SHOW CLIENTS rows of `p` right now (one console query).
pub fn show_clients_now(p: &Pooler) -> Vec<(String, String, String)> {
    rows_of(&wait_show(
        p,
        "SHOW CLIENTS",
        "SHOW CLIENTS answered",
        |_| true,
    ))
}
