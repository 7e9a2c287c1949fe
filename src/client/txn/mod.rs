//! Transaction and statement pooling: a logged-in client holds a backend
//! only while it has a transaction (or statement) in flight. Between
//! transactions it holds no backend at all; when it sends its next message
//! it gets whichever backend is free first, made to look like its own: the
//! parameters it follows are SET, and its named prepared statements are
//! prepared there when first used.
//!
//! What a client leaves behind that outlives a transaction (temporary
//! tables, session SETs, advisory locks, LISTEN...) pins it to its backend
//! until it disconnects; see the README's state table.

mod ahead;
pub(crate) mod moving;
pub(crate) mod rewrite;
pub mod settings;
pub mod statements;

use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncWriteExt;

use super::relay::{self, Mode, TxnEnd};
use super::session::{departure, Session};
use super::stop::Stop;
use super::{ClientError, Meter, RelayEnd};
use crate::backend::{Departure, ParamSet};
use crate::config::{Config, PoolMode};
use crate::pool::{Lease, Pool};
use crate::pooler::Pooler;
use crate::protocol::scan::Scanner;
use crate::protocol::sql::Strings;
use crate::protocol::tags::fe;
use crate::protocol::{FrameBuf, Violation};
use crate::registry::{CancelKey, ClientEntry, ClientState};
use crate::stats::Class;
use crate::stream::{poll_fill, ReadError, Stream};
use rewrite::{Pin, Rewriter};
use settings::ClientSettings;
use statements::ClientStatements;

/// Serves a logged-in client in transaction or statement pooling until it leaves.
// Not an async fn: see the block's comment (rust-lang/rust#62958).
#[allow(clippy::manual_async_fn)]
pub(super) fn serve<'a>(
    mut session: Session,
    stream: &'a mut Stream,
    buf: &'a mut FrameBuf,
    pooler: &'a Arc<Pooler>,
) -> impl std::future::Future<Output = Result<(), ClientError>> + Send + 'a {
    // A block, not an async fn, and the session read in place, never taken
    // apart: an async fn keeps a second copy of its arguments for the
    // client's whole life, and so would locals moved out of the session.
    async move {
        let pool = match &session.lease {
            Some(l) => l.pool().clone(),
            None => pooler.pool_for(session.entry.database(), session.entry.user())?,
        };
        let config = pooler.config();
        // A KILL of the pool reaches the session. Nothing else is kept for
        // the stop: the idle wait polls the entry's signals itself, and
        // each transaction makes its own watch, so an idle client's future
        // has no room for one.
        Stop::attach(&pool, &session.entry);
        let mut moving_seen = false;
        let mut client = Between {
            pooler,
            pool,
            config,
            reported: &session.params,
            entry: &session.entry,
            cancel_key: &session.cancel_key,
            client_class: Class::client(session.transport, stream.is_tls(), Some(session.auth)),
            statement_mode: session.pool_mode == PoolMode::Statement,
            strings: relay::client_strings(Some(&session.params)),
            params: session.params.clone(),
            settings: std::mem::take(&mut session.extras),
            statements: ClientStatements::default(),
            meter: None,
            gates: None,
            scan: Scanner::new(),
            pin: None,
            stays: false,
        };
        client.restore(session.carried.take());
        let mut transactions: u64 = 0;
        let end = loop {
            if session.lease.is_none() {
                // A takeover's new process serves it from here on.
                let who = moving::Who {
                    user: session.entry.user(),
                    transport: session.transport,
                    auth: session.auth,
                };
                if client.movable_now(stream, buf)
                    && Box::pin(client.hand_over(stream, buf, who)).await
                {
                    return Ok(());
                }
                session.entry.set(ClientState::Idle, None);
                let may_move = !moving_seen && client.outbox(stream).is_some();
                // Not boxed: the wait and the (boxed) transaction are never live
                // together, so their room in this future overlaps, and a box
                // would cost an allocation per transaction and save nothing.
                // One reference to the client, not one to each part the wait
                // reads: the wait's room is part of every idle client's.
                let (st, fb, idle) = (&mut *stream, &mut *buf, &client);
                let waiting = std::future::poll_fn(move |cx| poll_wait(cx, st, fb, idle, may_move));
                match waiting.await {
                    Waited::Message => {}
                    Waited::Move => {
                        // Started (it resolves once): from here every idle
                        // point tries the hand-over before it waits.
                        moving_seen = true;
                        continue;
                    }
                    Waited::End(e) => break e,
                }
                // Boxed, and only for a batch it may answer: an idle client
                // should not keep room for the answer's write.
                if client.may_answer_ahead(buf)
                    && Box::pin(client.answer_ahead(stream, buf)).await?
                {
                    continue;
                }
            }
            // Boxed: an idle client need not carry room for a transaction's
            // state (the checkout's, then the relay's: over 2 KiB). One
            // allocation per transaction, and the copy into the box costs
            // less than the memory saved across thousands of idle clients.
            let held = session.lease.take().map(|l| *l);
            match Box::pin(client.transaction(held, stream, buf)).await? {
                TxnEnd::Idle => transactions += 1,
                TxnEnd::Ended(end) => break end,
            }
        };
        if let Some(m) = client.meter.as_mut() {
            m.flush(None);
        }
        session.entry.set(ClientState::Closing, None);
        tracing::info!(
            user = session.entry.user(),
            database = session.entry.database(),
            transactions,
            pinned = client.pin.take().map(Pin::describe),
            end = ?end,
            "client session ended"
        );
        let stopped = Stop::watching(&session.entry).is_stopped();
        super::session::end_result(end, stopped)
    }
}

