//! A logged-in client holding its backend (session pooling): the relay and
//! the hand-back.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use super::{cancel, registry, relay, ClientError, ClientState, Meter, RelayEnd};
use crate::backend::send_cancel;
use crate::pool::Lease;
use crate::pooler::Pooler;
use crate::protocol::scan::Scanner;
use crate::protocol::{FrameBuf, PgError};
use crate::stats::Class;
use crate::stream::Stream;
use crate::tls::Transport;

/// A logged-in client holding its backend (session pooling).
pub(super) struct Session {
    /// The pool mode resolved at login (user > database > pool.mode).
    pub(super) pool_mode: crate::config::PoolMode,
    /// The backend, when the login needed one (always in session pooling).
    pub(super) lease: Option<Lease>,
    /// The parameters the client was shown at login.
    pub(super) params: Arc<crate::backend::ParamSet>,
    /// Startup parameters the server does not report (SET per backend in
    /// transaction pooling).
    pub(super) extras: Vec<(String, String)>,
    pub(super) cancel_key: cancel::CancelKey,
    pub(super) _permit: OwnedSemaphorePermit,
    pub(super) entry: registry::ClientEntry,
    pub(super) user: String,
    pub(super) database: String,
    pub(super) transport: Transport,
}

impl Session {
    /// Relays until the client leaves, then returns the backend.
    pub(super) async fn relay(
        mut self,
        stream: &mut Stream,
        buf: &mut FrameBuf,
        pooler: &Arc<Pooler>,
    ) -> Result<(), ClientError> {
        let Some(lease) = self.lease.take() else {
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
        let shutdown = pooler.terminate_token();
        let killed = lease.pool().kill_token();
        let client_class = Class::client(self.transport, stream.is_tls());
        let mut meter = Meter::new(&pooler.stats, client_class, lease.backend().class());
        let (end, idle) = {
            let (mut cr, mut cw) = stream.split();
            let backend = lease.backend();
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
            let target = lease.backend().cancel.clone();
            tokio::spawn(async move {
                let _ = send_cancel(&target).await;
            });
        }
        lease.release(idle && clean_end && !shutting_down);
        end_result(end, shutting_down)
    }
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
