//! A raw, blocking PostgreSQL protocol client: build any bytes (valid or
//! not), send them whole or one byte per write, and read back exactly what
//! the server answered, including the things libpq hides. Used for malformed
//! input and to compare the pooler's replies with PostgreSQL's own.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use openssl::ssl::{HandshakeError, SslConnector, SslMethod, SslStream, SslVerifyMode};
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use postgres_protocol::message::frontend;

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

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// TLS on top of one of the above, after SSLRequest and `S`.
    Tls(Box<SslStream<Stream>>),
    /// Only while the plain stream moves into a TLS session.
    Detached,
}

fn detached() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "stream detached")
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.get_ref().set_read_timeout(t),
            Stream::Detached => Err(detached()),
        }
    }
    fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
            Stream::Tls(s) => s.get_ref().shutdown_write(),
            Stream::Detached => Err(detached()),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Detached => Err(detached()),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            Stream::Detached => Err(detached()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
            Stream::Detached => Err(detached()),
        }
    }
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

/// One thing read from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A framed message: type byte and body (without the length word).
    Msg(u8, Vec<u8>),
    /// A single unframed byte (the answer to SSLRequest / GSSENCRequest).
    Byte(u8),
    /// Bytes that do not frame as a v3 message (length < 4 or > 16 MiB),
    /// with whatever else arrived until the close.
    Invalid(Vec<u8>),
    /// Orderly close (EOF) or reset by the peer.
    Closed,
    /// Nothing arrived in time.
    Timeout,
}

impl Reply {
    /// The ErrorResponse fields when this is an ErrorResponse.
    pub fn error(&self) -> Option<ErrorFields> {
        match self {
            Reply::Msg(b'E', body) => Some(ErrorFields::parse(body)),
            _ => None,
        }
    }

    /// A short description that is equal for equal behaviour: message type
    /// plus, for errors, severity/SQLSTATE/message.
    pub fn summary(&self) -> String {
        match self {
            Reply::Msg(b'E', body) => {
                let e = ErrorFields::parse(body);
                format!("ErrorResponse {} {} {:?}", e.severity, e.code, e.message)
            }
            Reply::Msg(b'v', body) => format!("NegotiateProtocolVersion {body:?}"),
            Reply::Msg(b'R', body) => format!("Authentication {:?}", &body[..4.min(body.len())]),
            Reply::Msg(t, _) => format!("Msg {:?}", *t as char),
            Reply::Byte(b) => format!("Byte {:?}", *b as char),
            Reply::Invalid(bytes) => format!("Invalid {:?}", String::from_utf8_lossy(bytes)),
            Reply::Closed => "Closed".to_string(),
            Reply::Timeout => "Timeout".to_string(),
        }
    }
}

/// The fields of an ErrorResponse or NoticeResponse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFields {
    /// 'V' (non-localized severity) when present, else 'S'.
    pub severity: String,
    pub code: String,
    pub message: String,
    pub fields: BTreeMap<char, String>,
}

impl ErrorFields {
    pub fn parse(body: &[u8]) -> ErrorFields {
        let mut fields = BTreeMap::new();
        let mut rest = body;
        while let Some((&kind, tail)) = rest.split_first() {
            if kind == 0 {
                break;
            }
            let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
            fields.insert(
                kind as char,
                String::from_utf8_lossy(&tail[..end]).into_owned(),
            );
            rest = tail.get(end + 1..).unwrap_or(&[]);
        }
        let get = |k: char| fields.get(&k).cloned().unwrap_or_default();
        ErrorFields {
            severity: fields.get(&'V').cloned().unwrap_or_else(|| get('S')),
            code: get('C'),
            message: get('M'),
            fields,
        }
    }
}

/// Why a raw login did not reach ReadyForQuery.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    Error(ErrorFields),
    Unexpected(Reply),
    Auth(String),
}

impl Failure {
    pub fn error(&self) -> Option<&ErrorFields> {
        match self {
            Failure::Error(e) => Some(e),
            _ => None,
        }
    }
}

/// What a successful raw login saw.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// ParameterStatus values, by name.
    pub params: BTreeMap<String, String>,
    /// The ParameterStatus messages in arrival order (name, value).
    pub param_order: Vec<(String, String)>,
    /// BackendKeyData (process id, secret key).
    pub key: Option<(i32, i32)>,
    /// Transaction status byte of the ReadyForQuery.
    pub status: u8,
    /// NegotiateProtocolVersion: (newest minor version, unrecognized options).
    pub negotiate: Option<(i32, Vec<String>)>,
    /// Authentication request codes seen (0 = ok, 3 = cleartext, 5 = md5, 10 = SASL).
    pub auth_codes: Vec<i32>,
}

/// The result of one simple query.
#[derive(Debug, Clone, Default)]
pub struct QueryResult {
    /// Column names of the last RowDescription.
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
    pub tags: Vec<String>,
    pub error: Option<ErrorFields>,
    pub notices: Vec<ErrorFields>,
    /// ParameterStatus messages that arrived during the query.
    pub params: Vec<(String, String)>,
    pub status: u8,
}