/// What a transaction-mode client keeps between transactions, which each
/// transaction on a backend reads and updates. Every idle client keeps
/// one: what the configuration says is read from it when needed, not
/// copied here.
struct Between<'p> {
    pooler: &'p Arc<Pooler>,
    /// Owned, not borrowed from the loop: one pointer less in every idle
    /// client's future.
    pool: Arc<Pool>,
    /// The configuration as of the client's login.
    config: Arc<Config>,
    /// The parameters the server reported at login (see [`follows`]).
    reported: &'p ParamSet,
    entry: &'p ClientEntry,
    cancel_key: &'p CancelKey,
    client_class: Class,
    statement_mode: bool,
    /// The parameters the client was shown, kept current by the relay.
    params: Arc<ParamSet>,
    settings: ClientSettings,
    statements: ClientStatements,
    strings: Strings,
    /// Boxed: made at the first transaction, and idle clients are many.
    meter: Option<Box<Meter<'p>>>,
    /// The relay's gates, made at the first transaction and lent to each.
    gates: Option<Box<relay::Gates>>,
    scan: Scanner,
    /// Why the client holds its backend for good, once it does.
    pin: Option<Pin>,
    /// A takeover could not hand it over: it stays on this process.
    stays: bool,
}

/// Whether the pooler follows a SET of a name itself (see [`follows`]).
fn tracked<'c>(config: &'c Config, reported: &'c ParamSet) -> impl Fn(&str) -> bool + Sync + 'c {
    move |name| follows(config, reported, name)
}

/// Whether the pooler follows a client's SET of `name` itself. A followed
/// parameter must be one the server reports (`reported`, the login's set):
/// the pooler learns a client's SET of it from ParameterStatus. A SET of
/// any other parameter (even one listed in track_parameters) pins instead.
fn follows(config: &Config, reported: &ParamSet, name: &str) -> bool {
    config.pool.is_tracked(name) && reported.iter().any(|(r, _)| r.eq_ignore_ascii_case(name))
}

impl<'p> Between<'p> {
    /// Whether [`Between::answer_ahead`] may answer what is buffered: only
    /// a batch that starts with a Parse, when the pooler manages statements.
    fn may_answer_ahead(&self, buf: &FrameBuf) -> bool {
        let parse_first = buf.readable().first() == Some(&fe::PARSE);
        self.manages_statements() && parse_first && self.scan.at_boundary()
    }

    /// False when `max_prepared_statements` is 0: names pass untouched and pin.
    fn manages_statements(&self) -> bool {
        self.config.pool.max_prepared_statements > 0
    }

