//! A logged-in client holding its backend (session pooling): the relay and
//! the hand-back.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use super::relay::{self, Mode, TxnEnd};
use super::stop::Stop;
use super::txn::statements::ClientStatements;
use super::{ClientError, Meter, RelayEnd};
use crate::backend::Departure;
use crate::listener::Transport;
use crate::pool::Lease;
use crate::pooler::Pooler;
use crate::protocol::scan::Scanner;
use crate::protocol::{FrameBuf, PgError};
use crate::registry::{CancelKey, ClientEntry, ClientState};
use crate::stats::{AuthKind, Class};
use crate::stream::Stream;

/// A logged-in client holding its backend (session pooling).
pub(super) struct Session {
    /// The pool mode resolved at login (user > database > pool.mode).
    pub(super) pool_mode: crate::config::PoolMode,
    /// The backend, when the login needed one (always in session pooling).
    /// Boxed: transaction pooling's session keeps this slot while idle.
    pub(super) lease: Option<Box<Lease>>,
    /// The parameters the client was shown at login.
    pub(super) params: Arc<crate::backend::ParamSet>,
    /// Startup parameters the server does not report (SET per backend in
    /// transaction pooling).
    pub(super) extras: super::txn::settings::ClientSettings,
    pub(super) cancel_key: CancelKey,
    pub(super) _permit: OwnedSemaphorePermit,
    /// Its registry entry, which also holds its user and database.
    pub(super) entry: ClientEntry,
    pub(super) transport: Transport,
    /// How the client authenticated (its statistics class).
    pub(super) auth: AuthKind,
    /// What a client handed over by a takeover brings besides (None at login).
    pub(super) carried: Option<Box<super::txn::moving::Carried>>,
}

impl Session {
    /// Relays until the client leaves, then returns the backend.
    pub(super) async fn relay(
        mut self,
        stream: &mut Stream,
        buf: &mut FrameBuf,
        pooler: &Arc<Pooler>,
    ) -> Result<(), ClientError> {
        let Some(lease) = self.lease.take().map(|l| *l) else {
            return Err(ClientError::Backend(
                crate::backend::BackendError::Protocol(
                    "session pooling client without a server connection".into(),
                ),
            ));
        };
        self.relay_on(lease, stream, buf, pooler).await
    }

    async fn relay_on(
        self,
        mut lease: Lease,
        stream: &mut Stream,
        buf: &mut FrameBuf,
        pooler: &Arc<Pooler>,
    ) -> Result<(), ClientError> {
        let mut scan = Scanner::new();
        let stop = Stop::new(lease.pool(), &self.entry);
        let client_class = Class::client(self.transport, stream.is_tls(), Some(self.auth));
        let classes = [client_class, lease.backend().class()];
        let mut meter = Meter::new(&pooler.stats, classes, self.entry.database());
        meter.assigned(lease.waited());
        // Session pooling renames nothing: the client's names are the server's.
        let mut statements = ClientStatements::default();
        let mode = Mode {
            release_at_idle: false,
            statement: false,
            idle_tx_timeout: None,
            rewriter: None,
            client_params: None,
            client_id: self.entry.id(),
            statements: &mut statements,
            strings: Default::default(),
        };
        let end = {
            let (mut cr, mut cw) = stream.split();
            let backend = lease.backend();
            let gates = relay::Gates::default();
            let relay = relay::relay(
                (&mut cr, &mut cw),
                buf,
                &mut scan,
                backend,
                (&mut meter, &gates),
                mode,
            );
            // Biased: no random draw at every wake of the relay.
            tokio::select! {
                biased;
                (r, _) = relay => r,
                why = stop.stopped() => TxnEnd::Ended(RelayEnd::BackendGone(why.into())),
            }
        };
        let end = match end {
            TxnEnd::Ended(e) => e,
            // Session pooling never releases at idle.
            TxnEnd::Idle => RelayEnd::Terminated,
        };
        meter.flush(None);
        self.entry.set(ClientState::Closing, None);
        self.cancel_key.slot.set(None);
        let shutting_down = stop.is_stopped();
        tracing::info!(
            user = self.entry.user(),
            database = self.entry.database(),
            to_server = meter.total[0],
            to_client = meter.total[1],
            end = ?end,
            "client session ended"
        );
        if shutting_down {
            lease.backend().ledger().break_with("shutting down");
        }
        lease.finish(departure(&end, true));
        end_result(end, shutting_down)
    }
}

/// How a client whose session ended the way `end` says is done with its
/// backend; `keeps_state`: it may have left session state behind.
pub(super) fn departure(end: &RelayEnd, keeps_state: bool) -> Departure {
    if let RelayEnd::BackendGone(_) | RelayEnd::BackendFatal = end {
        // The relay marked the link broken already; the hand-off closes it.
        return Departure::SessionOver { keeps_state: true };
    }
    Departure::SessionOver { keeps_state }
}

/// What the client is told when its session ends the way `end` says.
pub(super) fn end_result(end: RelayEnd, shutting_down: bool) -> Result<(), ClientError> {
    match end {
        _ if shutting_down => Err(ClientError::Shutdown),
        RelayEnd::Terminated | RelayEnd::ClientGone | RelayEnd::BackendFatal => Ok(()),
        RelayEnd::ClientViolation(v) => Err(ClientError::Protocol(v)),
        RelayEnd::BackendGone(why) => Err(ClientError::Refused(PgError::fatal(
            "08006",
            format!("server connection lost: {why}"),
        ))),
        RelayEnd::IdleInTransaction => Err(ClientError::Refused(PgError::fatal(
            "25P03",
            "terminating connection due to idle-in-transaction timeout (idle_transaction_timeout)",
        ))),
        RelayEnd::TransactionInStatementMode => Err(ClientError::Refused(PgError::fatal(
            "0A000",
            "transaction blocks are not allowed in statement pooling mode",
        ))),
    }
}
