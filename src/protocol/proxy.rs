//! The PROXY protocol header a load balancer puts in front of a relayed
//! connection (HAProxy's `doc/proxy-protocol.txt`, versions 1 and 2), as a
//! pure function over the bytes received so far: no I/O, so the listener
//! decides how to read and the tests need no sockets.
//!
//! [`scan`] says whether those bytes are a whole header (and how long it
//! is), a prefix of one, or not a header at all. Every byte of a prefix is
//! part of the header, so a reader may take them off the socket and never
//! reads what follows the header: an SSLRequest, a direct-TLS ClientHello or
//! a StartupMessage that the client negotiation must see untouched.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Version 1 starts with these six bytes ("PROXY" and one space).
pub const V1_PREFIX: &[u8; 6] = b"PROXY ";
/// The longest version 1 line, CRLF included (an `UNKNOWN` line with two
/// full IPv6 addresses); the spec's limit for receivers.
pub const V1_MAX_LEN: usize = 107;
/// Version 2's twelve-byte signature.
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// Signature, version/command, family/transport and the length word.
pub const V2_FIXED_LEN: usize = 16;
/// Cap on version 2's address block plus TLVs: far more than HAProxy, AWS
/// NLB or Google's load balancers send, small enough to hold before login.
pub const V2_MAX_PAYLOAD: usize = 2048;
/// The longest header [`scan`] accepts.
pub const MAX_HEADER_LEN: usize = V2_FIXED_LEN + V2_MAX_PAYLOAD;

/// Version 2's version nibble (high half of byte 13).
const V2_VERSION: u8 = 0x2;
/// Command LOCAL: the proxy's own connection, such as a health check.
const CMD_LOCAL: u8 = 0x0;
/// Command PROXY: a relayed client connection.
const CMD_PROXY: u8 = 0x1;
/// Address families (high half of byte 14).
const AF_UNSPEC: u8 = 0x0;
const AF_INET: u8 = 0x1;
const AF_INET6: u8 = 0x2;
const AF_UNIX: u8 = 0x3;
/// Transport protocols (low half of byte 14).
const PROTO_UNSPEC: u8 = 0x0;
const PROTO_STREAM: u8 = 0x1;
const PROTO_DGRAM: u8 = 0x2;
/// Address block lengths: two addresses and two ports, or two socket paths.
const INET_BLOCK: usize = 2 * 4 + 2 * 2;
const INET6_BLOCK: usize = 2 * 16 + 2 * 2;
const UNIX_BLOCK: usize = 2 * 108;

/// Which version of the protocol a header was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// The text line.
    V1,
    /// The binary header.
    V2,
}

/// What a header says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// v2 LOCAL: the proxy speaks for itself (a health check); the socket's
    /// own addresses are the true ones.
    Local,
    /// v1 UNKNOWN, or a v2 family with no IP address (UNSPEC, UNIX): the
    /// proxy relays a client it cannot name by IP; the spec leaves the
    /// socket's addresses in force.
    Unknown,
    /// A TCP client, as the proxy saw it.
    Tcp {
        /// The client's address: what the pooler takes as the peer.
        source: SocketAddr,
        /// The address the client connected to on the proxy.
        destination: SocketAddr,
    },
}

/// A whole header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Its version.
    pub version: Version,
    /// What it says.
    pub origin: Origin,
    /// Its length in bytes: what to take off the socket, and no more.
    pub len: usize,
}

/// Why bytes are not a PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Neither signature: the connection did not start with a header.
    #[error("no PROXY protocol header (the connection did not start with \"PROXY \" or the v2 signature)")]
    NoHeader,
    /// v1 without CRLF within the spec's 107 bytes.
    #[error("PROXY v1 line longer than {V1_MAX_LEN} bytes without CRLF")]
    V1TooLong,
    /// v1 with a byte no header line holds (a lone CR or LF, a control byte).
    #[error("PROXY v1 line holds byte 0x{0:02x}")]
    V1Byte(u8),
    /// v1 whose fields are not `PROXY TCP4|TCP6|UNKNOWN ...`.
    #[error(
        "PROXY v1 line is not \"PROXY TCP4|TCP6 src dst sport dport\" or \"PROXY UNKNOWN\": {0}"
    )]
    V1Line(&'static str),
    /// v2 with a version nibble other than 2.
    #[error("PROXY v2 header with version {0}")]
    V2Version(u8),
    /// v2 with a command other than LOCAL or PROXY.
    #[error("PROXY v2 header with command {0}")]
    V2Command(u8),
    /// v2 with an address family or transport the spec does not define, or
    /// a datagram transport on a TCP listener.
    #[error("PROXY v2 header with family/transport byte 0x{0:02x}")]
    V2Family(u8),
    /// v2 whose length is too short for its address family.
    #[error("PROXY v2 header of {len} bytes after the fixed part, too short for its {need}-byte address block")]
    V2Short {
        /// The length word.
        len: usize,
        /// The family's address block.
        need: usize,
    },
    /// v2 longer than [`V2_MAX_PAYLOAD`].
    #[error("PROXY v2 header of {0} bytes after the fixed part, more than the {V2_MAX_PAYLOAD} accepted")]
    V2TooLong(usize),
}

