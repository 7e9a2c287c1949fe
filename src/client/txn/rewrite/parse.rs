//! The Parse message: a client's named statement becomes the pooler's
//! shared one, prepared on the backend only when the backend lacks it.

use super::wire::{evict_for, names_beyond_prefix, put_msg, put_parse, CHECK_NAME};
use super::{Outcome, Pin, Rewriter};
use crate::backend::owed::{Expect, Reply, Synthetic};
use crate::backend::TxStatus;
use crate::client::relay::Shared;
use crate::client::txn::statements::UNNAMED;
use crate::protocol::messages::Parse;
use crate::protocol::sql::{self, PinReason};
use crate::protocol::tags::{fe, target};
use crate::protocol::{PgError, Violation};

impl Rewriter<'_> {
    pub(super) fn parse(
        &mut self,
        body: &[u8],
        shared: &mut Shared<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, Violation> {
        let Parse {
            name,
            query,
            definition,
            ..
        } = Parse::parse(body)?;
        self.classify(query, shared, false);
        if name.is_empty() {
            // Kept so a later transaction on another backend finds it, as
            // the client's own session would; if this Parse fails or is
            // skipped the client has none (see `UNNAMED`).
            shared.statements.set_unnamed(definition);
            let key = shared.statements.unnamed_key(shared.client_id);
            shared.ledger.set_unnamed(key);
            shared.push(Expect::Client(Reply::Parse {
                id: None,
                def: Some(UNNAMED),
            }));
            return Ok(Outcome::Forward);
        }
        if !self.manage {
            shared.pin(Pin::NamedStatement);
            shared.push(Expect::Client(Reply::Parse {
                id: None,
                def: None,
            }));
            return Ok(Outcome::Forward);
        }
        if shared.statements.get(name).is_some() {
            return self.duplicate(name, shared);
        }
        if let Some(e) = shared
            .statements
            .over_budget(name, definition, self.client_budget)
        {
            return Ok(self.owe_error(e, shared));
        }
        let stmt = match self.registry.intern(definition, self.budget) {
            Ok(s) => s,
            Err(e) => return Ok(self.owe_error(e, shared)),
        };
        if !shared.statements.define(name, stmt.clone()) {
            // As PostgreSQL: ERROR 42P05, then everything up to Sync is skipped.
            return self.duplicate(name, shared);
        }
        let serial = shared
            .statements
            .get_with_serial(name)
            .map_or(0, |(_, s)| s);
        shared.defined.push((serial, name.into()));
        let ledger = &shared.ledger;
        if ledger.tx() == TxStatus::Failed
            && ledger.owed().is_empty()
            && !sql::ends_failed_transaction(query)
        {
            // The server would refuse this Parse; answering it from the
            // cache would not. (With replies owed the status may be stale:
            // then the backend is asked.)
            shared.statements.close(name);
            shared.defined.pop();
            return Ok(self.owe_error(
                PgError::error(
                    "25P02",
                    "current transaction is aborted, commands ignored until end of transaction block",
                ),
                shared,
            ));
        }
        if shared.ledger.prepared().touch(stmt.id) {
            if shared.ledger.owed().is_empty() {
                // Nothing pending can make the server skip or refuse it.
                shared.push(Expect::Owed(Synthetic::ParseComplete { def: serial }));
                return Ok(Outcome::Swallowed);
            }
            // Pipelined behind replies still owed, an error there may make
            // the server skip this Parse, or refuse it in a failed
            // transaction: let the server decide, on a throwaway copy (the
            // backend keeps its own), closed straight after.
            put_msg(out, fe::PARSE, &[CHECK_NAME, definition]);
            shared.push(Expect::Client(Reply::Check { def: serial }));
            put_msg(out, fe::CLOSE, &[&[target::STATEMENT], CHECK_NAME]);
            shared.push(Expect::Injected(Reply::Close { evicted: None }));
            return Ok(Outcome::Replaced {
                consumed: body.len() + 5,
            });
        }
        evict_for(stmt.id, shared, out);
        put_parse(out, stmt.id, definition);
        shared.push(Expect::Client(Reply::Parse {
            id: Some(stmt.id),
            def: Some(serial),
        }));
        Ok(Outcome::Replaced {
            consumed: body.len() + 5,
        })
    }

    /// A Parse too large to read whole passes unchanged: the unnamed
    /// statement as it is, a named one under the client's own name, which
    /// the pooler cannot share between backends, so the client keeps this
    /// one.
    pub(super) fn parse_oversized(
        &mut self,
        prefix: &[u8],
        shared: &mut Shared<'_>,
    ) -> Result<Outcome, Violation> {
        let name = Parse::name_in_prefix(prefix)?.ok_or_else(|| names_beyond_prefix("Parse"))?;
        // What a statement does may be said anywhere in it.
        shared.pin(Pin::Sql(PinReason::TooLarge));
        if name.is_empty() {
            // Too large to keep: usable on this backend only.
            shared.statements.set_unnamed_unkept();
            let key = shared.statements.unnamed_key(shared.client_id);
            shared.ledger.set_unnamed(key);
        } else {
            if self.manage && shared.statements.get(name).is_some() {
                // The name is taken among the pooler's statements.
                return self.duplicate(name, shared);
            }
            shared.pin(Pin::LargeStatement);
        }
        shared.push(Expect::Client(Reply::Parse {
            id: None,
            def: None,
        }));
        Ok(Outcome::Forward)
    }

    /// The pooler's 42P05 for a name the client already defined.
    pub(super) fn duplicate(
        &mut self,
        name: &[u8],
        shared: &mut Shared<'_>,
    ) -> Result<Outcome, Violation> {
        let e = PgError::error(
            "42P05",
            format!(
                "prepared statement \"{}\" already exists",
                String::from_utf8_lossy(name)
            ),
        );
        Ok(self.owe_error(e, shared))
    }

    /// Answers the client's message with `e` as PostgreSQL would: the
    /// error, then everything up to the client's Sync is skipped.
    fn owe_error(&self, e: PgError, shared: &mut Shared<'_>) -> Outcome {
        let mut bytes = bytes::BytesMut::new();
        e.encode(&mut bytes);
        shared.push(Expect::Owed(Synthetic::Error(bytes.to_vec().into())));
        shared.skipping_to_sync = true;
        Outcome::Swallowed
    }
}
