//! One connection to PostgreSQL: open it, authenticate, and keep what the
//! pooler must know about it (its ParameterStatus set, its cancel key, its
//! transaction status) while it is handed from client to client.

mod cancel;
mod error;
mod handoff;
mod ledger;
mod login;
mod lookup;
pub mod owed;
mod params;
pub mod prepared;
mod role;
mod route;
mod session;
mod status;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpStream, UnixStream};

use crate::auth::ScramCredential;
use crate::config::{BackendHost, TcpOptions};
use bytes::BytesMut;

use crate::listener::Transport;
use crate::protocol::scan::Scanner;
use crate::protocol::FrameBuf;
use crate::stats::{BackendConnect, Class};
use crate::stream::{Socket, Stream};

pub use cancel::{request_and_wait_close, send_cancel, CANCEL_CONFIRM_LIMIT};
pub use error::{BackendError, PoolerStatement, ServerError};
pub use handoff::{CancelGate, CancelInFlight, Departure, HandOff, LinkState};
pub use ledger::{Ledger, TxStatus, UnnamedKey};
pub use lookup::Row;
pub use params::{push_set_config, Applied, AppliedSet, ParamSet};
pub use role::{still_fits, Flag, ServerRole};
pub use route::{Host, HostRoute};
pub use session::{parse_error_fields, ResetQuery};
pub use status::{LinkStatus, ServerInfo, ServerState};

/// Initial server-to-client relay buffer of each backend; it grows to
/// [`MAX_INSPECTED`] while data streams. Large reads keep
/// bulk transfers from being capped by the relay (seeds/002: a small window caps
/// throughput no matter how fast the link).
pub const RELAY_BUF: usize = 32 * 1024;
/// `pool.server_command_timeout`'s default, until the pool sets its own.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest server message the pooler reads whole (ParameterStatus, errors, auth).
pub const MAX_INSPECTED: usize = 1 << 20;

/// Where and as whom to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendTarget {
    /// Host or socket directory.
    pub host: BackendHost,
    /// Port (also the socket file's number).
    pub port: u16,
    /// Database name sent in the startup packet.
    pub dbname: String,
    /// Role name sent in the startup packet.
    pub user: String,
    /// Keepalive and user timeout of a TCP connection (libpq's keywords).
    pub tcp: TcpOptions,
}

impl BackendTarget {
    /// Human-readable address for errors and logs.
    pub fn describe(&self) -> String {
        match &self.host {
            BackendHost::Tcp(h) => format!("{h}:{}", self.port),
            BackendHost::Unix(_) => self.socket_path().display().to_string(),
        }
    }

    fn socket_path(&self) -> PathBuf {
        match &self.host {
            BackendHost::Unix(d) => d.join(format!(".s.PGSQL.{}", self.port)),
            BackendHost::Tcp(_) => PathBuf::new(),
        }
    }

    /// The transport class this target is expected to use (refined by the
    /// real peer address once connected).
    pub fn transport(&self) -> Transport {
        match &self.host {
            BackendHost::Unix(_) => Transport::Unix,
            BackendHost::Tcp(h) => match h.parse::<std::net::IpAddr>() {
                Ok(ip) => Transport::for_tcp_peer(&std::net::SocketAddr::new(ip, self.port)),
                Err(_) if h == "localhost" => Transport::LoopbackTcp,
                Err(_) => Transport::RemoteTcp,
            },
        }
    }

    /// Opens a plain socket to the server.
    pub async fn open(&self) -> std::io::Result<Stream> {
        match &self.host {
            BackendHost::Tcp(h) => {
                let s = TcpStream::connect((h.as_str(), self.port)).await?;
                s.set_nodelay(true)?;
                // As libpq: before the first byte, so even the login is covered.
                crate::sockopt::apply(&s, &self.tcp)?;
                Ok(Stream::Tcp(Socket::from_tcp(s)?))
            }
            BackendHost::Unix(_) => {
                let s = UnixStream::connect(self.socket_path()).await?;
                Ok(Stream::Unix(Socket::from_unix(s)?))
            }
        }
    }
}

