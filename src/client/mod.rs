//! One client's life: negotiate, authenticate, get a backend, relay, and
//! give the backend back clean.

mod authenticate;
pub mod cancel;
mod error;
mod negotiate;
mod params;
pub mod registry;
mod relay;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

pub use error::ClientError;
pub use relay::{Meter, RelayEnd};

use crate::backend::send_cancel;
use crate::config::ADMIN_DATABASE;
use crate::pool::Lease;
use crate::pooler::Pooler;
use crate::protocol::frontend::StartupMessage;
use crate::protocol::scan::Scanner;
use crate::protocol::{server, FrameBuf, PgError, MAX_STARTUP_PACKET};
use crate::stats::{Class, ClientLogin};
use crate::stream::Stream;
use crate::tls::Transport;
use authenticate::Proof;
use negotiate::Opening;

/// Initial size of a client's read buffer: small, because idle clients are
/// many; it grows when data streams or a large message must be read whole.
const CLIENT_BUF: usize = 2 * 1024;
/// Client read buffer once relaying: big enough that COPY FROM is not capped.
const CLIENT_RELAY_CAP: usize = 64 * 1024;

/// Where a client is in its life; reported by the admin console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// Reading startup packets (SSL/GSS requests, StartupMessage).
    Negotiating,
    /// Proving who it is.
    Authenticating,
    /// Logged in, waiting for a backend.
    WaitingForBackend,
    /// Holding a backend and relaying.
    Active,
    /// Ending.
    Closing,
}

/// Establishment timings of one client connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoginTimings {
    /// Accept to the first whole startup packet.
    pub first_packet: Duration,
    /// The TLS handshake (zero without TLS).
    pub tls_handshake: Duration,
    /// The authentication exchange.
    pub auth: Duration,
    /// Waiting for (or opening) a backend.
    pub backend_wait: Duration,
    /// From getting a backend to sending the first ReadyForQuery (parameters).
    pub first_ready: Duration,
    /// Accept to the first ReadyForQuery.
    pub total: Duration,
}

impl LoginTimings {
    /// The phases in the overhead report's order.
    pub fn report(&self) -> ClientLogin {
        let us = |d: Duration| d.as_micros() as u64;
        ClientLogin {
            phases_us: [
                us(self.first_packet),
                us(self.tls_handshake),
                us(self.auth),
                us(self.backend_wait),
                us(self.first_ready),
                us(self.total),
            ],
        }
    }
}

/// Facts about one accepted connection, known before any byte is read.
#[derive(Debug, Clone)]
pub struct ConnContext {
    /// Pooler-wide connection id.
    pub id: u64,
    /// How the client reached us.
    pub transport: Transport,
    /// Peer address (or the socket path).
    pub peer: String,
    /// When the socket was accepted.
    pub accepted_at: Instant,
}

/// Serves one client connection to the end.
pub async fn serve(mut stream: Stream, ctx: ConnContext, pooler: Arc<Pooler>) {
    let span = tracing::info_span!(
        "client",
        id = ctx.id,
        transport = %ctx.transport,
        peer = %ctx.peer,
        tls = tracing::field::Empty,
        user = tracing::field::Empty,
    );
    async move {
        let mut buf = FrameBuf::new(CLIENT_BUF, CLIENT_RELAY_CAP.max(MAX_STARTUP_PACKET));
        let result = run(&mut stream, &mut buf, &ctx, &pooler).await;
        if let Err(e) = result {
            match e.to_pg_error() {
                Some(err) => {
                    tracing::info!(error = %err, "client closed with error");
                    let mut out = BytesMut::new();
                    if e.is_pre_v3() {
                        server::v2_error(&mut out, &err.message);
                    } else {
                        err.encode(&mut out);
                    }
                    let _ =
                        tokio::time::timeout(Duration::from_secs(1), stream.write_all(&out)).await;
                }
                None => tracing::debug!(reason = %e, "client closed"),
            }
        }
        // TLS gets a close_notify; a plain socket is simply closed on drop.
        if stream.is_tls() {
            let _ = tokio::time::timeout(Duration::from_secs(1), stream.shutdown()).await;
        }
    }
    .instrument(span)
    .await
}

async fn run(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    ctx: &ConnContext,
    pooler: &Arc<Pooler>,
) -> Result<(), ClientError> {
    // The login timeout covers what the client controls (negotiation and
    // authentication); waiting for a backend is bounded by query_wait_timeout.
    let login_timeout = pooler.config().listen.client_login_timeout;
    let mut timings = LoginTimings::default();
    let handshake = tokio::time::timeout(
        login_timeout,
        handshake(stream, buf, ctx, pooler, &mut timings),
    );
    let login = match handshake.await {
        Err(_) => Err(ClientError::LoginTimeout),
        Ok(Ok(None)) => return Ok(()),
        Ok(Ok(Some(l))) => Ok(l),
        Ok(Err(e)) => Err(e),
    };
    let session = match login {
        Ok(login) if login.database == ADMIN_DATABASE => {
            // The admin console is a session of its own, with no backend.
            let mut out = BytesMut::new();
            if let Proof::Scram(success) = &login.proof {
                server::auth_sasl_final(&mut out, &success.server_final);
            }
            return crate::admin::serve(stream, buf, pooler, &login.user, out).await;
        }
        Ok(login) => attach(stream, ctx, pooler, login, &mut timings).await,
        Err(e) => Err(e),
    };
    let session = match session {
        Ok(s) => s,
        Err(e) => {
            // A refused login counts; a client that vanished or a probe does not.
            if e.to_pg_error().is_some() {
                let class = Class::client(ctx.transport, stream.is_tls());
                pooler.stats.client_failed(class);
            }
            return Err(e);
        }
    };
    session.relay(stream, buf, pooler).await
}