    /// Answers a batch of Parses the client's statements already cover
    /// without a backend (see [`Between::may_answer_ahead`]); true when it
    /// did.
    async fn answer_ahead(
        &mut self,
        stream: &mut Stream,
        buf: &mut FrameBuf,
    ) -> Result<bool, ClientError> {
        let ahead = ahead::Ahead {
            registry: &self.pooler.statements,
            client_budget: self.config.pool.prepared_statement_bytes_per_client,
            strings: self.strings,
            tracked: &tracked(&self.config, self.reported),
        };
        let mut out = bytes::BytesMut::new();
        let Some(n) = ahead.answer(buf.readable(), &mut self.statements, &mut out) else {
            return Ok(false);
        };
        buf.consume(n);
        stream.write_all(&out).await?;
        Ok(true)
    }

    /// Runs the client's traffic on a backend (`held`, or one checked out
    /// now) until the backend may go back, and gives it back.
    async fn transaction(
        &mut self,
        held: Option<Lease>,
        stream: &mut Stream,
        buf: &mut FrameBuf,
    ) -> Result<TxnEnd, ClientError> {
        let mut stop = std::pin::pin!(Stop::watching(self.entry).stopped());
        let (config, pooler) = (&*self.config, self.pooler);
        let tracked = tracked(config, self.reported);
        let mut rewriter = Rewriter {
            registry: &pooler.statements,
            manage: self.manages_statements(),
            budget: config.pool.prepared_statement_bytes,
            client_budget: config.pool.prepared_statement_bytes_per_client,
            tracked: &tracked,
        };
        let mut held = match held {
            Some(l) => l,
            None => {
                self.entry.set(ClientState::WaitingForBackend, None);
                // No application_name hint: a backend opened with one client's
                // name would give it back to another client's RESET.
                // Not boxed: the transaction is, and a box of its own cost an
                // allocation per transaction (the checkout's state is
                // deadpool's, over 2 KiB, past the allocator's fast sizes).
                let acquire = std::pin::pin!(self.pool.acquire(self.entry, None));
                let acquired = tokio::select! {
                    l = acquire => l,
                    why = stop.as_mut() => return Ok(TxnEnd::Ended(RelayEnd::BackendGone(why.into()))),
                };
                let mut l = acquired.map_err(ClientError::Acquire)?;
                if let Err(e) =
                    settings::sync(l.backend(), (&self.params, &self.settings), &tracked)
                {
                    l.backend().ledger().break_with(e.to_string());
                    l.finish(Departure::SessionOver { keeps_state: true });
                    return Err(ClientError::Backend(e));
                }
                l
            }
        };
        held.backend()
            .ledger()
            .prepared()
            .set_capacity(config.pool.max_prepared_statements);
        let backend_id = held.backend().id();
        self.entry.set(ClientState::Active, Some(backend_id));
        self.cancel_key
            .slot
            .set(Some(held.backend().cancel().clone()));
        let meter = self.meter.get_or_insert_with(|| {
            Box::new(Meter::new(
                &self.pooler.stats,
                [self.client_class, held.backend().class()],
                self.entry.database(),
            ))
        });
        meter.assigned(held.waited());
        let gates = self.gates.get_or_insert_default();
        let mode = Mode {
            release_at_idle: self.pin.is_none(),
            statement: self.statement_mode,
            idle_tx_timeout: Some(config.pool.idle_transaction_timeout).filter(|d| !d.is_zero()),
            rewriter: Some(&mut rewriter),
            client_params: Some(&mut self.params),
            client_id: self.entry.id(),
            statements: &mut self.statements,
            strings: self.strings,
        };
        let (end, left) = {
            let (mut cr, mut cw) = stream.split();
            // Not boxed, as the checkout above, and pinned where it is made
            // (a move into the select would copy it whole).
            let r = std::pin::pin!(relay::relay(
                (&mut cr, &mut cw),
                buf,
                &mut self.scan,
                held.backend(),
                (meter, gates),
                mode,
            ));
            // Biased: no random draw at every wake of the relay.
            tokio::select! {
                biased;
                r = r => r,
                why = stop.as_mut() => (TxnEnd::Ended(RelayEnd::BackendGone(why.into())), Default::default()),
            }
        };
        // From here a cancel with this client's key reaches nothing; one
        // already on its way holds the backend back (see Link::hand_off).
        self.cancel_key.slot.set(None);
        self.settings.commit(&left.settings);
        self.strings = left.strings;
        if self.pin.is_none() {
            if let Some(p) = left.pin {
                tracing::info!(
                    backend = backend_id,
                    reason = p.describe(),
                    "client pinned to its server connection"
                );
                self.pin = Some(p);
            }
        }
        match &end {
            TxnEnd::Idle => held.finish(Departure::BetweenTransactions),
            TxnEnd::Ended(why) => held.finish(departure(why, self.pin.is_some())),
        }
        Ok(end)
    }
}

