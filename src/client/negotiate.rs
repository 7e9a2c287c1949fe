//! The start of a connection, up to a usable StartupMessage: SSL and GSS
//! encryption requests, cancel requests, and protocol version checks. All
//! transport-security decisions will be made here.

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use super::error::ClientError;
use crate::protocol::frontend::{parse_startup, StartupMessage, StartupRequest};
use crate::protocol::{server, FrameBuf, PgError, Violation, MAX_STARTUP_PACKET, PROTOCOL_3_0};
use crate::stream::{read_startup, ReadError, Stream};
use crate::tls::policy::refuse_plain_startup;
use crate::tls::{SslMode, Transport};

/// What the first packets asked for.
pub enum Opening {
    /// A login.
    Startup(StartupMessage),
    /// A cancel request for the key shown.
    Cancel {
        /// Process id from BackendKeyData.
        pid: i32,
        /// Secret from BackendKeyData.
        secret: i32,
    },
}

/// Reads startup packets until a StartupMessage or CancelRequest arrives.
/// Each of SSLRequest and GSSENCRequest may come once, as PostgreSQL allows.
pub async fn negotiate(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    transport: Transport,
    policy: SslMode,
) -> Result<Opening, ClientError> {
    let mut ssl_done = false;
    let mut gss_done = false;
    loop {
        let frame = match read_startup(stream, buf, MAX_STARTUP_PACKET).await {
            Ok(f) => f,
            // PostgreSQL logs a bad length and closes without a reply.
            Err(ReadError::Violation(v)) => return Err(ClientError::SilentClose(v)),
            Err(e) => return Err(e.into()),
        };
        let request = parse_startup(buf.body(&frame));
        buf.consume(frame.total);
        match request? {
            StartupRequest::Ssl if !ssl_done => {
                ssl_done = true;
                refuse_encryption(stream, buf).await?;
            }
            StartupRequest::GssEnc if !gss_done => {
                gss_done = true;
                refuse_encryption(stream, buf).await?;
            }
            StartupRequest::Ssl | StartupRequest::GssEnc => {
                return Err(ClientError::Protocol(Violation::new(
                    "encryption request repeated during negotiation",
                )))
            }
            StartupRequest::Cancel { pid, secret } => return Ok(Opening::Cancel { pid, secret }),
            StartupRequest::Startup(msg) => {
                if let Some(why) = refuse_plain_startup(policy, transport) {
                    return Err(ClientError::Refused(PgError::fatal("28000", why)));
                }
                if msg.minor > 0 || !msg.protocol_options.is_empty() {
                    let mut out = BytesMut::new();
                    let opts: Vec<&str> = msg.protocol_options.iter().map(String::as_str).collect();
                    server::negotiate_protocol_version(&mut out, PROTOCOL_3_0, &opts);
                    stream.write_all(&out).await?;
                }
                return Ok(Opening::Startup(msg));
            }
        }
    }
}

/// Answers `N`. Bytes that arrived with the request were sent before the
/// client could know the answer: a man in the middle injecting plaintext
/// (CVE-2021-23214), so they are never processed.
async fn refuse_encryption(stream: &mut Stream, buf: &FrameBuf) -> Result<(), ClientError> {
    if !buf.is_empty() {
        return Err(ClientError::Protocol(Violation::new(
            "received unencrypted data after SSL request",
        )));
    }
    stream.write_all(b"N").await?;
    Ok(())
}