/// How far the bytes received so far go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// A prefix of a header: every byte so far belongs to it; more must come.
    Partial,
    /// A whole header, at the start of the bytes.
    Complete(Header),
    /// Not a header.
    Invalid(Malformed),
}

/// Scans the first bytes of a connection for a PROXY header.
pub fn scan(bytes: &[u8]) -> Scan {
    let result = match bytes.first() {
        None => Ok(None),
        Some(b'P') => scan_v1(bytes),
        Some(b'\r') => scan_v2(bytes),
        Some(_) => Err(Malformed::NoHeader),
    };
    match result {
        Ok(None) => Scan::Partial,
        Ok(Some(header)) => Scan::Complete(header),
        Err(e) => Scan::Invalid(e),
    }
}

/// Whether `bytes` (at least four of them) begin the way a header does:
/// how a connection that was not expected to send one is recognised.
pub fn starts_like_header(bytes: &[u8]) -> bool {
    let sig: &[u8] = match bytes.first() {
        Some(b'P') => V1_PREFIX,
        Some(b'\r') => V2_SIGNATURE,
        _ => return false,
    };
    let n = bytes.len().min(sig.len());
    n >= 4 && bytes[..n] == sig[..n]
}

/// `bytes` must start with `sig`, or be a prefix of it.
fn signature(bytes: &[u8], sig: &[u8]) -> Result<bool, Malformed> {
    let n = bytes.len().min(sig.len());
    if bytes[..n] != sig[..n] {
        return Err(Malformed::NoHeader);
    }
    Ok(n == sig.len())
}

fn scan_v1(bytes: &[u8]) -> Result<Option<Header>, Malformed> {
    if !signature(bytes, V1_PREFIX)? {
        return Ok(None);
    }
    let window = &bytes[..bytes.len().min(V1_MAX_LEN)];
    // The spec forbids ending on a lone CR or LF: only printable bytes, then
    // CR immediately followed by LF.
    let mut end = None;
    for (i, &b) in window.iter().enumerate() {
        match b {
            b'\r' => match window.get(i + 1) {
                Some(b'\n') => {
                    end = Some(i);
                    break;
                }
                Some(&other) => return Err(Malformed::V1Byte(other)),
                None => {}
            },
            0x20..=0x7e => {}
            other => return Err(Malformed::V1Byte(other)),
        }
    }
    let Some(end) = end else {
        return if bytes.len() >= V1_MAX_LEN {
            Err(Malformed::V1TooLong)
        } else {
            Ok(None)
        };
    };
    let line = std::str::from_utf8(&window[V1_PREFIX.len()..end])
        .map_err(|_| Malformed::V1Line("not ASCII"))?;
    Ok(Some(Header {
        version: Version::V1,
        origin: v1_fields(line)?,
        len: end + 2,
    }))
}

/// The fields after "PROXY ", each separated by exactly one space.
fn v1_fields(line: &str) -> Result<Origin, Malformed> {
    let mut fields = line.split(' ');
    let proto = fields.next().unwrap_or_default();
    let is_v6 = match proto {
        // The receiver must ignore whatever follows UNKNOWN.
        "UNKNOWN" => return Ok(Origin::Unknown),
        "TCP4" => false,
        "TCP6" => true,
        _ => return Err(Malformed::V1Line("protocol is not TCP4, TCP6 or UNKNOWN")),
    };
    let rest: Vec<&str> = fields.collect();
    let [src, dst, sport, dport] = rest[..] else {
        return Err(Malformed::V1Line(
            "expected source, destination and two ports",
        ));
    };
    let (src, dst) = (v1_address(src, is_v6)?, v1_address(dst, is_v6)?);
    Ok(Origin::Tcp {
        source: SocketAddr::new(src, v1_port(sport)?),
        destination: SocketAddr::new(dst, v1_port(dport)?),
    })
}

