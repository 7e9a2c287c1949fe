//! Logging a client in: negotiation, authentication, and attaching a backend.

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::sync::OwnedSemaphorePermit;

use super::authenticate::{self, Exchange, Proof, Searched};
use super::lookup;
use super::negotiate::{self, Opening};
use super::session::Session;
use super::{params, ClientError, ConnContext, LoginTimings};
use crate::auth::Secret;
use crate::config::PoolMode;
use crate::pool::{Lease, Pool};
use crate::pooler::{Pooler, Snapshot};
use crate::protocol::frontend::StartupMessage;
use crate::protocol::messages::TxStatus;
use crate::protocol::{server, FrameBuf, PgError};
use crate::registry::secrets::Found;
use crate::registry::{ClientEntry, ClientState, NewClient};
use crate::stats::{AuthKind, Class};
use crate::stream::Stream;
use crate::tls::label::Label;

/// A client that has proved who it is.
pub(super) struct Login {
    /// What the whole login goes by: the configuration, auth file and
    /// acceptor of one reload, read once at its start.
    pub(super) snapshot: Arc<Snapshot>,
    pub(super) startup: StartupMessage,
    pub(super) user: String,
    pub(super) database: String,
    pub(super) proof: Proof,
    /// The method the login went by, for the statistics.
    pub(super) auth: AuthKind,
    /// The secret `auth.query` found, for a user the auth file lacks.
    pub(super) looked_up: Found,
    pub(super) permit: OwnedSemaphorePermit,
}

/// Negotiation and authentication; `None` for a served cancel request.
pub(super) async fn handshake(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    ctx: &ConnContext,
    pooler: &Arc<Pooler>,
    snapshot: Arc<Snapshot>,
    timings: &mut LoginTimings,
) -> Result<Option<Login>, ClientError> {
    let policy = crate::tls::policy::mode_for(&snapshot.config.tls, ctx.transport);
    let opening = negotiate::negotiate(
        stream,
        buf,
        (ctx.transport, ctx.accepted_at),
        policy,
        snapshot.tls_acceptor.as_ref(),
        timings,
    );
    let startup = match opening.await? {
        Opening::Cancel { pid, secret } => {
            super::cancel::serve(pooler, pid, secret).await;
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
    let auth_started = Instant::now();
    super::cert::check_policy(&snapshot, policy, stream, &user)?;
    let choice = super::hba::choose(&snapshot, ctx, stream, &user, &database)?;
    let exchange = choice.exchange;
    let in_file = snapshot.secret(&user);
    let looked_up = match in_file {
        None if exchange.checks_secret() => {
            lookup::secret(pooler, &snapshot, &user, &database).await?
        }
        _ => None,
    };
    let secret = in_file.or(looked_up.as_deref());
    let searched = if snapshot.config.auth.lookup.user.is_some() {
        Searched::AuthFileAndQuery
    } else {
        Searched::AuthFile
    };
    let proof = authenticate::authenticate(
        stream,
        buf,
        exchange,
        &user,
        (secret, searched),
        pooler.mock_seed(),
    )
    .await?;
    if let Some(check) = &choice.cn_check {
        check
            .run(snapshot.hba.as_deref(), stream, &user, &proof)
            .await?;
    }
    timings.auth = auth_started.elapsed();
    let auth = auth_kind(exchange, &proof);
    Ok(Some(Login {
        snapshot,
        startup,
        user,
        database,
        proof,
        auth,
        looked_up,
        permit,
    }))
}

/// `user`'s secret: the auth file's, else what `auth.query` found.
fn known_secret<'a>(
    snapshot: &'a Snapshot,
    user: &str,
    looked_up: &'a Found,
) -> Option<&'a Secret> {
    snapshot.secret(user).or(looked_up.as_deref())
}

