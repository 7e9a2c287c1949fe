//! A client the old process of a takeover handed over: its socket and
//! its session between transactions, served from here on as if it had
//! just finished a transaction on this process.
//!
//! Whatever the new config no longer allows it (its database or user
//! gone, session pooling now, no client slot) ends it with a FATAL that
//! says so, rather than serving it under rules it never logged in under.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::session::Session;
use super::txn::moving::{self, Carried};
use super::txn::statements::ClientStatements;
use super::{farewell, ClientError, CLIENT_BUF, CLIENT_RELAY_CAP};
use crate::config::PoolMode;
use crate::listener::Transport;
use crate::pooler::Pooler;
use crate::protocol::{FrameBuf, PgError, MAX_STARTUP_PACKET};
use crate::registry::{ClientInfo, ClientState};
use crate::stream::{Socket, Stream};
use crate::takeover::moved::MovedClient;

/// Serves one handed-over client to the end.
pub fn adopt(
    pooler: Arc<Pooler>,
    moved: MovedClient,
    fd: OwnedFd,
) -> impl std::future::Future<Output = ()> {
    let id = pooler.next_client_id();
    let transport = moved.transport;
    let span = tracing::info_span!(
        "client",
        id,
        transport = %transport,
        peer = %moved.peer,
        from = moved.old_id,
        tls = false,
        user = %moved.user,
    );
    // Not an async fn, and the handed-over state boxed until the session
    // is restored from it: as a logged-in client's (see client::serve),
    // the task of an idle handed-over client should be one 256-byte step,
    // not a kilobyte carrying two copies of what it arrived with.
    let moved = Box::new(moved);
    let served = async move {
        let mut stream = match socket(fd, transport) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "handed-over client's socket is not what it claims; closed");
                return;
            }
        };
        let cap = CLIENT_RELAY_CAP.max(MAX_STARTUP_PACKET);
        let mut buf = FrameBuf::with_stash(CLIENT_BUF, cap, pooler.buffers.clone());
        // Taken out of its box here, so the box is freed now.
        let moved = {
            let boxed = moved;
            *boxed
        };
        // The restored session is moved into the boxed relay before the
        // await: a match around the await would keep its room.
        let result = 'served: {
            let relay = match restore(&pooler, moved, id, transport) {
                Ok(session) => Box::pin(super::txn::serve(session, &mut stream, &mut buf, &pooler)),
                Err(e) => break 'served Err(e),
            };
            tracing::info!("client taken over from the old process");
            relay.await
        };
        Box::pin(farewell(&mut stream, result)).await;
    };
    crate::logging::InSpan::new(served, span)
}

/// The descriptor as a stream of the transport the old process said;
/// one of another kind (a TCP socket said to be a Unix one) is refused.
fn socket(fd: OwnedFd, transport: Transport) -> std::io::Result<Stream> {
    if transport == Transport::Unix {
        let s = std::os::unix::net::UnixStream::from(fd);
        s.local_addr()?;
        s.set_nonblocking(true)?;
        Ok(Stream::Unix(Socket::new(OwnedFd::from(s))?))
    } else {
        let s = std::net::TcpStream::from(fd);
        s.peer_addr()?;
        s.set_nonblocking(true)?;
        Ok(Stream::Tcp(Socket::new(OwnedFd::from(s))?))
    }
}

/// FATAL 57P01 for a handed-over client this process cannot serve.
fn cannot(why: impl std::fmt::Display) -> ClientError {
    ClientError::Refused(
        PgError::fatal(
            "57P01",
            format!("terminating connection: pgharbor restarted and cannot take this session over: {why}"),
        )
        .with_hint("Reconnect."),
    )
}

/// The session the handed-over client had, under this process's config.
fn restore(
    pooler: &Arc<Pooler>,
    moved: MovedClient,
    id: u64,
    transport: Transport,
) -> Result<Session, ClientError> {
    let (named, unnamed) = moved.check().map_err(cannot)?;
    let Ok(permit) = pooler.client_slots.clone().try_acquire_owned() else {
        return Err(ClientError::Refused(PgError::fatal(
            "53300",
            "sorry, too many clients already",
        )));
    };
    let entry = pooler.clients.register(ClientInfo {
        id,
        user: moved.user.clone(),
        database: moved.database.clone(),
        transport,
        tls: None,
        peer: moved.peer.clone(),
        connected_at: moving::connected_at(moved.connected_at_ms),
        state: ClientState::Idle,
        backend: None,
        application_name: moved.application_name.clone(),
        wait: None,
    });
    let snapshot = pooler.snapshot();
    let config = &snapshot.config;
    let pool_mode = config.pool_mode_for(&moved.database, &moved.user);
    if pool_mode == PoolMode::Session {
        return Err(cannot(format!(
            "database \"{}\" is in session pooling now",
            moved.database
        )));
    }
    if pooler.is_disabled(&moved.database) {
        return Err(ClientError::Refused(super::login::disabled(
            &moved.database,
        )));
    }
    let pool = pooler.pool_in(&snapshot, &moved.database, &moved.user)?;
    if let Some(key) = moved.lent_key().map_err(cannot)? {
        // A SCRAM-passthrough pool logs in with the key the client's login
        // lent the old process; without it this one could not open a
        // backend for the client until that user logged in here.
        if !pool.take_lent_client_key(&moved.user, snapshot.secret(&moved.user), key) {
            tracing::warn!("the lent SCRAM key does not match this auth file's secret; not used");
        }
    }
    let Some(cancel_key) = pooler.cancels.adopt(moved.cancel_pid, moved.cancel_secret) else {
        return Err(cannot("its cancel key is in use here"));
    };
    let budget = config.pool.prepared_statement_bytes;
    let mut statements = ClientStatements::default();
    for (name, definition) in named {
        let s = pooler
            .statements
            .intern(&definition, budget)
            .map_err(cannot)?;
        statements.define(&name, s);
    }
    if let Some(def) = unnamed {
        statements.set_unnamed(&def);
    }
    Ok(Session {
        pool_mode,
        lease: None,
        params: Arc::new(moving::param_set(&moved.params)),
        extras: super::txn::settings::ClientSettings::new(moved.startup),
        cancel_key,
        _permit: permit,
        entry,
        transport,
        auth: moved.auth,
        carried: Some(Box::new(Carried {
            session: moved.session,
            statements,
            strings: moved.strings,
        })),
    })
}