impl QueryResult {
    /// First column of the first row.
    pub fn scalar(&self) -> Option<String> {
        self.rows.first().and_then(|r| r.first().cloned().flatten())
    }

    /// The values of the column named `name`, one per row; panics when there
    /// is no such column.
    pub fn column(&self, name: &str) -> Vec<Option<String>> {
        let i = self.columns.iter().position(|c| c == name);
        let i = i.unwrap_or_else(|| panic!("no column {name} in {:?}", self.columns));
        self.rows.iter().map(|r| r[i].clone()).collect()
    }
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

    /// Sends a StartupMessage (protocol 3.0) with these parameters.
    pub fn send_startup(&mut self, params: &[(&str, &str)]) -> io::Result<()> {
        self.send(&startup_packet(PROTOCOL_3_0, params))
    }

    /// Full login: StartupMessage, then answers whatever authentication the
    /// server asks for (trust, cleartext, md5, SCRAM-SHA-256) with `password`,
    /// up to ReadyForQuery.
    pub fn login(
        &mut self,
        params: &[(&str, &str)],
        password: Option<&str>,
    ) -> Result<Session, Failure> {
        self.send_startup(params)
            .map_err(|e| Failure::Auth(format!("send startup: {e}")))?;
        self.finish_login(params, password)
    }

    /// The part of [`RawConn::login`] after the startup packet was sent (for
    /// callers that sent their own, e.g. protocol 3.1).
    pub fn finish_login(
        &mut self,
        params: &[(&str, &str)],
        password: Option<&str>,
    ) -> Result<Session, Failure> {
        let user = params
            .iter()
            .find(|(k, _)| *k == "user")
            .map(|(_, v)| *v)
            .unwrap_or("");
        let mut session = Session::default();
        self.auth_codes.clear();
        let mut scram: Option<ScramSha256> = None;
        let timeout = Duration::from_secs(15);
        loop {
            let reply = self.read_msg(timeout);
            let Reply::Msg(tag, body) = &reply else {
                return Err(Failure::Unexpected(reply));
            };
            match tag {
                b'R' => {
                    let code = i32::from_be_bytes(body[..4].try_into().unwrap());
                    session.auth_codes.push(code);
                    self.auth_codes.push(code);
                    let need_pw = || {
                        password.ok_or_else(|| {
                            Failure::Auth(format!("server asked for a password (code {code})"))
                        })
                    };
                    let mut buf = BytesMut::new();
                    match code {
                        0 => continue,
                        3 => frontend::password_message(need_pw()?.as_bytes(), &mut buf).unwrap(),
                        5 => {
                            let salt: [u8; 4] = body[4..8].try_into().unwrap();
                            let hash = md5_hash(user.as_bytes(), need_pw()?.as_bytes(), salt);
                            frontend::password_message(hash.as_bytes(), &mut buf).unwrap();
                        }
                        10 => {
                            let mechs: Vec<&[u8]> = body[4..]
                                .split(|&b| b == 0)
                                .filter(|m| !m.is_empty())
                                .collect();
                            if !mechs.contains(&&b"SCRAM-SHA-256"[..]) {
                                return Err(Failure::Auth(format!(
                                    "no SCRAM-SHA-256 among {:?}",
                                    mechs
                                        .iter()
                                        .map(|m| String::from_utf8_lossy(m))
                                        .collect::<Vec<_>>()
                                )));
                            }
                            let s = ScramSha256::new(
                                need_pw()?.as_bytes(),
                                ChannelBinding::unsupported(),
                            );
                            frontend::sasl_initial_response("SCRAM-SHA-256", s.message(), &mut buf)
                                .unwrap();
                            scram = Some(s);
                        }
                        11 => {
                            let s = scram
                                .as_mut()
                                .ok_or_else(|| Failure::Auth("SASLContinue before SASL".into()))?;
                            s.update(&body[4..])
                                .map_err(|e| Failure::Auth(format!("SCRAM continue: {e}")))?;
                            frontend::sasl_response(s.message(), &mut buf).unwrap();
                        }
                        12 => {
                            let s = scram
                                .as_mut()
                                .ok_or_else(|| Failure::Auth("SASLFinal before SASL".into()))?;
                            s.finish(&body[4..])
                                .map_err(|e| Failure::Auth(format!("SCRAM final: {e}")))?;
                            continue;
                        }
                        other => {
                            return Err(Failure::Auth(format!("unsupported auth request {other}")))
                        }
                    }
                    self.send(&buf)
                        .map_err(|e| Failure::Auth(format!("send auth response: {e}")))?;
                }
                b'v' => {
                    let minor = i32::from_be_bytes(body[..4].try_into().unwrap());
                    let names = cstrings(&body[8..]);
                    session.negotiate = Some((minor, names));
                }
                b'S' => {
                    let (k, v) = name_value(body);
                    session.params.insert(k.clone(), v.clone());
                    session.param_order.push((k, v));
                }
                b'K' => {
                    let pid = i32::from_be_bytes(body[..4].try_into().unwrap());
                    let key = i32::from_be_bytes(body[4..8].try_into().unwrap());
                    session.key = Some((pid, key));
                }
                b'N' => {}
                b'E' => return Err(Failure::Error(ErrorFields::parse(body))),
                b'Z' => {
                    session.status = body.first().copied().unwrap_or(0);
                    return Ok(session);
                }
                _ => return Err(Failure::Unexpected(reply)),
            }
        }
    }

