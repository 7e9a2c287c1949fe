//! The start of a connection, up to a usable StartupMessage: SSL and GSS
//! encryption requests, cancel requests, and protocol version checks. All
//! transport-security decisions will be made here.

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use super::error::ClientError;
use super::LoginTimings;
use crate::config::SslMode;
use crate::listener::Transport;
use crate::protocol::frontend::{parse_startup, StartupMessage, StartupRequest};
use crate::protocol::tags::encryption;
use crate::protocol::{server, FrameBuf, PgError, Violation, MAX_STARTUP_PACKET, PROTOCOL_3_0};
use crate::stream::{read_startup, ReadError, Stream};
use crate::tls::policy::refuse_plain_startup;
use crate::tls::Acceptor;
use std::time::Instant;

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
    (transport, accepted_at): (Transport, Instant),
    policy: SslMode,
    acceptor: Option<&Acceptor>,
    timings: &mut LoginTimings,
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
        if timings.first_packet.is_zero() {
            timings.first_packet = accepted_at.elapsed();
        }
        let request = parse_startup(buf.body(&frame));
        buf.consume(frame.total);
        match request? {
            StartupRequest::Ssl if !ssl_done => {
                ssl_done = true;
                refuse_early_data(buf)?;
                match acceptor.filter(|_| policy != SslMode::Disable) {
                    Some(acceptor) => {
                        stream.write_all(&[encryption::SSL_ACCEPTED]).await?;
                        let started = Instant::now();
                        // A failed handshake has no channel left to report
                        // on; the log gets OpenSSL's reason. A peer that
                        // left without trying is just gone.
                        stream
                            .accept_tls(acceptor)
                            .await
                            .map_err(|e| match e.kind() {
                                std::io::ErrorKind::UnexpectedEof => ClientError::Gone,
                                _ => ClientError::TlsHandshake(e.to_string()),
                            })?;
                        timings.tls_handshake = started.elapsed();
                    }
                    None => stream.write_all(&[encryption::DECLINED]).await?,
                }
            }
            StartupRequest::GssEnc if !gss_done && !stream.is_tls() => {
                gss_done = true;
                refuse_early_data(buf)?;
                stream.write_all(&[encryption::DECLINED]).await?;
            }
            StartupRequest::Ssl | StartupRequest::GssEnc => {
                return Err(ClientError::Protocol(Violation::new(
                    "encryption request repeated during negotiation",
                )))
            }
            StartupRequest::Cancel { pid, secret } => return Ok(Opening::Cancel { pid, secret }),
            StartupRequest::Startup(msg) => {
                tracing::Span::current().record("tls", stream.is_tls());
                if !stream.is_tls() {
                    if let Some(why) = refuse_plain_startup(policy, transport) {
                        return Err(ClientError::Refused(PgError::fatal("28000", why)));
                    }
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

/// Bytes that arrived with an SSLRequest or GSSENCRequest were sent before
/// the client could know the answer: a man in the middle injecting plaintext
/// (CVE-2021-23214, PgBouncer CVE-2021-3935), so they are never processed.
fn refuse_early_data(buf: &FrameBuf) -> Result<(), ClientError> {
    if !buf.is_empty() {
        return Err(ClientError::Protocol(Violation::new(
            "received unencrypted data after SSL request",
        )));
    }
    Ok(())
}