/// What the client did while it held no backend.
enum Waited {
    /// A message (or part of one) is buffered: time to get a backend.
    Message,
    /// A takeover's hand-over began while nothing was buffered.
    Move,
    /// The session is over.
    End(RelayEnd),
}

/// Waits, holding no backend, until the client sends something. A poll
/// function over the caller's references, not an async fn: its state is
/// part of every idle client's (an async fn with a select inside kept 184
/// bytes of it).
fn poll_wait(
    cx: &mut Context<'_>,
    stream: &mut Stream,
    buf: &mut FrameBuf,
    client: &Between,
    may_move: bool,
) -> Poll<Waited> {
    let scan = &client.scan;
    if let Poll::Ready(why) = Stop::watching(client.entry).poll(cx) {
        return Poll::Ready(Waited::End(RelayEnd::BackendGone(why.into())));
    }
    if buf.is_empty() {
        // A takeover's hand-over wakes the idle clients that may move.
        if may_move && client.entry.signals().poll_moving(cx).is_ready() {
            return Poll::Ready(Waited::Move);
        }
        // Idle clients may be many: hold no read buffer while waiting.
        buf.shed();
        if ready!(stream.poll_readable(cx)).is_err() {
            return Poll::Ready(Waited::End(RelayEnd::ClientGone));
        }
    }
    // A backend is taken only for a whole message (or the head of one too
    // big to buffer): with half a message, the relay would find nothing to
    // send and hand the backend straight back, over and over.
    while scan.at_boundary() && !message_ready(buf.readable()) {
        if let Some(ended) = refused_first_byte(buf) {
            return Poll::Ready(ended);
        }
        match ready!(poll_fill(stream, cx, buf)) {
            Ok(_) => {}
            Err(ReadError::Violation(v)) => {
                return Poll::Ready(Waited::End(RelayEnd::ClientViolation(v)))
            }
            Err(_) => return Poll::Ready(Waited::End(RelayEnd::ClientGone)),
        }
    }
    if scan.at_boundary() {
        // A Terminate needs no backend.
        if buf.readable().first() == Some(&fe::TERMINATE) {
            return Poll::Ready(Waited::End(RelayEnd::Terminated));
        }
        if let Some(ended) = refused_first_byte(buf) {
            return Poll::Ready(ended);
        }
    }
    Poll::Ready(Waited::Message)
}

/// PostgreSQL refuses a bad message type by its first byte, before any
/// length: the end of the session when the buffer starts with one.
fn refused_first_byte(buf: &FrameBuf) -> Option<Waited> {
    let t = *buf.readable().first()?;
    (!fe::valid_after_login(t)).then(|| {
        Waited::End(RelayEnd::ClientViolation(Violation::new(format!(
            "invalid frontend message type {t}"
        ))))
    })
}

/// True when `data` starts with a whole message, or with the header of one
/// larger than the relay reads whole (it is streamed).
fn message_ready(data: &[u8]) -> bool {
    match Scanner::peek_total(data, 0) {
        Some(total) => data.len() >= total || total > CLIENT_STREAM_AFTER,
        None => false,
    }
}

/// Messages larger than this start the relay before they are all buffered.
const CLIENT_STREAM_AFTER: usize = 64 * 1024;
