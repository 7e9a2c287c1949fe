//! Restart without refusing a connection (`pgharbor --takeover`).
//!
//! A running pgharbor listens on a control socket beside its client socket,
//! `<listen.unix_socket_dir>/.s.PGSQL.<listen.port>.takeover` (mode 0600,
//! only its own user or root may connect). A new process started with
//! `--takeover` and the same config:
//!
//! 1. connects and says `hello` with its protocol version;
//! 2. receives an `offer` with every listening socket attached (SCM_RIGHTS),
//!    or `refused` (another version; nothing changed hands);
//! 3. takes the sockets as its listeners, starts accepting on them, and
//!    puts its own control socket in place (bound aside, then renamed over
//!    the old path, so the path always answers);
//! 4. says `accepting`; the old process closes its accept loops, answers
//!    `draining`, and from there on is in its safe shutdown: its sessions
//!    end by themselves within `pool.shutdown_timeout`, then it exits.
//!
//! 5. hands each of its idle transaction-pooling clients (plain sockets,
//!    between transactions, not pinned) over on the same connection: its
//!    socket and its session ([`moved::MovedClient`]); a client busy in a
//!    transaction follows when it is next idle. Once the last client is
//!    gone or handed over, the old process exits.
//!
//! The conversation then stays open while the old process drains: a
//! CancelRequest reaches whichever process accepts it, which after step 4
//! is the new one, so the new one passes each key it does not know on to
//! the old one (`cancel`), which may have the client it belongs to.
//!
//! Both processes hold the same listening sockets during the overlap, so a
//! connection waiting in the backlog is accepted by whichever is first,
//! and none is refused. The old process leaves the Unix socket file and the
//! control socket file in place (they are the new process's now), and a
//! pidfile that names the new process.
//!
//! It lives above `listener`, `service` and `config`, which it wires
//! together; nothing below it knows a takeover exists.

mod handoff;
pub mod moved;
mod offer;
mod take;
pub mod wire;

use std::path::PathBuf;

use crate::config::Config;

pub use handoff::{receive, HandoffError, Outbox};
pub use offer::{ControlSocket, Request};
pub use take::{take, CancelForwarder, Taken};

/// Why a takeover (either side) failed.
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    /// The config has no Unix socket directory, so no control socket.
    #[error("takeover needs listen.unix_socket_dir: the control socket lives there")]
    NoSocketDir,
    /// Nothing answers on the control socket.
    #[error("no running pgharbor answers on {path}: {source}; start without --takeover")]
    NotRunning {
        /// The control socket.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The running process said no.
    #[error(
        "the running pgharbor (takeover version {version}) refused: {reason}; it keeps running"
    )]
    Refused {
        /// Its protocol version.
        version: u32,
        /// Its reason.
        reason: String,
    },
    /// A peer of another user tried to take the sockets.
    #[error("refused a takeover from uid {0}: only this process's user or root may take over")]
    Stranger(u32),
    /// A message that is well-formed but out of turn.
    #[error("unexpected control message: {0:?}")]
    Unexpected(Box<wire::Message>),
    /// The conversation broke.
    #[error("{0}")]
    Wire(#[from] wire::WireError),
    /// The received sockets do not fit the config.
    #[error("{0}")]
    Sockets(#[from] crate::service::activation::ActivationError),
    /// Creating the control socket failed.
    #[error("control socket {path}: {source}")]
    Bind {
        /// The control socket.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A blocking step could not run.
    #[error("takeover task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Where the control socket of `config`'s pooler lives, if it has one.
pub fn control_path(config: &Config) -> Option<PathBuf> {
    let dir = config.listen.unix_socket_dir.as_ref()?;
    Some(dir.join(format!(".s.PGSQL.{}.takeover", config.listen.port)))
}

/// How long either side waits for the other's next message.
const STEP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Blocking stream with both timeouts set to [`STEP_TIMEOUT`].
fn bounded(stream: std::os::unix::net::UnixStream) -> std::io::Result<wire::Conn> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(STEP_TIMEOUT))?;
    stream.set_write_timeout(Some(STEP_TIMEOUT))?;
    Ok(wire::Conn::new(stream))
}
