//! The new process's side: take the listening sockets, then tell the old
//! process to stop accepting once this one does.

use std::os::unix::net::UnixStream;

use super::wire::{Conn, Message, HANDS_OVER_CLIENTS, OLDEST, VERSION};
use super::{bounded, control_path, TakeoverError};
use crate::config::Config;
use crate::service::activation::Inherited;

/// The sockets received, and the conversation still open to finish it.
pub struct Taken {
    conn: Conn,
    /// The takeover version both processes speak.
    version: u32,
    /// The listening sockets, for `Listeners::bind_with`.
    pub inherited: Inherited,
}

/// Asks the pooler running on `config` for its listening sockets, in this
/// binary's takeover version, or in an older one the running process
/// says it speaks (then its clients drain there instead of moving).
pub async fn take(config: &Config) -> Result<Taken, TakeoverError> {
    let path = control_path(config).ok_or(TakeoverError::NoSocketDir)?;
    tokio::task::spawn_blocking(move || match ask(&path, VERSION) {
        Err(TakeoverError::Refused { version, .. }) if (OLDEST..VERSION).contains(&version) => {
            tracing::info!(
                version,
                "takeover: the running pgharbor speaks an older version; its clients will drain there"
            );
            ask(&path, version)
        }
        other => other,
    })
    .await?
}

/// One takeover conversation up to the offer, in `version`.
fn ask(path: &std::path::Path, version: u32) -> Result<Taken, TakeoverError> {
    let not_running = |source| TakeoverError::NotRunning {
        path: path.to_path_buf(),
        source,
    };
    let stream = UnixStream::connect(path).map_err(not_running)?;
    let mut conn = bounded(stream).map_err(not_running)?;
    conn.send(&Message::Hello { version }, &[])?;
    match conn.recv()? {
        (Message::Offer { sockets, .. }, fds) if fds.len() == sockets => {
            tracing::info!(path = %path.display(), sockets, "takeover: received the listening sockets");
            let inherited = Inherited::from_fds(fds)?;
            Ok(Taken {
                conn,
                version,
                inherited,
            })
        }
        (Message::Offer { sockets, .. }, fds) => Err(super::wire::WireError::Descriptors {
            got: fds.len(),
            want: sockets,
        }
        .into()),
        (Message::Refused { version, reason }, _) => {
            Err(TakeoverError::Refused { version, reason })
        }
        (other, _) => Err(TakeoverError::Unexpected(Box::new(other))),
    }
}

impl Taken {
    /// This process accepts now: the old one stops and drains. Returns its
    /// pid, where to send the cancels this process has no key for, and a
    /// handle on the connection to read the clients it hands over
    /// ([`super::receive`]; None when it speaks a version that does not).
    pub async fn accepting(self) -> Result<(u32, CancelForwarder, Option<Conn>), TakeoverError> {
        let mut conn = self.conn;
        let moves_clients = self.version >= HANDS_OVER_CLIENTS;
        tokio::task::spawn_blocking(move || {
            conn.send(
                &Message::Accepting {
                    pid: std::process::id(),
                },
                &[],
            )?;
            match conn.recv_plain()? {
                Message::Draining { pid } => {
                    let arrivals = match moves_clients {
                        true => Some(conn.reader()?),
                        false => None,
                    };
                    Ok((pid, CancelForwarder::start(conn)?, arrivals))
                }
                other => Err(TakeoverError::Unexpected(Box::new(other))),
            }
        })
        .await?
    }
}

/// Passes cancel keys on to the draining old process, over the control
/// connection, from a thread of its own (a write may block briefly).
pub struct CancelForwarder(std::sync::mpsc::Sender<(i32, i32)>);

impl CancelForwarder {
    fn start(mut conn: Conn) -> Result<CancelForwarder, TakeoverError> {
        let (tx, rx) = std::sync::mpsc::channel::<(i32, i32)>();
        std::thread::Builder::new()
            .name("takeover-cancels".into())
            .spawn(move || {
                for (pid, secret) in rx {
                    if let Err(e) = conn.send(&Message::Cancel { pid, secret }, &[]) {
                        tracing::debug!(error = %e, "takeover: the old process is gone; cancels stay here");
                        return;
                    }
                }
            })
            .map_err(|e| TakeoverError::Wire(e.into()))?;
        Ok(CancelForwarder(tx))
    }

    /// Passes one key on; false once the old process is gone.
    pub fn forward(&self, pid: i32, secret: i32) -> bool {
        self.0.send((pid, secret)).is_ok()
    }
}
