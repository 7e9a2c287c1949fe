//! The PostgreSQL wire protocol as the pooler needs it, without I/O.
//!
//! `postgres-protocol` parses what a server sends and builds what a client
//! sends; this module adds the other half a proxy needs: parsing client
//! messages ([`frontend`]), building server messages ([`server`]), a framing
//! buffer that checks lengths before it allocates ([`codec`]), and a header
//! scanner that lets the relay follow message boundaries without copying
//! ([`scan`]).

pub mod codec;
pub mod frontend;
pub mod messages;
pub mod proxy;
pub mod scan;
pub mod server;
pub mod sql;
pub mod tags;

pub use codec::{BufStash, Frame, FrameBuf};
pub use server::{PgError, Severity};

/// PostgreSQL's cap on a startup packet (`MAX_STARTUP_PACKET_LENGTH`).
pub const MAX_STARTUP_PACKET: usize = 10_000;
/// Cap on a message during authentication (password, SASL); PostgreSQL uses 1 000 for
/// passwords and a few KiB for SASL, we allow a little more.
pub const MAX_AUTH_MESSAGE: usize = 8_192;
/// PostgreSQL's cap on any message after login (`PQ_LARGE_MESSAGE_LIMIT`).
pub const MAX_MESSAGE: usize = 0x3fff_fffe;

/// Protocol 3.0 as the startup packet encodes it.
pub const PROTOCOL_3_0: u32 = 3 << 16;
/// SSLRequest code.
pub const SSL_REQUEST_CODE: u32 = 80_877_103;
/// GSSENCRequest code.
pub const GSSENC_REQUEST_CODE: u32 = 80_877_104;
/// CancelRequest code.
pub const CANCEL_REQUEST_CODE: u32 = 80_877_102;

/// A peer broke the protocol; the text goes into a 08P01 error where one can be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);

impl Violation {
    /// A violation with a fixed message.
    pub fn new(msg: impl Into<String>) -> Self {
        Violation(msg.into())
    }
}

/// Reads a big-endian u32 from the first four bytes of `b` (the caller checks the length).
#[inline]
pub fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
