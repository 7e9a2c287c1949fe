//! One client's life: negotiate, authenticate, get a backend, relay, and
//! give the backend back clean.

mod adopt;
mod authenticate;
mod cancel;
mod cert;
mod error;
pub(crate) mod gate;
mod hba;
mod login;
mod lookup;
mod negotiate;
mod params;
pub(crate) mod relay;
mod session;
mod signal;
mod stop;
pub(crate) mod txn;

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

pub use adopt::adopt;
pub use error::ClientError;
pub use relay::{Meter, RelayEnd};

use crate::config::{is_admin_database, TcpOptions};
use crate::listener::{proxy, ConnContext, Listeners, Serve};
use crate::pooler::Pooler;
use crate::protocol::{server, FrameBuf, MAX_STARTUP_PACKET};
use crate::stats::{Class, ClientLogin};
use crate::stream::{Accepted, EarlyReads, Stream};
use authenticate::Proof;
use login::{attach, handshake};

/// Initial size of a client's read buffer: small, because idle clients are
/// many; it grows when data streams or a large message must be read whole.
const CLIENT_BUF: usize = 2 * 1024;
/// Client read buffer once relaying: big enough that COPY FROM is not capped.
const CLIENT_RELAY_CAP: usize = 64 * 1024;

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

/// The client sessions of one pooler, as the listener's [`Serve`]r.
struct Sessions(Arc<Pooler>);

impl Serve for Sessions {
    fn tcp_options(&self) -> TcpOptions {
        self.0.config().listen.tcp
    }

    fn next_id(&self) -> u64 {
        self.0.next_client_id()
    }

    fn serve(&self, conn: Accepted, ctx: ConnContext, early: &mut EarlyReads) {
        let pooler = &self.0;
        let mut buf = client_buf(pooler);
        // Read before the socket is registered (see `Accepted`), here in
        // the accept loop as PgBouncer does; behind a balancer the PROXY
        // header comes first, and `admit` reads it.
        if pooler.config().listen.proxy_protocol_from.is_empty() {
            early.read(&conn, &mut buf);
        }
        match conn.into_stream() {
            Ok(stream) => {
                pooler.tasks.spawn(serve(stream, buf, ctx, pooler.clone()));
            }
            Err(e) => {
                tracing::warn!(id = ctx.id, error = %e, "cannot watch an accepted connection")
            }
        }
    }
}

/// Accepts clients on `listeners` for `pooler` until it stops accepting.
pub async fn accept(listeners: Listeners, pooler: Arc<Pooler>) {
    let stop = pooler.stop_accepting.clone();
    listeners.serve(stop, Arc::new(Sessions(pooler))).await
}

/// Cancels what the client holding key (`pid`, `secret`) runs, as its
/// CancelRequest would (a takeover's old process gets keys this way).
pub async fn cancel(pooler: &Pooler, pid: i32, secret: i32) {
    cancel::serve(pooler, pid, secret).await
}

/// A client's read buffer: shared buffers for its reads, up to a startup
/// packet or a relayed chunk.
fn client_buf(pooler: &Pooler) -> FrameBuf {
    let cap = CLIENT_RELAY_CAP.max(MAX_STARTUP_PACKET);
    FrameBuf::with_stash(CLIENT_BUF, cap, pooler.buffers.clone())
}

/// Serves one client connection to the end; `buf` holds what it sent
/// before it was registered.
pub fn serve(
    mut stream: Stream,
    mut buf: FrameBuf,
    ctx: ConnContext,
    pooler: Arc<Pooler>,
) -> impl std::future::Future<Output = ()> {
    let span = tracing::info_span!(
        "client",
        id = ctx.id,
        transport = tracing::field::Empty,
        peer = tracing::field::Empty,
        via = tracing::field::Empty,
        tls = tracing::field::Empty,
        user = tracing::field::Empty,
    );
    // The context is needed only until the login ends: boxed, it is freed
    // then instead of staying in every idle client's task. The block
    // captures the socket and the pooler in place (an async fn would copy
    // its arguments into locals and keep both copies for the client's life).
    let mut ctx = Box::new(ctx);
    let served = async move {
        // Boxed, and only behind a balancer: the task should not keep room
        // for the header's read while the client idles.
        if !pooler.config().listen.proxy_protocol_from.is_empty()
            && !Box::pin(admit(&mut stream, &mut ctx, &pooler)).await
        {
            return;
        }
        record_peer(&ctx);
        // Each phase's future is boxed and gone before the next: a task is
        // as big as its largest state, and an idle client (tens of
        // thousands of them) should carry neither the login's state nor the
        // relay's. The phases run here, not in a function of their own,
        // whose future would keep a second set of references to the socket,
        // the buffer and the pooler for the client's life; and the login's
        // outcome is gone before the relay runs (a match on it around the
        // relay's await would keep its room).
        let result = 'served: {
            let relay = match Box::pin(log_in(&mut stream, &mut buf, &ctx, &pooler)).await {
                Ok(Some(session)) => relay_for(session, &mut stream, &mut buf, &pooler),
                Ok(None) => break 'served Ok(()),
                Err(e) => break 'served Err(e),
            };
            drop(ctx);
            relay.await
        };
        // Boxed: the task keeps room for its largest state while the client
        // idles, and the goodbye's timers are only needed at the end.
        Box::pin(farewell(&mut stream, result)).await;
    };
    crate::logging::InSpan::new(served, span)
}

