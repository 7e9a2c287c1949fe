//! A CancelRequest: a key of ours goes to the backend it points at, a key
//! of another fleet instance goes to that instance, as the same raw
//! CancelRequest (see `registry::fleet` for how a key says whose it is).
//!
//! As PostgreSQL, nothing is ever answered: the connection is closed once
//! the cancel has gone as far as it can, so a client that waits for the
//! close (libpq does) knows the signal was sent before its next query.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use crate::backend::{request_and_wait_close, send_cancel, CANCEL_CONFIRM_LIMIT};
use crate::config::{BackendHost, InstanceId, Peer};
use crate::pooler::Pooler;
use crate::registry::fleet::Route;
use crate::stream::{Socket, Stream};

/// How long a peer may take to close a forwarded cancel's connection: its
/// own wait for PostgreSQL, and a little more.
const PEER_CLOSE_LIMIT: Duration = CANCEL_CONFIRM_LIMIT.saturating_add(Duration::from_secs(1));

/// Serves one CancelRequest; unknown keys are dropped silently, as
/// PostgreSQL does, and keys of instances [peers] lacks with a log line.
pub(super) async fn serve(pooler: &Pooler, pid: i32, secret: i32) {
    match pooler.cancels.route(secret) {
        Route::Local(secret) => cancel_local(pooler, pid, secret).await,
        Route::Forward { to, secret } => {
            // Read at each request: a RELOAD changes [peers] at once.
            let snapshot = pooler.snapshot();
            match snapshot.config.peers.get(&to) {
                Some(peer) => forward_to_peer(to, peer, pid, secret).await,
                None => tracing::info!(
                    instance = %to,
                    "cancel request for an instance [peers] does not list dropped"
                ),
            }
        }
        Route::Exhausted(to) => tracing::warn!(
            instance = %to,
            "cancel request dropped: it was forwarded too often (do the fleet's [peers] tables agree?)"
        ),
        // As any unknown key: probes send such keys, and PostgreSQL does not log them either.
        Route::Unowned => {
            tracing::debug!("cancel request with a key of no instance (id 0) dropped")
        }
    }
}

/// Forwards a cancel for a live key of ours to its backend.
async fn cancel_local(pooler: &Pooler, pid: i32, secret: i32) {
    match pooler.cancels.lookup(pid, secret) {
        Some((target, in_flight)) => {
            tracing::info!(backend_pid = target.pid, "forwarding cancel request");
            match send_cancel(&target).await {
                Ok(()) => in_flight.confirm(),
                // Unconfirmed: the backend is closed rather than handed on.
                Err(e) => tracing::warn!(error = %e, "cancel request not confirmed by the server"),
            }
        }
        // After a takeover, a key of a client still draining on the old
        // process is passed to it.
        None => match pooler.cancel_elsewhere.get() {
            Some(pass_on) if pass_on(pid, secret) => tracing::debug!(
                "cancel request with a key unknown here passed to the process this one took over from"
            ),
            _ => tracing::debug!("cancel request with an unknown key ignored"),
        },
    }
}

/// Sends the CancelRequest on to instance `to`; a peer that is down or slow
/// costs this connection its timeouts, never more.
async fn forward_to_peer(to: InstanceId, peer: &Peer, pid: i32, secret: i32) {
    let address = peer.host.describe();
    tracing::info!(instance = %to, peer = %address, "forwarding cancel request to a peer");
    let connect = async {
        Ok::<_, io::Error>(match &peer.host.host {
            BackendHost::Tcp(host) => {
                let s = TcpStream::connect((host.as_str(), peer.host.port)).await?;
                Stream::Tcp(Socket::from_tcp(s)?)
            }
            // Invariant: a Unix host always has a socket path.
            BackendHost::Unix(_) => {
                let path = peer.host.socket_path().unwrap_or_default();
                Stream::Unix(Socket::from_unix(UnixStream::connect(path).await?)?)
            }
        })
    };
    let sent = match tokio::time::timeout(peer.connect_timeout, connect).await {
        Ok(Ok(s)) => relay(s, pid, secret).await,
        Ok(Err(e)) => Err(e),
        Err(_) => Err(timed_out("connecting took longer than its connect_timeout")),
    };
    if let Err(e) = sent {
        tracing::warn!(instance = %to, peer = %address, error = %e, "could not forward cancel request to the peer");
    }
}

/// Writes the request and waits for the peer to close, as it does once it
/// has sent the cancel on itself.
async fn relay<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    pid: i32,
    secret: i32,
) -> io::Result<()> {
    let exchange = request_and_wait_close(&mut stream, pid, secret);
    tokio::time::timeout(PEER_CLOSE_LIMIT, exchange)
        .await
        .unwrap_or_else(|_| Err(timed_out("the peer did not close the connection in time")))
}

fn timed_out(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, why.to_string())
}
