//! The start of a connection, up to a usable StartupMessage: direct TLS
//! (PostgreSQL 17), SSL and GSS encryption requests, cancel requests, and
//! protocol version checks. All transport-security decisions will be made
//! here.

use std::io;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use super::error::ClientError;
use super::LoginTimings;
use crate::config::SslMode;
use crate::listener::Transport;
use crate::protocol::frontend::{parse_startup, StartupMessage, StartupRequest};
use crate::protocol::proxy;
use crate::protocol::tags::encryption;
use crate::protocol::{server, FrameBuf, PgError, Violation, MAX_STARTUP_PACKET, PROTOCOL_3_0};
use crate::stream::{fill, read_startup, ReadError, Stream};
use crate::tls::policy::refuse_plain_startup;
use crate::tls::{alpn, Acceptor};
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
    let tls = acceptor.filter(|_| policy != SslMode::Disable);
    // Only where TLS may be had is the first byte looked at; elsewhere a
    // ClientHello fails as a startup packet below, and the client gets the
    // same silent close PostgreSQL gives it.
    if let Some(acceptor) = tls {
        if first_byte(stream, buf).await? == encryption::TLS_HANDSHAKE_RECORD {
            timings.first_packet = accepted_at.elapsed();
            // The read took the ClientHello's first bytes: the handshake
            // starts from them.
            direct_tls(stream, acceptor, buf.readable(), timings).await?;
            let read = buf.readable().len();
            buf.consume(read);
            // What follows is what follows SSLRequest and its handshake.
            ssl_done = true;
        }
    }
    loop {
        let frame = match read_startup(stream, buf, MAX_STARTUP_PACKET).await {
            Ok(f) => f,
            // PostgreSQL logs a bad length and closes without a reply.
            Err(ReadError::Violation(_)) if proxy::starts_like_header(buf.readable()) => {
                return Err(ClientError::UntrustedProxy)
            }
            Err(ReadError::Violation(v)) => {
                let why = tls.map_or_else(|| rejected_direct(buf), |_| None);
                return Err(ClientError::SilentClose(why.unwrap_or(v)));
            }
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
                match tls {
                    Some(acceptor) => {
                        stream.write_all(&[encryption::SSL_ACCEPTED]).await?;
                        accept_tls(stream, acceptor, &[], timings).await?;
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

/// Runs the TLS handshake and times it. A failed handshake has no channel
/// left to report on; the log gets OpenSSL's reason. A peer that left
/// without trying is just gone.
async fn accept_tls(
    stream: &mut Stream,
    acceptor: &Acceptor,
    early: &[u8],
    timings: &mut LoginTimings,
) -> Result<(), ClientError> {
    let started = Instant::now();
    stream
        .accept_tls(acceptor, early)
        .await
        .map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => ClientError::Gone,
            _ => ClientError::TlsHandshake(e.to_string()),
        })?;
    timings.tls_handshake = started.elapsed();
    Ok(())
}

/// A client that opened with a TLS record (PostgreSQL 17's direct SSL, no
/// SSLRequest): the handshake at once, then ALPN "postgresql" is required,
/// as PostgreSQL 17 requires it, since nothing else shows that the peer
/// means to speak PostgreSQL (see [`alpn`]). Without it PostgreSQL logs the
/// refusal and closes after the handshake without a word (COMMERROR, not
/// FATAL): a peer that has not said it speaks the protocol is sent none.
async fn direct_tls(
    stream: &mut Stream,
    acceptor: &Acceptor,
    hello: &[u8],
    timings: &mut LoginTimings,
) -> Result<(), ClientError> {
    accept_tls(stream, acceptor, hello, timings).await?;
    alpn::check_direct_client(stream).map_err(|why| ClientError::TlsHandshake(why.into()))?;
    tracing::debug!("direct SSL connection accepted");
    Ok(())
}

/// The first byte the client sent, read into `buf` with whatever came with
/// it, for whoever reads next (the TLS handshake or the startup packet
/// reader): one read, where a peek and then the read cost two system calls.
async fn first_byte(stream: &mut Stream, buf: &mut FrameBuf) -> Result<u8, ClientError> {
    if buf.is_empty() {
        // As PostgreSQL: a peer that sends nothing at all is not worth a
        // log line (an end of file is ClientError::Gone).
        fill(stream, buf).await?;
    }
    buf.readable().first().copied().ok_or(ClientError::Gone)
}

/// The reason to log for a direct TLS client where TLS is off (no
/// certificate, or the transport's mode is disable): PostgreSQL 17 closes
/// it without a reply ("direct SSL connection rejected").
fn rejected_direct(buf: &FrameBuf) -> Option<Violation> {
    let hello = buf.readable().first() == Some(&encryption::TLS_HANDSHAKE_RECORD);
    hello.then(|| Violation::new("direct SSL connection rejected: TLS is off on this transport"))
}
