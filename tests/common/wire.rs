//! A raw, blocking PostgreSQL protocol client: build any bytes (valid or
//! not), send them whole or one byte per write, and read back exactly what
//! the server answered, including the things libpq hides. Used for malformed
//! input and to compare the pooler's replies with PostgreSQL's own.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use openssl::ssl::{HandshakeError, SslConnector, SslMethod, SslVerifyMode};

mod packets;
mod reply;
mod session;
mod stream;

pub use packets::{
    cancel_packet, column_names, cstrings, data_row, message, name_value, request_packet,
    startup_packet,
};
pub use reply::{ErrorFields, Failure, QueryResult, Reply, Session};
use stream::Stream;

/// Protocol 3.0.
pub const PROTOCOL_3_0: u32 = 3 << 16;
pub const SSL_REQUEST_CODE: u32 = 80877103;
pub const GSSENC_REQUEST_CODE: u32 = 80877104;
pub const CANCEL_REQUEST_CODE: u32 = 80877102;

/// Where a raw client connects.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Tcp(u16),
    Unix(PathBuf),
}

/// How a raw client checks the server's certificate in [`RawConn::start_tls`].
#[derive(Debug, Clone)]
pub enum TlsVerify {
    /// Accept any certificate (libpq's sslmode=require without a root cert).
    None,
    /// The chain must lead to this CA and the certificate must name `host`
    /// (libpq's verify-full).
    Full { ca: PathBuf, host: String },
}

pub struct RawConn {
    stream: Stream,
    rbuf: Vec<u8>,
    /// Write every byte with its own write call (and a short pause), to
    /// prove the peer reassembles messages.
    pub split_writes: bool,
    /// Authentication request codes of the last login, also when it failed.
    pub auth_codes: Vec<i32>,
}

impl RawConn {
    pub fn connect(ep: &Endpoint) -> RawConn {
        RawConn::try_connect(ep).unwrap_or_else(|e| panic!("raw connect to {ep:?}: {e}"))
    }