fn v1_address(text: &str, is_v6: bool) -> Result<IpAddr, Malformed> {
    // std's IPv4 parser already refuses leading zeros, as the spec asks.
    let ip = if is_v6 {
        text.parse::<Ipv6Addr>().map(IpAddr::V6)
    } else {
        text.parse::<Ipv4Addr>().map(IpAddr::V4)
    };
    ip.map_err(|_| Malformed::V1Line("address is not one of the protocol's family"))
}

/// A decimal port without leading zeros (nor a sign, which `u16` parses).
fn v1_port(text: &str) -> Result<u16, Malformed> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let canonical = text == "0" || !text.starts_with('0');
    match text.parse::<u16>() {
        Ok(port) if digits && canonical => Ok(port),
        _ => Err(Malformed::V1Line(
            "port is not a decimal number from 0 to 65535",
        )),
    }
}

fn scan_v2(bytes: &[u8]) -> Result<Option<Header>, Malformed> {
    if !signature(bytes, V2_SIGNATURE)? {
        return Ok(None);
    }
    // Each fixed byte is judged as soon as it arrives, so garbage after the
    // signature is refused without waiting for the rest.
    let Some(&ver_cmd) = bytes.get(12) else {
        return Ok(None);
    };
    let (version, command) = (ver_cmd >> 4, ver_cmd & 0x0f);
    if version != V2_VERSION {
        return Err(Malformed::V2Version(version));
    }
    if command != CMD_LOCAL && command != CMD_PROXY {
        return Err(Malformed::V2Command(command));
    }
    let Some(&fam) = bytes.get(13) else {
        return Ok(None);
    };
    let need = v2_block_len(fam)?;
    let Some(len) = bytes.get(14..16) else {
        return Ok(None);
    };
    let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
    if len > V2_MAX_PAYLOAD {
        return Err(Malformed::V2TooLong(len));
    }
    // LOCAL must be accepted whatever address it carries.
    if command == CMD_PROXY && len < need {
        return Err(Malformed::V2Short { len, need });
    }
    let Some(block) = bytes.get(V2_FIXED_LEN..V2_FIXED_LEN + len) else {
        return Ok(None);
    };
    // Whatever follows the address block is TLVs, which nothing here needs.
    let origin = match command {
        CMD_LOCAL => Origin::Local,
        _ => v2_origin(fam, block),
    };
    Ok(Some(Header {
        version: Version::V2,
        origin,
        len: V2_FIXED_LEN + len,
    }))
}

/// The address block a family/transport byte calls for; 0 where the
/// address is to be ignored.
fn v2_block_len(fam: u8) -> Result<usize, Malformed> {
    let (family, proto) = (fam >> 4, fam & 0x0f);
    match (family, proto) {
        // A datagram cannot have come in over a TCP listener.
        (_, PROTO_DGRAM) => Err(Malformed::V2Family(fam)),
        (AF_UNSPEC, PROTO_UNSPEC | PROTO_STREAM) => Ok(0),
        (AF_INET | AF_INET6 | AF_UNIX, PROTO_UNSPEC) => Ok(0),
        (AF_INET, PROTO_STREAM) => Ok(INET_BLOCK),
        (AF_INET6, PROTO_STREAM) => Ok(INET6_BLOCK),
        (AF_UNIX, PROTO_STREAM) => Ok(UNIX_BLOCK),
        _ => Err(Malformed::V2Family(fam)),
    }
}

/// The client's addresses from a PROXY command's block, whose length
/// [`v2_block_len`] has checked.
fn v2_origin(fam: u8, block: &[u8]) -> Origin {
    let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
    match (fam >> 4, fam & 0x0f) {
        (AF_INET, PROTO_STREAM) => {
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    block[at],
                    block[at + 1],
                    block[at + 2],
                    block[at + 3],
                ))
            };
            Origin::Tcp {
                source: SocketAddr::new(ip(0), port(8)),
                destination: SocketAddr::new(ip(4), port(10)),
            }
        }
        (AF_INET6, PROTO_STREAM) => {
            let ip = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&block[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            Origin::Tcp {
                source: SocketAddr::new(ip(0), port(32)),
                destination: SocketAddr::new(ip(16), port(34)),
            }
        }
        // UNIX and UNSPEC: no IP address to take; the socket's stays.
        _ => Origin::Unknown,
    }
}

#[cfg(test)]
mod tests;
