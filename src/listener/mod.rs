//! Binds the TCP and Unix sockets, classifies each peer ([`Transport`]), and
//! hands each accepted connection to a [`Serve`]r. The listener knows nothing
//! of what a session does: the composition root gives it `client`'s server,
//! so every module can name the peer class without a cycle. Behind a load
//! balancer, [`proxy`] reads the PROXY header that names the real peer.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, TcpOptions};
use crate::service::activation::Inherited;
use crate::stream::{Accepted, EarlyReads};

mod accept;
mod handover;
pub mod proxy;
mod transport;

use accept::Listening;
pub use handover::Handover;
pub use transport::Transport;

/// Facts about one accepted connection, known before any byte is read.
#[derive(Debug, Clone)]
pub struct ConnContext {
    /// Pooler-wide connection id.
    pub id: u64,
    /// How the client reached us.
    pub transport: Transport,
    /// Who is at the other end; behind a trusted load balancer, the
    /// client its PROXY header names.
    pub peer: PeerAddr,
    /// The load balancer's address when a PROXY header replaced `peer`.
    pub via: Option<PeerAddr>,
    /// When the socket was accepted.
    pub accepted_at: Instant,
}

impl ConnContext {
    /// The TCP peer's IP address (what hba `host` lines match); `None` on
    /// the Unix socket.
    pub fn peer_ip(&self) -> Option<std::net::IpAddr> {
        match &self.peer {
            PeerAddr::Tcp(addr) => Some(addr.ip()),
            PeerAddr::Path(_) => None,
        }
    }
}

/// Who is at the other end of an accepted connection, kept as accepted:
/// it is formatted only when shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerAddr {
    /// A TCP client's address.
    Tcp(std::net::SocketAddr),
    /// A Unix-socket client, named by the socket's path: one string that
    /// every client of the listener shares.
    Path(Arc<str>),
}

impl std::fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerAddr::Tcp(addr) => addr.fmt(f),
            PeerAddr::Path(path) => f.write_str(path),
        }
    }
}

/// Whoever serves the accepted connections.
pub trait Serve: Send + Sync + 'static {
    /// TCP options for the next accepted client; asked per accept, so a
    /// RELOAD reaches the next client.
    fn tcp_options(&self) -> TcpOptions;
    /// A fresh connection id; the server owns the counter, so ids stay
    /// unique with clients that arrive another way (a takeover's).
    fn next_id(&self) -> u64;
    /// Takes one accepted connection (and must not block the accept loop);
    /// `early` is the listener's, for reading it before it is registered.
    fn serve(&self, conn: Accepted, ctx: ConnContext, early: &mut EarlyReads);
}

/// Why the listeners could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Binding a TCP address failed.
    #[error("could not listen on {addr}: {source}")]
    Tcp {
        /// Address.
        addr: String,
        /// Cause.
        source: io::Error,
    },
    /// The socket file belongs to a live server.
    #[error("another server is already listening on {0}; is another pgharbor or PostgreSQL running on this port?")]
    SocketInUse(PathBuf),
    /// The socket file belongs to a live server, and this is a fleet instance.
    #[error("another server is already listening on {}: with listen.reuseport every instance needs its own listen.unix_socket_dir (or \"\" to turn the Unix socket off), and instance {id} shares one", path.display())]
    SocketShared {
        /// Path.
        path: PathBuf,
        /// This instance's id.
        id: crate::config::InstanceId,
    },
    /// Creating the socket failed.
    #[error("could not create Unix socket {path}: {source}")]
    Unix {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: io::Error,
    },
    /// Nothing to listen on.
    #[error("no listen addresses and no Unix socket directory: nothing to accept clients on")]
    Nothing,
}