    pub fn try_connect(ep: &Endpoint) -> io::Result<RawConn> {
        let stream = match ep {
            Endpoint::Tcp(port) => {
                let s = TcpStream::connect(("127.0.0.1", *port))?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
            Endpoint::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
        };
        Ok(RawConn {
            stream,
            rbuf: Vec::new(),
            split_writes: false,
            auth_codes: Vec::new(),
        })
    }

    /// Wraps a TCP connection the caller made (e.g. from a chosen source address).
    pub fn from_tcp(s: TcpStream) -> RawConn {
        let _ = s.set_nodelay(true);
        RawConn {
            stream: Stream::Tcp(s),
            rbuf: Vec::new(),
            split_writes: false,
            auth_codes: Vec::new(),
        }
    }

    /// Runs the client side of a TLS handshake on this connection (after
    /// SSLRequest was answered `S`); from then on everything goes through
    /// TLS. Fails when bytes arrived before the handshake (the server must
    /// send nothing after `S`) or the handshake fails.
    pub fn start_tls(&mut self, verify: &TlsVerify) -> Result<(), String> {
        if !self.rbuf.is_empty() {
            return Err(format!(
                "{} byte(s) arrived before the TLS handshake: {:?}",
                self.rbuf.len(),
                self.rbuf
            ));
        }
        let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
        let host = match verify {
            TlsVerify::None => {
                b.set_verify(SslVerifyMode::NONE);
                "localhost".to_string()
            }
            TlsVerify::Full { ca, host } => {
                b.set_ca_file(ca)
                    .map_err(|e| format!("CA file {}: {e}", ca.display()))?;
                b.set_verify(SslVerifyMode::PEER);
                host.clone()
            }
        };
        let mut config = b.build().configure().map_err(|e| e.to_string())?;
        config.set_verify_hostname(matches!(verify, TlsVerify::Full { .. }));
        let plain = std::mem::replace(&mut self.stream, Stream::Detached);
        let _ = plain.set_read_timeout(Some(Duration::from_secs(10)));
        match config.connect(&host, plain) {
            Ok(tls) => {
                self.stream = Stream::Tls(Box::new(tls));
                Ok(())
            }
            Err(HandshakeError::SetupFailure(e)) => Err(format!("TLS setup failed: {e}")),
            Err(HandshakeError::Failure(mid)) => Err(format!(
                "TLS handshake failed: {} (certificate check: {})",
                mid.error(),
                mid.ssl().verify_result()
            )),
            Err(HandshakeError::WouldBlock(_)) => Err("TLS handshake timed out".to_string()),
        }
    }

    /// The subject CNs of the certificates the server sent, leaf first
    /// (empty on a plain link).
    pub fn tls_peer_chain(&self) -> Vec<String> {
        let Stream::Tls(s) = &self.stream else {
            return Vec::new();
        };
        let cn = |c: &openssl::x509::X509Ref| {
            c.subject_name()
                .entries_by_nid(openssl::nid::Nid::COMMONNAME)
                .next()
                .and_then(|e| e.data().to_string().ok())
                .unwrap_or_default()
        };
        s.ssl()
            .peer_cert_chain()
            .map(|chain| chain.iter().map(cn).collect())
            .unwrap_or_default()
    }

    /// The negotiated TLS version ("TLSv1.3"), or None on a plain link.
    pub fn tls_version(&self) -> Option<String> {
        match &self.stream {
            Stream::Tls(s) => Some(s.ssl().version_str().to_string()),
            _ => None,
        }
    }

    /// Reads the answer to SSLRequest/GSSENCRequest: `Byte(b'S')` or
    /// `Byte(b'N')`, or, when the server answered with an ErrorResponse
    /// instead of a single byte, that framed message (or Closed/Timeout).
    pub fn read_request_answer(&mut self, timeout: Duration) -> Reply {
        if let Some(r) = self.fill(1, Instant::now() + timeout) {
            return r;
        }
        if self.rbuf[0] == b'E' {
            return self.read_msg(timeout);
        }
        Reply::Byte(self.rbuf.remove(0))
    }

    /// Sends bytes, whole or one byte per write.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.split_writes {
            for b in bytes {
                self.stream.write_all(std::slice::from_ref(b))?;
                std::thread::sleep(Duration::from_micros(300));
            }
            Ok(())
        } else {
            self.stream.write_all(bytes)
        }
    }

    /// Sends each part with its own write (inside TLS, its own record),
    /// all corked into as few TCP segments as they fit.
    pub fn send_corked(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        self.stream.set_cork(true)?;
        for p in parts {
            self.stream.write_all(p)?;
        }
        self.stream.set_cork(false)
    }

    /// Half-closes the connection (no more bytes from us).
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown_write();
    }

    /// Fills the read buffer until it holds `n` bytes. Returns the reply
    /// that ended the wait early (Closed/Timeout), or None when filled.
    fn fill(&mut self, n: usize, deadline: Instant) -> Option<Reply> {
        let mut chunk = [0u8; 16384];
        while self.rbuf.len() < n {
            let now = Instant::now();
            if now >= deadline {
                return Some(Reply::Timeout);
            }
            let _ = self.stream.set_read_timeout(Some(deadline - now));
            match self.stream.read(&mut chunk) {
                Ok(0) => return Some(Reply::Closed),
                Ok(k) => self.rbuf.extend_from_slice(&chunk[..k]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Some(Reply::Timeout)
                }
                Err(_) => return Some(Reply::Closed),
            }
        }
        None
    }

    /// Reads one unframed byte (SSLRequest / GSSENCRequest answer).
    pub fn read_byte(&mut self, timeout: Duration) -> Reply {
        if let Some(r) = self.fill(1, Instant::now() + timeout) {
            return r;
        }
        Reply::Byte(self.rbuf.remove(0))
    }

    /// Reads one framed message. On Closed/Timeout, any partial bytes stay
    /// buffered (see [`RawConn::pending`]).
    pub fn read_msg(&mut self, timeout: Duration) -> Reply {
        let deadline = Instant::now() + timeout;
        if let Some(r) = self.fill(5, deadline) {
            return r;
        }
        let len = u32::from_be_bytes(self.rbuf[1..5].try_into().unwrap()) as usize;
        if !(4..=16 << 20).contains(&len) {
            // Not a v3 frame: return everything until the peer closes.
            let _ = self.fill(
                usize::MAX,
                deadline.min(Instant::now() + Duration::from_secs(2)),
            );
            return Reply::Invalid(std::mem::take(&mut self.rbuf));
        }
        if let Some(r) = self.fill(1 + len, deadline) {
            return r;
        }
        let tag = self.rbuf[0];
        let body = self.rbuf[5..1 + len].to_vec();
        self.rbuf.drain(..1 + len);
        Reply::Msg(tag, body)
    }

    /// Bytes received but not yet returned as a message.
    pub fn pending(&self) -> &[u8] {
        &self.rbuf
    }

    /// Reads messages until the peer closes or `timeout` passes; the last
    /// element is `Closed` or `Timeout`.
    pub fn read_until_close(&mut self, timeout: Duration) -> Vec<Reply> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let r = self.read_msg(deadline.saturating_duration_since(Instant::now()));
            let end = matches!(r, Reply::Closed | Reply::Timeout | Reply::Invalid(_));
            out.push(r);
            if end {
                if matches!(out.last(), Some(Reply::Invalid(_))) {
                    out.push(Reply::Closed);
                }
                return out;
            }
        }
    }

    /// Reads until the peer closes, within `timeout`, and checks that it
    /// sent a FATAL ErrorResponse with `code` first; `who` names the session
    /// in a failure. The error, for further checks.
    pub fn fatal_then_close(&mut self, timeout: Duration, code: &str, who: &str) -> ErrorFields {
        let replies = self.read_until_close(timeout);
        let err = replies
            .iter()
            .find_map(Reply::error)
            .unwrap_or_else(|| panic!("{who}: no ErrorResponse before the close: {replies:?}"));
        assert_eq!(
            (err.severity.as_str(), err.code.as_str()),
            ("FATAL", code),
            "{who}: {err:?}"
        );
        assert_eq!(replies.last(), Some(&Reply::Closed), "{who}: {replies:?}");
        err
    }
}

/// Sends one CancelRequest on a new connection and waits for the server to
/// close it (servers never answer a CancelRequest).
pub fn send_cancel(ep: &Endpoint, pid: i32, key: i32) -> Reply {
    let mut c = RawConn::connect(ep);
    c.send(&cancel_packet(pid, key))
        .expect("send CancelRequest");
    c.read_msg(Duration::from_secs(5))
}