/// What the pooler can prove to PostgreSQL for one role. Never logged.
#[derive(Clone, Default)]
pub struct Credentials {
    /// A plain password (from the conninfo or the auth file).
    pub password: Option<String>,
    /// An md5 hash (`md5...`) from the auth file.
    pub md5_hash: Option<String>,
    /// Keys recovered from a client's SCRAM proof ([`ScramCredential::passthrough`]).
    pub scram: Option<ScramCredential>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("md5_hash", &self.md5_hash.as_ref().map(|_| "<redacted>"))
            .field("scram", &self.scram.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Cancel key and address of one backend.
#[derive(Debug, Clone)]
pub struct CancelTarget {
    /// Where the backend is.
    pub target: Arc<BackendTarget>,
    /// Its real process id.
    pub pid: i32,
    /// Its real secret key.
    pub secret: i32,
    /// Cancels on their way to this backend (see [`CancelGate`]).
    pub gate: Arc<CancelGate>,
}

/// Time spent establishing one backend, for the overhead report.
#[derive(Debug, Clone, Copy, Default)]
pub struct BackendTimings {
    /// Socket connect.
    pub connect: Duration,
    /// SSL negotiation and TLS handshake (zero without TLS).
    pub tls: Duration,
    /// Authentication exchange.
    pub auth: Duration,
    /// From AuthenticationOk to the first ReadyForQuery.
    pub ready: Duration,
}

/// Hands out the ids of one pooler's backends: 1, 2, ... (0 stands for
/// "no backend" where an id is kept in an atomic).
#[derive(Debug, Default)]
pub struct BackendIds(AtomicU64);

impl BackendIds {
    /// The next id.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The last id handed out (0 before the first).
    pub fn last(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The one owner of one authenticated connection to PostgreSQL: its socket
/// and read buffer, and its [`Ledger`] (what it owes, its transaction
/// status, prepared statements and parameters). Every pool mode relays
/// through it, and [`Link::hand_off`] alone decides what becomes of it when
/// a client is done with it.
pub struct Link {
    id: u64,
    transport: Transport,
    stream: Stream,
    /// Server-to-client buffer; belongs to the link so it is reused across clients.
    buf: FrameBuf,
    /// Message boundaries of what the server sends.
    scanner: Scanner,
    /// Shared with the cancel slot of the client holding the link: a
    /// transaction's attach is one reference count, and an idle client's
    /// slot holds a pointer, not a copy.
    cancel: Arc<CancelTarget>,
    opened_at: Instant,
    timings: BackendTimings,
    /// What SHOW and the metrics read; written only by this link.
    status: Arc<LinkStatus>,
    /// Statements the pooler queued to go out ahead of the next client bytes.
    queued: BytesMut,
    /// When `queued` holds only settings the client may never need, what
    /// taking them back restores.
    withdrawable: Option<session::Withdrawable>,
    /// The startup packet carried a client's application_name (a pool hint),
    /// so a client that sends none must be given `''` explicitly.
    hinted_app_name: bool,
    /// Bound on each of the pooler's own statements (`server_command_timeout`).
    command_timeout: Duration,
    /// What the server was found to be at login (see [`Link::role`]).
    login_role: ServerRole,
    ledger: Ledger,
}

/// The parts of a link the relay drives, borrowed at once.
pub struct RelayParts<'a> {
    /// The socket.
    pub stream: &'a mut Stream,
    /// What the server sent and the relay has not forwarded yet.
    pub buf: &'a mut FrameBuf,
    /// Where the server's messages start.
    pub scanner: &'a mut Scanner,
    /// Statements the pooler queued ahead of the client's next bytes.
    pub queued: &'a mut BytesMut,
    /// The protocol state.
    pub ledger: &'a mut Ledger,
}

impl Link {
    fn new(stream: Stream, cancel: CancelTarget, id: u64) -> Link {
        let transport = match &stream {
            Stream::Tcp(s) => s
                .sock_ref()
                .peer_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .map_or(cancel.target.transport(), |a| Transport::for_tcp_peer(&a)),
            _ => cancel.target.transport(),
        };
        Link {
            id,
            status: Arc::new(LinkStatus::new(id, 0, transport, None)),
            transport,
            stream,
            buf: FrameBuf::new(RELAY_BUF, RELAY_BUF.max(MAX_INSPECTED)),
            scanner: Scanner::new(),
            cancel: Arc::new(cancel),
            opened_at: Instant::now(),
            timings: BackendTimings::default(),
            queued: BytesMut::new(),
            withdrawable: None,
            hinted_app_name: false,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            login_role: ServerRole::UNKNOWN,
            ledger: Ledger::new(200),
        }
    }

    /// Pooler-wide id for logs and SHOW SERVERS.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How the backend is reached (socket, loopback or remote TCP).
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// True when the connection is under TLS.
    pub fn is_tls(&self) -> bool {
        self.stream.is_tls()
    }

    /// The real cancel key and address.
    pub fn cancel(&self) -> &Arc<CancelTarget> {
        &self.cancel
    }

    /// The host this backend is on.
    pub fn target(&self) -> &Arc<BackendTarget> {
        &self.cancel.target
    }

    /// What its server is now: the `in_hot_standby` and
    /// `default_transaction_read_only` it last reported (PostgreSQL 14 and
    /// later report both whenever they change, e.g. on promotion), else
    /// what the login check found.
    pub fn role(&self) -> ServerRole {
        ServerRole::from_params(self.ledger.params()).or(self.login_role)
    }

    /// When it was opened.
    pub fn opened_at(&self) -> Instant {
        self.opened_at
    }

    /// Client sessions served so far.
    pub fn clients_served(&self) -> u64 {
        self.status.served()
    }

    /// What the link publishes about itself.
    pub fn status(&self) -> &Arc<LinkStatus> {
        &self.status
    }

    /// Lent to client `client`.
    pub fn lent_to(&self, client: u64) {
        self.status.set(ServerState::Active, Some(client));
    }

    /// A client is done with it; it is being drained or reset.
    pub fn settling(&self) {
        self.status.set(ServerState::Resetting, None);
    }

    /// Back in the pool, clean.
    pub fn pooled(&self) {
        self.status.set(ServerState::Idle, None);
    }

    /// The startup packet carried a client's application_name.
    pub fn hinted_app_name(&self) -> bool {
        self.hinted_app_name
    }

    /// Records that the startup packet carried a client's application_name.
    pub fn set_hinted_app_name(&mut self, hinted: bool) {
        self.hinted_app_name = hinted;
    }

    /// Bound on each statement the pooler sends on its own behalf.
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// Sets [`Link::command_timeout`] (the pool's `server_command_timeout`).
    pub fn set_command_timeout(&mut self, timeout: Duration) {
        self.command_timeout = timeout;
    }

    /// The protocol state.
    pub fn ledger(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    /// The protocol state, read-only.
    pub fn ledger_ref(&self) -> &Ledger {
        &self.ledger
    }

    /// Everything the relay drives, borrowed at once.
    pub fn relay_parts(&mut self) -> RelayParts<'_> {
        RelayParts {
            stream: &mut self.stream,
            buf: &mut self.buf,
            scanner: &mut self.scanner,
            queued: &mut self.queued,
            ledger: &mut self.ledger,
        }
    }

    /// The socket, for the pool's idle checks.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// True when server bytes were read and not yet accounted for.
    pub fn has_unread(&self) -> bool {
        !self.buf.is_empty() || !self.scanner.at_boundary()
    }

    /// The overhead-report class of this backend.
    pub fn class(&self) -> Class {
        Class::backend(self.transport, self.stream.is_tls())
    }

    /// Establishment phases for the overhead report.
    pub fn connect_phases(&self) -> BackendConnect {
        let t = &self.timings;
        let us = |d: Duration| d.as_micros() as u64;
        BackendConnect {
            phases_us: [
                us(t.connect),
                us(t.tls),
                us(t.auth),
                us(t.ready),
                us(t.connect + t.tls + t.auth + t.ready),
            ],
        }
    }

    /// Value of a reported parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.ledger.params().get(name)
    }
}