/// A client that has proved who it is.
struct Login {
    startup: StartupMessage,
    user: String,
    database: String,
    proof: Proof,
    permit: OwnedSemaphorePermit,
}

/// A logged-in client holding its backend (session pooling).
struct Session {
    lease: Lease,
    cancel_key: cancel::CancelKey,
    _permit: OwnedSemaphorePermit,
    entry: registry::ClientEntry,
    user: String,
    database: String,
    transport: Transport,
}

/// Negotiation and authentication; `None` for a served cancel request.
async fn handshake(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    ctx: &ConnContext,
    pooler: &Arc<Pooler>,
    timings: &mut LoginTimings,
) -> Result<Option<Login>, ClientError> {
    let policy = pooler.config().tls.mode_for(ctx.transport);
    let acceptor = pooler.tls_acceptor();
    let opening = negotiate::negotiate(
        stream,
        buf,
        (ctx.transport, ctx.accepted_at),
        policy,
        acceptor.as_ref(),
        timings,
    );
    let startup = match opening.await? {
        Opening::Cancel { pid, secret } => {
            forward_cancel(pooler, pid, secret).await;
            return Ok(None);
        }
        Opening::Startup(s) => s,
    };
    // A slot is taken after the startup packet (so the client can read the
    // error, and probes or cancel requests never count) and before any
    // authentication work, as PostgreSQL does.
    let Ok(permit) = pooler.client_slots.clone().try_acquire_owned() else {
        return Err(ClientError::Refused(PgError::fatal(
            "53300",
            "sorry, too many clients already",
        )));
    };
    let (user, database) = identify(&startup)?;
    tracing::Span::current().record("user", user.as_str());
    let config = pooler.config();
    let auth_file = pooler.auth_file();
    let secret = auth_file.as_ref().and_then(|f| f.get(&user));
    let auth_started = Instant::now();
    let proof = authenticate::authenticate(
        stream,
        buf,
        config.auth.method,
        &user,
        secret,
        pooler.mock_seed(),
    )
    .await?;
    timings.auth = auth_started.elapsed();
    Ok(Some(Login {
        startup,
        user,
        database,
        proof,
        permit,
    }))
}

/// Finds the pool, waits for a backend, applies the client's parameters and
/// sends the rest of the login reply.
async fn attach(
    stream: &mut Stream,
    ctx: &ConnContext,
    pooler: &Arc<Pooler>,
    login: Login,
    timings: &mut LoginTimings,
) -> Result<Session, ClientError> {
    let Login {
        startup,
        user,
        database,
        proof,
        permit,
    } = login;
    // The whole login reply (SASL final, AuthenticationOk, parameters, key,
    // ReadyForQuery) goes out in one write once a backend is ready.
    let mut out = BytesMut::with_capacity(1024);
    if let Proof::Scram(success) = &proof {
        server::auth_sasl_final(&mut out, &success.server_final);
    }
    server::auth_ok(&mut out);
    let entry = pooler.clients.register(registry::ClientInfo {
        id: ctx.id,
        user: user.clone(),
        database: database.clone(),
        transport: ctx.transport,
        tls: stream.is_tls(),
        peer: ctx.peer.clone(),
        connected_at: std::time::SystemTime::now(),
        state: ClientState::WaitingForBackend,
        backend: None,
    });
    let acquired = acquire(
        pooler,
        ctx.id,
        (&user, &database),
        &proof,
        &startup,
        timings,
    );
    let mut lease = match acquired.await {
        Ok(lease) => lease,
        Err(e) => {
            // The client did authenticate: let it see that before the error.
            let _ = stream.write_all(&out).await;
            return Err(e);
        }
    };
    entry.set(ClientState::Active, Some(lease.backend().id));
    let cancel_key = pooler.cancels.issue();
    cancel_key.slot.set(Some(lease.backend().cancel.clone()));
    for (name, value) in lease.backend().params.iter() {
        server::parameter_status(&mut out, name, value);
    }
    server::backend_key_data(&mut out, cancel_key.pid, cancel_key.secret);
    server::ready_for_query(&mut out, lease.backend().tx.as_byte());
    stream.write_all(&out).await?;
    timings.total = ctx.accepted_at.elapsed();
    pooler.stats.client_login(
        Class::client(ctx.transport, stream.is_tls()),
        &timings.report(),
        lease.backend().clients_served > 1,
    );
    tracing::info!(
        user = %user,
        database = %database,
        backend = lease.backend().id,
        auth_us = timings.auth.as_micros() as u64,
        wait_us = timings.backend_wait.as_micros() as u64,
        total_us = timings.total.as_micros() as u64,
        "client logged in"
    );
    Ok(Session {
        lease,
        cancel_key,
        _permit: permit,
        entry,
        user,
        database,
        transport: ctx.transport,
    })
}