    /// Runs one simple query and reads up to ReadyForQuery.
    pub fn query(&mut self, sql: &str) -> QueryResult {
        let mut buf = BytesMut::new();
        frontend::query(sql, &mut buf).unwrap();
        self.send(&buf).expect("send query");
        self.read_query_result(Duration::from_secs(30))
    }

    /// Reads a query's replies up to ReadyForQuery; panics on close/timeout.
    pub fn read_query_result(&mut self, timeout: Duration) -> QueryResult {
        let mut res = QueryResult::default();
        loop {
            match self.read_msg(timeout) {
                Reply::Msg(b'T', body) => res.columns = column_names(&body),
                Reply::Msg(b'D', body) => res.rows.push(data_row(&body)),
                Reply::Msg(b'C', body) => res.tags.extend(cstrings(&body)),
                Reply::Msg(b'E', body) => res.error = Some(ErrorFields::parse(&body)),
                Reply::Msg(b'N', body) => res.notices.push(ErrorFields::parse(&body)),
                Reply::Msg(b'S', body) => res.params.push(name_value(&body)),
                Reply::Msg(b'Z', body) => {
                    res.status = body.first().copied().unwrap_or(0);
                    return res;
                }
                Reply::Msg(_, _) => {}
                other => panic!("query interrupted: {} (so far {res:?})", other.summary()),
            }
        }
    }

    /// Sends Terminate.
    pub fn terminate(&mut self) {
        let mut buf = BytesMut::new();
        frontend::terminate(&mut buf);
        let _ = self.send(&buf);
    }
}

/// A startup-style packet: length, version code, then name/value C strings
/// and the final NUL.
pub fn startup_packet(version: u32, params: &[(&str, &str)]) -> Vec<u8> {
    let mut body = version.to_be_bytes().to_vec();
    for (k, v) in params {
        body.extend_from_slice(k.as_bytes());
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut pkt = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    pkt.extend_from_slice(&body);
    pkt
}

/// SSLRequest, GSSENCRequest and the like: length 8 plus a code.
pub fn request_packet(code: u32) -> Vec<u8> {
    let mut pkt = 8u32.to_be_bytes().to_vec();
    pkt.extend_from_slice(&code.to_be_bytes());
    pkt
}

/// CancelRequest for (process id, secret key).
pub fn cancel_packet(pid: i32, key: i32) -> Vec<u8> {
    let mut pkt = 16u32.to_be_bytes().to_vec();
    pkt.extend_from_slice(&CANCEL_REQUEST_CODE.to_be_bytes());
    pkt.extend_from_slice(&pid.to_be_bytes());
    pkt.extend_from_slice(&key.to_be_bytes());
    pkt
}

/// A frontend message: type byte, length, body.
pub fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Sends one CancelRequest on a new connection and waits for the server to
/// close it (servers never answer a CancelRequest).
pub fn send_cancel(ep: &Endpoint, pid: i32, key: i32) -> Reply {
    let mut c = RawConn::connect(ep);
    c.send(&cancel_packet(pid, key))
        .expect("send CancelRequest");
    c.read_msg(Duration::from_secs(5))
}

/// ParameterStatus body: name and value (which may be empty).
pub fn name_value(body: &[u8]) -> (String, String) {
    let mut parts = body.splitn(3, |&b| b == 0);
    let name = String::from_utf8_lossy(parts.next().unwrap_or(&[])).into_owned();
    let value = String::from_utf8_lossy(parts.next().unwrap_or(&[])).into_owned();
    (name, value)
}

pub fn cstrings(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The values of a DataRow body (NULL as None).
/// The column names of a RowDescription body.
pub fn column_names(body: &[u8]) -> Vec<String> {
    let n = i16::from_be_bytes([body[0], body[1]]);
    let mut rest = &body[2..];
    let mut names = Vec::new();
    for _ in 0..n {
        let end = rest.iter().position(|&b| b == 0).expect("column name NUL");
        names.push(String::from_utf8_lossy(&rest[..end]).into_owned());
        // Table OID, attribute number, type OID, size, modifier, format.
        rest = &rest[end + 1 + 18..];
    }
    names
}

pub fn data_row(body: &[u8]) -> Vec<Option<String>> {
    let n = u16::from_be_bytes([body[0], body[1]]) as usize;
    let mut pos = 2;
    let mut row = Vec::with_capacity(n);
    for _ in 0..n {
        let len = i32::from_be_bytes(body[pos..pos + 4].try_into().unwrap());
        pos += 4;
        if len < 0 {
            row.push(None);
        } else {
            let len = len as usize;
            row.push(Some(
                String::from_utf8_lossy(&body[pos..pos + len]).into_owned(),
            ));
            pos += len;
        }
    }
    row
}