/// Names the client's transport and peer on its connection's span.
fn record_peer(ctx: &ConnContext) {
    let span = tracing::Span::current();
    span.record("transport", tracing::field::display(&ctx.transport));
    span.record("peer", tracing::field::display(&ctx.peer));
    if let Some(via) = &ctx.via {
        span.record("via", tracing::field::display(via));
    }
}

/// Replaces the connection's context with the real client a trusted
/// balancer's PROXY header names; false when the source was refused (and
/// closed).
async fn admit(stream: &mut Stream, ctx: &mut ConnContext, pooler: &Pooler) -> bool {
    let (id, peer) = (ctx.id, ctx.peer.clone());
    let admitted = {
        let config = pooler.config();
        let listen = &config.listen;
        proxy::admit(
            stream,
            ctx.clone(),
            &listen.proxy_protocol_from,
            listen.client_login_timeout,
        )
        .await
    };
    match admitted {
        Ok(real) => {
            *ctx = real;
            true
        }
        Err(e) => {
            // A load balancer gets no ErrorResponse: it would not read it.
            tracing::info!(id, peer = %peer, reason = %e, "PROXY protocol source refused");
            let _ = tokio::time::timeout(Duration::from_secs(1), stream.shutdown()).await;
            false
        }
    }
}

/// Tells the client why it is being closed, if it should hear it, and closes
/// the connection (TLS with a close_notify).
async fn farewell(stream: &mut Stream, result: Result<(), ClientError>) {
    if let Err(e) = result {
        let reply = e.to_pg_error();
        e.log(reply.as_ref());
        if let Some(err) = reply {
            let mut out = BytesMut::new();
            if e.is_pre_v3() {
                server::v2_error(&mut out, &err.message);
            } else {
                err.encode(&mut out);
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&out)).await;
        }
    }
    // A plain socket is simply closed on drop, a TLS one after its
    // close_notify.
    if stream.is_tls() {
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.close_notify()).await;
    }
}

/// A logged-in session's relay, boxed: the session moves into it.
fn relay_for<'a>(
    session: session::Session,
    stream: &'a mut Stream,
    buf: &'a mut FrameBuf,
    pooler: &'a Arc<Pooler>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ClientError>> + Send + 'a>> {
    if session.pool_mode == crate::config::PoolMode::Session {
        Box::pin(session.relay(stream, buf, pooler))
    } else {
        Box::pin(txn::serve(session, stream, buf, pooler))
    }
}

