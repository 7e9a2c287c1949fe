//! The running process's side: the control socket, and handing the
//! listening sockets to the process that asks.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use super::wire::{Conn, Message, HANDS_OVER_CLIENTS, OLDEST, VERSION};
use super::{bounded, control_path, TakeoverError};
use crate::config::Config;
use crate::listener::Handover;

/// The control socket, listening; its file is removed on drop unless a
/// new process has taken over (the path is that process's by then).
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
    aside: PathBuf,
    state: File,
}

/// Which name the socket file has, and whose it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum File {
    /// Bound under the temporary name.
    Aside,
    /// Renamed into place.
    Placed,
    /// A new process took over; the path is its own.
    HandedOver,
}

/// A new process accepts on the sockets and asks this one to stop.
pub struct Request {
    /// The new process.
    pub pid: u32,
    stopped: oneshot::Sender<()>,
}

impl Request {
    /// This process's accept loops are closed: let the new one know.
    pub fn stopped_accepting(self) {
        let _ = self.stopped.send(());
    }
}

impl ControlSocket {
    /// Binds the control socket for `config` under a temporary name, if
    /// the config has a socket directory; [`ControlSocket::place`] renames
    /// it into place once this process is the one serving, so the path
    /// answers throughout a takeover and a failed one leaves the old
    /// process reachable.
    pub fn bind(config: &Config) -> Result<Option<ControlSocket>, TakeoverError> {
        let Some(path) = control_path(config) else {
            return Ok(None);
        };
        let aside = path.with_extension(format!("takeover.{}", std::process::id()));
        let err = |source| TakeoverError::Bind {
            path: aside.clone(),
            source,
        };
        let _ = std::fs::remove_file(&aside);
        let listener = UnixListener::bind(&aside).map_err(err)?;
        let control = ControlSocket {
            listener,
            path: path.clone(),
            aside: aside.clone(),
            state: File::Aside,
        };
        std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        Ok(Some(control))
    }

    /// The socket file as bound (before [`ControlSocket::place`]).
    pub fn bound_path(&self) -> &Path {
        &self.aside
    }

    /// Renames the socket over the control path (atomically replacing the
    /// one of a process this one took over from).
    pub fn place(&mut self) -> Result<(), TakeoverError> {
        std::fs::rename(&self.aside, &self.path).map_err(|source| TakeoverError::Bind {
            path: self.path.clone(),
            source,
        })?;
        self.state = File::Placed;
        tracing::info!(path = %self.path.display(), "takeover control socket ready");
        Ok(())
    }

