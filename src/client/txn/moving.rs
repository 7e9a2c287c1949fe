//! A takeover's hand-over of a transaction-pooling client between
//! transactions: what it takes with it ([`MovedClient`]), and what a
//! handed-over client brings to its new session ([`Carried`]).
//!
//! Only a client that holds nothing in this process moves: no backend (so
//! no pin: temporary tables, LISTEN and the like live on the backend), no
//! byte of a message read, and a plain socket (a TLS session's state is in
//! this process's OpenSSL and cannot be sent).

use std::time::{Duration, SystemTime};

use super::statements::ClientStatements;
use super::Between;
use crate::backend::ParamSet;
use crate::listener::Transport;
use crate::protocol::sql::Strings;
use crate::protocol::FrameBuf;
use crate::stats::AuthKind;
use crate::stream::Stream;
use crate::takeover::moved::{hex, MovedClient, MovedStatement};
use crate::takeover::Outbox;

/// What a handed-over client brings besides what a login gives a session.
pub(crate) struct Carried {
    /// Its lasting SETs (see `ClientSettings`).
    pub(crate) session: Vec<(String, String)>,
    /// Its prepared statements, interned here.
    pub(crate) statements: ClientStatements,
    /// How its lexer reads backslashes.
    pub(crate) strings: Strings,
}

/// Who the client is, as the session loop knows it.
pub(super) struct Who<'a> {
    pub(super) user: &'a str,
    pub(super) transport: Transport,
    pub(super) auth: AuthKind,
}

impl Between<'_> {
    /// Where this client could be handed over, were a takeover on: None
    /// for one that must stay (pinned, TLS, refused before) or cannot
    /// move now (in the middle of a message).
    pub(super) fn outbox(&self, stream: &Stream) -> Option<&Outbox> {
        let stays = self.stays
            || self.pin.is_some()
            || stream.plain_fd().is_none()
            || !self.scan.at_boundary();
        (!stays).then_some(&self.pooler.handoff)
    }

    /// A handed-over client's settings, statements and lexer state.
    pub(super) fn restore(&mut self, carried: Option<Box<Carried>>) {
        if let Some(c) = carried {
            self.settings = std::mem::take(&mut self.settings).with_session(c.session);
            (self.statements, self.strings) = (c.statements, c.strings);
        }
    }

    /// Whether a takeover's new process is taking clients and this one may
    /// move now (nothing of a message buffered): the check before
    /// [`Between::hand_over`], whose future the idle loop then boxes, so
    /// that every idle client does not carry room for it.
    pub(super) fn movable_now(&self, stream: &Stream, buf: &FrameBuf) -> bool {
        self.outbox(stream).is_some_and(Outbox::is_open) && buf.is_empty()
    }

    /// Hands the client to a takeover's new process if one is taking
    /// clients and this one may move now (nothing of a message buffered);
    /// true when its socket is that process's now, and the session must
    /// end without a word to it.
    pub(super) async fn hand_over(
        &mut self,
        stream: &Stream,
        buf: &FrameBuf,
        who: Who<'_>,
    ) -> bool {
        let Some(fd) = stream.plain_fd().filter(|_| self.movable_now(stream, buf)) else {
            return false;
        };
        let lent = self.pool.lent_client_key(who.user);
        if lent.is_none() && self.pool.logs_in_with_lent_keys() {
            // The keys its pool logs in with came from another user's
            // login: the new process could not open a backend for it.
            self.stays = true;
            tracing::info!(
                "client stays on this process: its pool logs in with keys another login lent"
            );
            return false;
        }
        let mut moved = self.moved(who);
        moved.lent_client_key = lent.map(|k| hex(&k));
        match self.pooler.handoff.send(moved, fd).await {
            Ok(()) => {
                if let Some(m) = self.meter.as_mut() {
                    m.flush(None);
                }
                tracing::info!(
                    statements = self.statements.iter().count(),
                    "client handed over to the new process"
                );
                true
            }
            Err(e) => {
                // Once is enough: it drains here as any other client.
                self.stays = true;
                tracing::warn!(error = %e, "client cannot be handed over; it stays on this process");
                false
            }
        }
    }

    fn moved(&self, who: Who<'_>) -> MovedClient {
        let info = self.entry.info();
        let since_epoch = info
            .connected_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let pairs = |v: &[(String, String)]| v.to_vec();
        let [startup, session] = self.settings.parts();
        MovedClient {
            old_id: self.entry.id(),
            user: who.user.to_string(),
            database: self.entry.database().to_string(),
            transport: who.transport,
            peer: info.peer,
            application_name: info.application_name,
            connected_at_ms: since_epoch.as_millis() as u64,
            auth: who.auth,
            statement_mode: self.statement_mode,
            params: self
                .params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            startup: pairs(startup),
            session: pairs(session),
            statements: self
                .statements
                .iter()
                .map(|(name, s)| MovedStatement {
                    name: hex(name),
                    definition: hex(&s.definition),
                })
                .collect(),
            unnamed: self.statements.unnamed().map(hex),
            strings: self.strings,
            cancel_pid: self.cancel_key.pid,
            cancel_secret: self.cancel_key.secret,
            lent_client_key: None,
        }
    }
}

/// The parameter set a handed-over client was shown.
pub(crate) fn param_set(pairs: &[(String, String)]) -> ParamSet {
    let mut set = ParamSet::default();
    for (k, v) in pairs {
        set.set(k, v);
    }
    set
}

/// When a handed-over client logged in.
pub(crate) fn connected_at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}