/// Negotiation, authentication and the first backend: the logged-in
/// session, or None when the connection ended on the way without an error
/// (a probe, a cancel request, an admin console session that finished).
async fn log_in(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    ctx: &ConnContext,
    pooler: &Arc<Pooler>,
) -> Result<Option<session::Session>, ClientError> {
    // The login timeout covers what the client controls (a load balancer's
    // PROXY header, negotiation and authentication), counted from accept;
    // waiting for a backend is bounded by query_wait_timeout.
    let snapshot = pooler.snapshot();
    // A deadline from the accept's own timestamp: no clock is read for it
    // (a limit too long to add is a year, which is no limit either).
    let deadline = tokio::time::Instant::from_std(ctx.accepted_at)
        .checked_add(snapshot.config.listen.client_login_timeout)
        .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(365 * 86_400));
    let mut timings = LoginTimings::default();
    let handshake = tokio::time::timeout_at(
        deadline,
        Box::pin(handshake(stream, buf, ctx, pooler, snapshot, &mut timings)),
    );
    let login = match handshake.await {
        Err(_) => Err(ClientError::LoginTimeout),
        Ok(Ok(None)) => return Ok(None),
        Ok(Ok(Some(l))) => Ok(l),
        Ok(Err(e)) => Err(e),
    };
    let session = match login {
        Ok(login) if is_admin_database(&login.database) => {
            // The admin console is a session of its own, with no backend.
            let mut out = BytesMut::new();
            if let Proof::Scram(success) = &login.proof {
                server::auth_sasl_final(&mut out, &success.server_final);
            }
            let console = crate::admin::serve(
                stream,
                buf,
                pooler,
                &login.snapshot.config,
                &login.user,
                out,
            );
            Box::pin(console).await?;
            return Ok(None);
        }
        Ok(login) => Box::pin(attach(stream, ctx, pooler, login, &mut timings)).await,
        Err(e) => Err(e),
    };
    match session {
        Ok(s) => Ok(Some(s)),
        Err(e) => {
            // A refused login counts; a client that vanished or a probe does not.
            if e.to_pg_error().is_some() {
                let class = Class::client(ctx.transport, stream.is_tls(), None);
                pooler.stats.client_failed(class);
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod task_layout {
    use std::path::Path;
    use std::time::Instant;

    use super::*;
    use crate::config::Config;
    use crate::listener::Transport;
    use crate::stream::Socket;

    /// A client's socket (its peer kept open by the caller), context and pooler.
    async fn client() -> (Stream, ConnContext, Arc<Pooler>, tokio::net::UnixStream) {
        let config = Config::parse(
            "[auth]\nmethod = \"trust\"\n[databases.app]\nconninfo = \"host=/tmp user=alice\"\n",
            Path::new("/tmp/pgharbor.toml"),
        )
        .expect("config");
        let pooler = Pooler::new(config).await.expect("pooler");
        let (ours, theirs) = tokio::net::UnixStream::pair().expect("socket pair");
        let stream = Stream::Unix(Socket::from_unix(ours).expect("socket"));
        let ctx = ConnContext {
            id: 1,
            transport: Transport::Unix,
            peer: crate::listener::PeerAddr::Path("unix".into()),
            via: None,
            accepted_at: Instant::now(),
        };
        (stream, ctx, pooler, theirs)
    }

    /// Each login boxes its handshake (and copies it into the box), and an
    /// idle client's task keeps its connection future. Opening a backend,
    /// rare (auth_query's lookup, a pool that grows), is boxed inside the
    /// pool: inline, it made every handshake 9 288 bytes instead of 3 328.
    /// The logged-in session bound for the whole of the relay made the
    /// task's future 896 bytes instead of 584; a function of its own for
    /// the phases and the login's outcome kept across the relay made it
    /// 264 instead of 152 (release build; 192 in a test build). tokio
    /// allocates a task in 128-byte steps: 264 cost a fourth step per client.
    /// Past 144 bytes (a 40-byte `Span` inline, a 64-byte read buffer) it
    /// takes a third: 144, with the task tracker's token, tokio's stage and
    /// its header and trailer, is exactly 256.
    #[tokio::test]
    async fn a_login_carries_no_room_for_a_backend_login() {
        let (mut stream, ctx, pooler, _peer) = client().await;
        let mut buf = FrameBuf::new(CLIENT_BUF, CLIENT_RELAY_CAP);
        let mut timings = LoginTimings::default();
        let snapshot = pooler.snapshot();
        let login = handshake(&mut stream, &mut buf, &ctx, &pooler, snapshot, &mut timings);
        let size = std::mem::size_of_val(&login);
        assert!(size <= 4096, "the handshake future is {size} bytes");
        drop(login);
        let task = serve(stream, client_buf(&pooler), ctx, pooler);
        let size = std::mem::size_of_val(&task);
        assert!(size <= 144, "a client's task future is {size} bytes");
    }

    /// A client a takeover handed over idles in a task like a logged-in
    /// one's: its future was 1 144 bytes (two copies of what it arrived
    /// with, and the restored session kept across the relay), and its task
    /// 1 280 bytes instead of 256.
    #[tokio::test]
    async fn a_handed_over_client_idles_in_one_step() {
        let (_stream, _ctx, pooler, _peer) = client().await;
        let (fd, _other) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        let moved = crate::takeover::moved::tests::sample();
        let task = adopt(pooler, moved, fd.into());
        let size = std::mem::size_of_val(&task);
        assert!(
            size <= 144,
            "a handed-over client's task future is {size} bytes"
        );
    }

    /// What every idle transaction-pooling client keeps besides its task:
    /// the loop's future, boxed. It was 368 bytes, then 288 (jemalloc's
    /// 320-byte class); 248 since the loop keeps no stop watch of its own,
    /// its client state owns the pool and configuration it used to borrow,
    /// and the idle wait holds one reference to that state instead of one
    /// to each part. Up to 256 bytes is one jemalloc class.
    #[tokio::test]
    async fn an_idle_transaction_pooling_client_fits_jemallocs_256_byte_class() {
        let (mut stream, _ctx, pooler, _peer) = client().await;
        let mut buf = FrameBuf::new(CLIENT_BUF, CLIENT_RELAY_CAP);
        let entry = pooler.clients.register(crate::registry::ClientInfo {
            id: 1,
            user: "alice".into(),
            database: "app".into(),
            transport: Transport::Unix,
            tls: None,
            peer: "unix".into(),
            connected_at: std::time::SystemTime::now(),
            state: crate::registry::ClientState::Idle,
            backend: None,
            application_name: None,
            wait: None,
        });
        let permit = Arc::new(tokio::sync::Semaphore::new(1))
            .try_acquire_owned()
            .expect("permit");
        let session = session::Session {
            pool_mode: crate::config::PoolMode::Transaction,
            lease: None,
            params: Arc::default(),
            extras: Default::default(),
            cancel_key: pooler.cancels.issue(None),
            _permit: permit,
            entry,
            transport: Transport::Unix,
            auth: crate::stats::AuthKind::Trust,
            carried: None,
        };
        let serving = txn::serve(session, &mut stream, &mut buf, &pooler);
        let size = std::mem::size_of_val(&serving);
        assert!(size <= 256, "the transaction loop's future is {size} bytes");
    }
}