/// Gets a backend from the right pool and applies the client's parameters.
async fn acquire(
    pooler: &Arc<Pooler>,
    client_id: u64,
    (user, database): (&str, &str),
    proof: &Proof,
    startup: &StartupMessage,
    timings: &mut LoginTimings,
) -> Result<Lease, ClientError> {
    let pool = pooler.pool_for(database, user)?;
    if let Proof::Scram(success) = proof {
        let auth_file = pooler.auth_file();
        let secret = auth_file.as_ref().and_then(|f| f.get(user));
        pooler.lend_scram_keys(&pool, user, secret, success);
    }
    let wait_started = Instant::now();
    let mut lease = pool.acquire(client_id).await?;
    let acquired = Instant::now();
    timings.backend_wait = acquired - wait_started;
    params::apply(lease.backend(), startup).await?;
    timings.first_ready = acquired.elapsed();
    Ok(lease)
}

/// The user and database a StartupMessage names, as PostgreSQL reads them.
fn identify(startup: &StartupMessage) -> Result<(String, String), ClientError> {
    let user = match startup.get("user") {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => {
            return Err(ClientError::Refused(PgError::fatal(
                "28000",
                "no PostgreSQL user name specified in startup packet",
            )))
        }
    };
    if startup
        .get("replication")
        .is_some_and(|r| r != "false" && r != "0" && r != "off")
    {
        return Err(ClientError::Refused(PgError::fatal(
            "08P01",
            "replication connections are not supported by pgharbor",
        )));
    }
    let database = match startup.get("database") {
        Some(d) if !d.is_empty() => d.to_string(),
        _ => user.clone(),
    };
    Ok((user, database))
}

/// Forwards a cancel for a live key; unknown keys are dropped silently, as PostgreSQL does.
async fn forward_cancel(pooler: &Pooler, pid: i32, secret: i32) {
    match pooler.cancels.lookup(pid, secret) {
        Some(target) => {
            tracing::info!(backend_pid = target.pid, "forwarding cancel request");
            if let Err(e) = send_cancel(&target).await {
                tracing::warn!(error = %e, "cancel request could not reach the server");
            }
        }
        None => tracing::debug!("cancel request with an unknown key ignored"),
    }
}

impl Session {
    /// Relays until the client leaves, then returns the backend.
    async fn relay(
        mut self,
        stream: &mut Stream,
        buf: &mut FrameBuf,
        pooler: &Arc<Pooler>,
    ) -> Result<(), ClientError> {
        let mut scan = Scanner::new();
        let shutdown = pooler.terminate_token();
        let killed = self.lease.pool().kill_token();
        let client_class = Class::client(self.transport, stream.is_tls());
        let mut meter = Meter::new(&pooler.stats, client_class, self.lease.backend().class());
        let (end, idle) = {
            let (mut cr, mut cw) = stream.split();
            let backend = self.lease.backend();
            let relay = relay::relay((&mut cr, &mut cw), buf, &mut scan, backend, &mut meter);
            tokio::select! {
                r = relay => r,
                _ = shutdown.cancelled() => (RelayEnd::BackendGone("shutdown".into()), false),
                _ = killed.cancelled() => (RelayEnd::BackendGone("killed".into()), false),
            }
        };
        meter.flush(None);
        self.entry.set(ClientState::Closing, None);
        self.cancel_key.slot.set(None);
        let shutting_down = shutdown.is_cancelled() || killed.is_cancelled();
        tracing::info!(
            user = %self.user,
            database = %self.database,
            to_server = meter.total.bytes_in,
            to_client = meter.total.bytes_out,
            end = ?end,
            "client session ended"
        );
        let clean_end = matches!(
            end,
            RelayEnd::Terminated | RelayEnd::ClientGone | RelayEnd::ClientViolation(_)
        );
        if !idle && clean_end {
            // The client left mid-query: stop the query so the server does not
            // run it to the end for nobody, then close this backend.
            let target = self.lease.backend().cancel.clone();
            tokio::spawn(async move {
                let _ = send_cancel(&target).await;
            });
        }
        self.lease.release(idle && clean_end && !shutting_down);
        match end {
            _ if shutting_down => Err(ClientError::Shutdown),
            RelayEnd::Terminated | RelayEnd::ClientGone | RelayEnd::BackendFatal => Ok(()),
            RelayEnd::ClientViolation(v) => Err(ClientError::Protocol(v)),
            RelayEnd::BackendGone(why) => Err(ClientError::Refused(PgError::fatal(
                "08006",
                format!("server connection lost: {why}"),
            ))),
        }
    }
}