    /// Answers takeover requests until one succeeds: then `requests` gets
    /// it, and this returns once the new process heard that this one
    /// stopped accepting. A failed or malformed conversation is logged and
    /// changes nothing.
    ///
    /// While this process then drains, the new one passes on the
    /// CancelRequests it has no key for: they arrive on `cancels`. Returns
    /// a second handle on that connection, to hand clients over on.
    pub async fn serve(
        mut self,
        handover: Handover,
        requests: mpsc::Sender<Request>,
        cancels: mpsc::UnboundedSender<(i32, i32)>,
    ) -> Option<Conn> {
        let handover = Arc::new(handover);
        loop {
            let stream = match self.listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "control socket: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            match self.converse(stream, &handover, &requests).await {
                Ok((conn, version)) if version < HANDS_OVER_CLIENTS => {
                    tracing::info!(
                        version,
                        "takeover: the new process speaks an older version; clients drain here"
                    );
                    relay_cancels(conn, cancels);
                    return None;
                }
                Ok((mut conn, _)) => {
                    // The original writes the clients handed over, the
                    // reader takes the cancels.
                    match conn.reader() {
                        Ok(reader) => relay_cancels(reader, cancels),
                        Err(e) => {
                            tracing::warn!(error = %e, "takeover: clients cannot be handed over and cancels not passed on");
                            relay_cancels(conn, cancels);
                            return None;
                        }
                    }
                    return Some(conn);
                }
                // Past the handover this process stops whatever happens
                // (and its shutdown waits for this task).
                Err(e) if self.state == File::HandedOver => {
                    tracing::warn!(error = %e, "takeover: the new process went away after taking over");
                    return None;
                }
                Err(e) => tracing::warn!(error = %e, "takeover refused or failed; still serving"),
            }
        }
    }

    async fn converse(
        &mut self,
        stream: UnixStream,
        handover: &Arc<Handover>,
        requests: &mpsc::Sender<Request>,
    ) -> Result<(Conn, u32), TakeoverError> {
        let uid = stream.peer_cred().map_err(wire_io)?.uid();
        // SAFETY: geteuid cannot fail.
        let own = unsafe { libc::geteuid() };
        if uid != own && uid != 0 {
            return Err(TakeoverError::Stranger(uid));
        }
        let conn = bounded(stream.into_std().map_err(wire_io)?).map_err(wire_io)?;
        let offering = handover.clone();
        let (conn, pid, version) =
            tokio::task::spawn_blocking(move || offer(conn, &offering)).await??;
        tracing::info!(
            pid,
            version,
            "takeover: the new process accepts; this one stops accepting and drains"
        );
        handover.give_away();
        self.state = File::HandedOver;
        let (stopped, done) = oneshot::channel();
        if requests.send(Request { pid, stopped }).await.is_err() {
            return Ok((conn, version));
        }
        let _ = done.await;
        let mut conn = conn;
        tokio::task::spawn_blocking(move || {
            conn.send(
                &Message::Draining {
                    pid: std::process::id(),
                },
                &[],
            )
            .map(|()| (conn, version))
        })
        .await?
        .map_err(TakeoverError::from)
    }
}

/// The blocking part: hello, offer with the sockets, accepting. Returns
/// the new process's pid and the version both speak.
fn offer(mut conn: Conn, handover: &Handover) -> Result<(Conn, u32, u32), TakeoverError> {
    let agreed = match conn.recv_plain()? {
        Message::Hello { version } if (OLDEST..=VERSION).contains(&version) => version,
        Message::Hello { version } => {
            let reason = format!(
                "this process speaks takeover versions {OLDEST} to {VERSION}, the new one {version}"
            );
            conn.send(
                &Message::Refused {
                    version: VERSION,
                    reason: reason.clone(),
                },
                &[],
            )?;
            return Err(TakeoverError::Refused { version, reason });
        }
        other => return Err(TakeoverError::Unexpected(Box::new(other))),
    };
    let fds = handover.raw_fds();
    let offer = Message::Offer {
        version: agreed,
        sockets: fds.len(),
    };
    conn.send(&offer, &fds)?;
    match conn.recv_plain()? {
        Message::Accepting { pid } => Ok((conn, pid, agreed)),
        other => Err(TakeoverError::Unexpected(Box::new(other))),
    }
}

/// Reads the cancels the new process passes on, until it hangs up. On a
/// thread of its own rather than the runtime's blocking pool, whose
/// shutdown would wait for a read that has no end.
fn relay_cancels(mut conn: Conn, cancels: mpsc::UnboundedSender<(i32, i32)>) {
    if let Err(e) = conn.wait_indefinitely() {
        tracing::warn!(error = %e, "takeover: cannot keep the control connection for cancels");
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("takeover-cancels".into())
        .spawn(move || loop {
            match conn.recv_plain() {
                Ok(Message::Cancel { pid, secret }) => {
                    if cancels.send((pid, secret)).is_err() {
                        return;
                    }
                }
                Ok(other) => {
                    tracing::warn!(message = ?other, "takeover: unexpected control message while draining");
                    return;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "takeover: the new process closed the control connection");
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "takeover: cannot start the cancel relay");
    }
}

fn wire_io(e: std::io::Error) -> TakeoverError {
    TakeoverError::Wire(e.into())
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = match self.state {
            File::Aside => std::fs::remove_file(&self.aside),
            File::Placed => std::fs::remove_file(&self.path),
            File::HandedOver => Ok(()),
        };
    }
}