/// The method a login went by: what it was offered, or SCRAM when an md5
/// login ran SCRAM (a SCRAM secret cannot check an md5 answer).
fn auth_kind(exchange: Exchange, proof: &Proof) -> AuthKind {
    match (exchange, proof) {
        (_, Proof::Scram(s)) if s.channel_binding => AuthKind::ScramPlus,
        (_, Proof::Scram(_)) => AuthKind::Scram,
        (Exchange::Trust, _) => AuthKind::Trust,
        (Exchange::Peer, _) => AuthKind::Peer,
        (Exchange::Cert, _) => AuthKind::Cert,
        (Exchange::Md5, _) => AuthKind::Md5,
        (Exchange::Password, _) => AuthKind::Password,
        (Exchange::ScramSha256, _) => AuthKind::Scram,
    }
}

/// Finds the pool, waits for a backend, applies the client's parameters and
/// sends the rest of the login reply.
pub(super) async fn attach(
    stream: &mut Stream,
    ctx: &ConnContext,
    pooler: &Arc<Pooler>,
    login: Login,
    timings: &mut LoginTimings,
) -> Result<Session, ClientError> {
    let Login {
        snapshot,
        startup,
        user,
        database,
        proof,
        auth,
        looked_up,
        permit,
    } = login;
    // The whole login reply (SASL final, AuthenticationOk, parameters, key,
    // ReadyForQuery) goes out in one write once a backend is ready.
    let mut out = BytesMut::with_capacity(1024);
    if let Proof::Scram(success) = &proof {
        server::auth_sasl_final(&mut out, &success.server_final);
    }
    server::auth_ok(&mut out);
    let new = NewClient {
        id: ctx.id,
        user: &user,
        database: &database,
        transport: ctx.transport,
        tls: Label::of_stream(stream),
        connected_at: std::time::SystemTime::now(),
        state: ClientState::WaitingForBackend,
        backend: None,
        application_name: startup.get("application_name"),
    };
    let entry = pooler.clients.register_login(new, &ctx.peer);
    // DISABLE refuses the database as PostgreSQL refuses one with
    // datallowconn off, after authentication; clients already in stay.
    if pooler.is_disabled(&database) {
        let _ = stream.write_all(&out).await;
        return Err(ClientError::Refused(disabled(&database)));
    }
    let pool = match pooler.pool_in(&snapshot, &database, &user) {
        Ok(pool) => pool,
        Err(e) => {
            // Authentication comes first, as on PostgreSQL: the client sees
            // it succeed, then the error (3D000 for an unknown database).
            let _ = stream.write_all(&out).await;
            return Err(e.into());
        }
    };
    let secret = known_secret(&snapshot, &user, &looked_up);
    if let Proof::Scram(success) = &proof {
        pool.lend_client_keys(&user, secret, success);
    }
    if let Some(found) = &looked_up {
        pool.lend_looked_up(&user, found);
    }
    let wanted = params::requested(&startup)?;
    let config = &snapshot.config;
    let pool_mode = config.pool_mode_for(&database, &user);
    let pooled_per_transaction = pool_mode != PoolMode::Session;
    // Session pooling opens backends with the client's application_name
    // (RESET then brings back the client's own value); transaction pooling
    // must not, or a RESET would bring back another client's.
    let hint = if pooled_per_transaction {
        None
    } else {
        startup.get("application_name")
    };
    let known = pooled_per_transaction
        .then(|| params::without_backend(&pool, &wanted))
        .flatten();
    let (mut lease, shown) = match known {
        Some(shown) => (None, shown),
        None => match acquire(&pool, &entry, &wanted, hint, timings).await {
            Ok(mut lease) if pooled_per_transaction => {
                params::learn(&pool, &wanted, lease.backend());
                let shown = Arc::clone(lease.backend().ledger_ref().params());
                (Some(lease), shown)
            }
            // Session pooling shows the backend's own set (below) and keeps
            // no copy: the client never changes backend.
            Ok(lease) => (Some(lease), Arc::default()),
            Err(e) => {
                // The client did authenticate: let it see that before the error.
                let _ = stream.write_all(&out).await;
                return Err(e);
            }
        },
    };
    // What ParameterStatus does not follow (a parameter the server does not
    // report, or reports but the pool does not track, as search_path on
    // PostgreSQL 18) the client's settings carry.
    let extras: Vec<(String, String)> = if pooled_per_transaction {
        let mut extras: Vec<_> = wanted
            .into_iter()
            .filter(|(name, _)| shown.get_ci(name).is_none() || !config.pool.is_tracked(name))
            .collect();
        // The filter reuses the startup parameters' allocation, which the
        // session would otherwise keep, mostly empty, while it idles.
        extras.shrink_to_fit();
        extras
    } else {
        Vec::new()
    };
    let backend_id = lease.as_mut().map(|l| l.backend().id());
    entry.set(
        if backend_id.is_some() {
            ClientState::Active
        } else {
            ClientState::Idle
        },
        backend_id,
    );
    // Session pooling shows the real backend's process id: the client keeps
    // that backend, and drivers compare it with pg_backend_pid().
    let real_pid = match (&mut lease, pooled_per_transaction) {
        (Some(l), false) => Some(l.backend().cancel().pid),
        _ => None,
    };
    let cancel_key = pooler.cancels.issue(real_pid);
    if let Some(l) = lease.as_mut() {
        cancel_key.slot.set(Some(l.backend().cancel().clone()));
        for (name, value) in &extras {
            let applied = crate::backend::Applied::Startup(value.clone());
            l.backend()
                .ledger()
                .applied()
                .set(&name.to_ascii_lowercase(), applied);
        }
    }
    let shown_set = match (&mut lease, pooled_per_transaction) {
        (Some(l), false) => l.backend().ledger_ref().params(),
        _ => &*shown,
    };
    out.extend_from_slice(shown_set.status_messages());
    server::backend_key_data(&mut out, cancel_key.pid, cancel_key.secret);
    server::ready_for_query(&mut out, TxStatus::Idle);
    stream.write_all(&out).await?;
    timings.total = ctx.accepted_at.elapsed();
    let reused = lease
        .as_mut()
        .is_none_or(|l| l.backend().clients_served() > 1);
    pooler.stats.client_login(
        Class::client(ctx.transport, stream.is_tls(), Some(auth)),
        &timings.report(),
        reused,
    );
    tracing::info!(
        user = %user,
        database = %database,
        backend = backend_id,
        auth_us = timings.auth.as_micros() as u64,
        wait_us = timings.backend_wait.as_micros() as u64,
        total_us = timings.total.as_micros() as u64,
        "client logged in"
    );
    Ok(Session {
        pool_mode,
        lease: lease.map(Box::new),
        params: shown,
        extras: super::txn::settings::ClientSettings::new(extras),
        cancel_key,
        _permit: permit,
        entry,
        transport: ctx.transport,
        auth,
        carried: None,
    })
}

/// Gets a backend from the client's pool and applies its parameters.
async fn acquire(
    pool: &Arc<Pool>,
    client: &ClientEntry,
    wanted: &[(String, String)],
    app_name_hint: Option<&str>,
    timings: &mut LoginTimings,
) -> Result<Lease, ClientError> {
    let wait_started = Instant::now();
    // KILL_CLIENT (and shutdown) reach a client still waiting for its
    // first backend too.
    let mut lease = tokio::select! {
        l = pool.acquire(client, app_name_hint) => l?,
        _ = client.signals().end_wait() => return Err(ClientError::Shutdown),
    };
    let acquired = Instant::now();
    timings.backend_wait = acquired - wait_started;
    params::apply(lease.backend(), wanted).await?;
    timings.first_ready = acquired.elapsed();
    Ok(lease)
}

/// FATAL 55000 for a login to a DISABLEd database, PostgreSQL's words for
/// a database that does not allow connections.
pub(super) fn disabled(database: &str) -> PgError {
    PgError::fatal(
        "55000",
        format!("database \"{database}\" is not currently accepting connections"),
    )
    .with_hint("An administrator ran DISABLE on the admin console; ENABLE lets clients in again.")
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