/// Bound sockets; the Unix socket file is removed when this is dropped,
/// unless the socket was inherited: then the service manager that made the
/// file owns it and will accept on it again for the next start. A socket
/// handed to a new process by takeover is that process's to remove.
pub struct Listeners {
    tcp: Vec<TcpListener>,
    unix: Option<(UnixListener, PathBuf)>,
    unix_path: Option<PathBuf>,
    unix_inherited: bool,
    given_away: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Listeners {
    fn drop(&mut self) {
        if self.unix_inherited || self.given_away.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let path = self
            .unix
            .as_ref()
            .map(|(_, p)| p)
            .or(self.unix_path.as_ref());
        if let Some(path) = path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `<dir>/.s.PGSQL.<port>`, as PostgreSQL names it.
pub fn socket_path(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!(".s.PGSQL.{port}"))
}

impl Listeners {
    /// Binds everything the config asks for.
    pub async fn bind(config: &Config) -> Result<Listeners, ListenError> {
        Listeners::bind_with(config, &mut Inherited::default()).await
    }

    /// Like [`Listeners::bind`], but takes each configured address from
    /// `inherited` (socket activation) when it is there instead of binding it.
    pub async fn bind_with(
        config: &Config,
        inherited: &mut Inherited,
    ) -> Result<Listeners, ListenError> {
        let mut tcp = Vec::new();
        for ip in &config.listen.addresses {
            let addr = std::net::SocketAddr::new(*ip, config.listen.port);
            let tcp_err = |source| ListenError::Tcp {
                addr: addr.to_string(),
                source,
            };
            let sock = match inherited.take_tcp(addr) {
                Some(l) => TcpListener::from_std(l).map_err(tcp_err)?,
                None => bind_tcp(addr, config.listen.reuseport).map_err(tcp_err)?,
            };
            // Inherited ones too: a takeover's listeners get this process's setting.
            crate::sockopt::set_defer_accept(&sock, config.listen.tcp_defer_accept)
                .map_err(tcp_err)?;
            tcp.push(sock);
        }
        let mut unix_inherited = false;
        let unix = match &config.listen.unix_socket_dir {
            Some(dir) => {
                let path = socket_path(dir, config.listen.port);
                let l = match inherited.take_unix(&path) {
                    Some(l) => {
                        unix_inherited = true;
                        UnixListener::from_std(l).map_err(|source| ListenError::Unix {
                            path: path.clone(),
                            source,
                        })?
                    }
                    None => bind_unix(&path, config.listen.unix_socket_mode)
                        .await
                        .map_err(|e| in_fleet(e, config))?,
                };
                Some((l, path))
            }
            None => None,
        };
        if tcp.is_empty() && unix.is_none() {
            return Err(ListenError::Nothing);
        }
        Ok(Listeners {
            tcp,
            unix,
            unix_path: None,
            unix_inherited,
            given_away: Arc::default(),
        })
    }

    /// The Unix socket file pgharbor created (not an inherited one), if any.
    pub fn own_socket_file(&self) -> Option<&Path> {
        match &self.unix {
            Some((_, path)) if !self.unix_inherited => Some(path),
            _ => None,
        }
    }

    /// Accepts for `server` until `stop` fires, then closes the sockets.
    pub async fn serve(mut self, stop: CancellationToken, server: Arc<dyn Serve>) {
        let mut accepting = tokio::task::JoinSet::new();
        for l in self.tcp.drain(..) {
            let l = match l.into_std().and_then(|l| Listening::new(l.into())) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "cannot accept on a TCP listener");
                    continue;
                }
            };
            if let Some(a) = l.local_tcp_addr() {
                tracing::info!(address = %a, "listening on TCP");
            }
            accepting.spawn(accept_tcp(l, server.clone()));
        }
        if let Some((l, path)) = self.unix.take() {
            self.unix_path = Some(path.clone());
            match l.into_std().and_then(|l| Listening::new(l.into())) {
                Ok(l) => {
                    tracing::info!(path = %path.display(), "listening on Unix socket");
                    accepting.spawn(accept_unix(l, path, server.clone()));
                }
                Err(e) => tracing::error!(error = %e, "cannot accept on the Unix socket"),
            }
        }
        stop.cancelled().await;
        accepting.shutdown().await;
    }
}

/// A socket file in use is, in a fleet, most likely a sibling instance's:
/// say what to change.
fn in_fleet(e: ListenError, config: &Config) -> ListenError {
    match (e, config.listen.instance_id) {
        (ListenError::SocketInUse(path), Some(id)) if config.listen.reuseport => {
            ListenError::SocketShared { path, id }
        }
        (e, _) => e,
    }
}

fn bind_tcp(addr: std::net::SocketAddr, reuseport: bool) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    if reuseport {
        // A fleet: every instance binds the same address and port, and the
        // kernel spreads new connections over them. A Unix socket has no
        // such sharing, hence one socket directory per instance.
        sock.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        // So that "*" can bind 0.0.0.0 and :: on the same port side by side.
        sock.set_only_v6(true)?;
    }
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(1024)?;
    TcpListener::from_std(sock.into())
}

/// Binds the socket file, replacing a stale one left by a crashed run but
/// refusing to steal one a live server answers on.
async fn bind_unix(path: &Path, mode: u32) -> Result<UnixListener, ListenError> {
    if path.exists() {
        match UnixStream::connect(path).await {
            Ok(_) => return Err(ListenError::SocketInUse(path.to_path_buf())),
            Err(_) => {
                tracing::info!(path = %path.display(), "removing stale socket file");
                std::fs::remove_file(path).map_err(|source| ListenError::Unix {
                    path: path.to_path_buf(),
                    source,
                })?;
            }
        }
    }
    let err = |source| ListenError::Unix {
        path: path.to_path_buf(),
        source,
    };
    let l = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)?;
    Ok(l)
}

async fn accept_tcp(l: Listening, server: Arc<dyn Serve>) {
    // What every accepted socket carries from the listening one. A socket
    // accepted after a RELOAD changed the options gets them itself, as does
    // one that was waiting before they were set on the listener.
    let inherited = crate::sockopt::set_on_listener(&l, &server.tcp_options());
    let mut early = EarlyReads::default();
    loop {
        match l.accept().await {
            Ok((fd, peer)) => {
                let Some(peer) = peer.as_socket() else {
                    continue;
                };
                let conn = Accepted::tcp(fd);
                let opts = server.tcp_options();
                if inherited != Some(opts) || !l.drained() {
                    let _ = socket2::SockRef::from(&conn).set_nodelay(true);
                    if let Err(e) = crate::sockopt::apply(&conn, &opts) {
                        tracing::warn!(peer = %peer, error = %e, "cannot set TCP keepalive options");
                    }
                }
                let ctx = ConnContext {
                    id: server.next_id(),
                    transport: Transport::for_tcp_peer(&peer),
                    peer: PeerAddr::Tcp(peer),
                    via: None,
                    accepted_at: Instant::now(),
                };
                server.serve(conn, ctx, &mut early);
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

async fn accept_unix(l: Listening, path: PathBuf, server: Arc<dyn Serve>) {
    let name: Arc<str> = Arc::from(path.display().to_string());
    let mut early = EarlyReads::default();
    loop {
        match l.accept().await {
            Ok((fd, _)) => {
                let ctx = ConnContext {
                    id: server.next_id(),
                    transport: Transport::Unix,
                    peer: PeerAddr::Path(name.clone()),
                    via: None,
                    accepted_at: Instant::now(),
                };
                server.serve(Accepted::unix(fd), ctx, &mut early);
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

/// Running out of file descriptors must not spin the accept loop.
async fn accept_failed(e: io::Error) {
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

#[cfg(test)]
mod tests;
