//! What the client → server direction does to each message in transaction
//! pooling: note the reply it earns, spot session state that must pin the
//! client, and map named prepared statements to the pooler's names on the
//! backend (preparing them there first when the backend lacks them).

mod parse;
#[cfg(test)]
mod tests;
mod wire;

use wire::{cstr_prefix, evict_for, names_beyond_prefix, put_msg, put_parse};

use crate::backend::owed::{Expect, Reply, Synthetic};
use crate::backend::prepared::statement_name;
use crate::client::relay::PREFIX_CAP;
use crate::client::relay::{account_plain, Shared};
use crate::protocol::messages::{BindHead, Close, Describe, Target};
use crate::protocol::sql::{self, PinReason};
use crate::protocol::tags::{fe, target};
use crate::protocol::Violation;
use crate::registry::StatementRegistry;

/// Why a client keeps its backend until it disconnects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// Its SQL left session state behind.
    Sql(PinReason),
    /// It prepared a named statement while `pool.max_prepared_statements` is 0.
    NamedStatement,
    /// It prepared a named statement too large for the pooler to share.
    LargeStatement,
}

impl Pin {
    /// Short text for logs.
    pub fn describe(self) -> &'static str {
        match self {
            Pin::Sql(r) => r.describe(),
            Pin::NamedStatement => "named prepared statement (max_prepared_statements = 0)",
            Pin::LargeStatement => "named prepared statement over 1 MiB",
        }
    }
}

/// What became of one client message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Send it on unchanged.
    Forward,
    /// Its replacement (and anything the pooler added) is in `out`; for a
    /// message only partly buffered, `consumed` bytes of it were rewritten
    /// and the rest follows unchanged.
    Replaced {
        /// Bytes of the original message the replacement stands for.
        consumed: usize,
    },
    /// Answered by the pooler; nothing goes to the server.
    Swallowed,
}

/// The client's side of the rewriting.
pub struct Rewriter<'a> {
    /// Pooler-wide statement ids.
    pub registry: &'a StatementRegistry,
    /// False when `max_prepared_statements` is 0: names pass untouched and pin.
    pub manage: bool,
    /// `pool.prepared_statement_bytes`: the pooler-wide budget.
    pub budget: usize,
    /// `pool.prepared_statement_bytes_per_client`.
    pub client_budget: usize,
    /// Parameters the pooler follows itself (lower-case names).
    pub tracked: &'a (dyn Fn(&str) -> bool + Sync),
}

impl Rewriter<'_> {
    /// Forgets the names whose Parse the server refused or skipped.
    pub fn forget_undefined(&mut self, shared: &mut Shared<'_>) {
        for name in shared.undefined.drain(..) {
            shared.statements.close(&name);
        }
        for id in shared.retired.drain(..) {
            self.registry.retire(id);
        }
    }

    /// Handles one message: `msg` is the message from its tag on; `whole`
    /// says it is all there (a message larger than the relay reads whole
    /// comes as its first bytes, at least the relay's prefix cap, and the
    /// rest follows unchanged). Replacement bytes go to `out`.
    pub fn message(
        &mut self,
        msg: &[u8],
        whole: bool,
        shared: &mut Shared<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, Violation> {
        let (Some(&tag), Some(body)) = (msg.first(), msg.get(5..)) else {
            return Err(Violation::new("message shorter than its header"));
        };
        if shared.skipping_to_sync {
            if tag != fe::SYNC {
                return Ok(Outcome::Swallowed);
            }
            shared.skipping_to_sync = false;
        }
        let handled = match tag {
            fe::QUERY => {
                let follows = if whole {
                    self.classify(cstr_prefix(body), shared, true)
                } else {
                    // What a text says may be anywhere in it.
                    shared.pin(Pin::Sql(PinReason::TooLarge));
                    false
                };
                // A simple Query drops the unnamed statement (exec_simple_query).
                shared.statements.drop_unnamed();
                shared.push(Expect::Client(Reply::Query { follows }));
                Ok(Outcome::Forward)
            }
            fe::PARSE if whole => self.parse(body, shared, out),
            fe::PARSE => self.parse_oversized(body, shared),
            fe::BIND => self.bind(msg, whole, shared, out),
            fe::DESCRIBE => self.describe(body, shared, out),
            fe::CLOSE => self.close(body, shared),
            t => {
                account_plain(t, shared);
                Ok(Outcome::Forward)
            }
        };
        match handled {
            Ok(o) => Ok(o),
            // A message the pooler cannot read goes to the server as it is:
            // PostgreSQL answers it with its own ERROR and the session goes
            // on, as on a direct connection. (The views refuse before the
            // rewriter records anything.)
            Err(_) if whole => {
                out.clear();
                account_plain(tag, shared);
                Ok(Outcome::Forward)
            }
            Err(v) => Err(v),
        }
    }

    /// Reads what `sql` does to the session: pins the client, or (for a
    /// simple Query, `followable`) follows its SETs and RESETs. True when
    /// the Query's outcome must be reported (it changes followed settings).
    fn classify(&mut self, sql: &[u8], shared: &mut Shared<'_>, followable: bool) -> bool {
        let fx = sql::classify(sql, shared.strings, self.tracked);
        if let Some(r) = fx.pin {
            shared.pin(Pin::Sql(r));
        }
        if fx.changes_strings {
            shared.strings = sql::Strings::Unknown;
        }
        if fx.drops_prepared {
            shared.ledger.prepared().clear();
            shared.cache_doubt = true;
            shared.statements.clear();
        }
        if fx.savepoint {
            // A ROLLBACK TO, RELEASE or PREPARE TRANSACTION decides what
            // lasts of settings made before it in ways not followed here.
            if shared.follow.pending() {
                shared.pin(Pin::Sql(PinReason::SessionSet));
            }
            shared.follow.saw_savepoint();
        }
        if fx.settings.is_empty() {
            return false;
        }
        // Which settings last depends on where each falls among the
        // transaction commands of one text, or on savepoints; a Parse's
        // statement runs when executed, which is not followed: pin.
        if !followable || fx.controls_transaction || shared.follow.savepoint_seen() {
            shared.pin(Pin::Sql(PinReason::SessionSet));
            return false;
        }
        shared.follow.sent(fx.settings);
        true
    }

    /// A Bind, whole or (`whole` false) its first bytes: only the names
    /// at its start are read, the rest is carried over unread.
    fn bind(
        &mut self,
        msg: &[u8],
        whole: bool,
        shared: &mut Shared<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, Violation> {
        let (Some(body), Some(len)) = (msg.get(5..), msg.get(1..5)) else {
            return Err(Violation::new("message shorter than its header"));
        };
        let total_len = crate::protocol::be_u32(len) as usize;
        let BindHead {
            portal,
            statement: name,
            rest_at,
        } = match BindHead::parse(body)? {
            Some(head) => head,
            // PostgreSQL's words when a name has no NUL in the message.
            None if whole => return Err(Violation::new("invalid string in message")),
            None => return Err(names_beyond_prefix("Bind")),
        };
        let reply = |stmt| Reply::Bind { stmt };
        let Some(new_name) = self.backend_name(name, reply, shared, out) else {
            // A Close added ahead (in `out`) is sent before the message.
            return Ok(Outcome::Forward);
        };
        let new_len = (total_len + new_name.len())
            .checked_sub(name.len())
            .ok_or_else(|| Violation::new("invalid message format"))?;
        out.push(fe::BIND);
        out.extend_from_slice(&(new_len as u32).to_be_bytes());
        out.extend_from_slice(portal);
        out.push(0);
        out.extend_from_slice(&new_name);
        out.push(0);
        out.extend_from_slice(body.get(rest_at..).unwrap_or_default());
        Ok(Outcome::Replaced {
            consumed: msg.len(),
        })
    }

    /// Before a message that uses the unnamed statement: make the backend
    /// hold exactly what the client's own session would. Its current
    /// definition is parsed again if the backend lacks it; another
    /// client's (or a stale one) is closed, so the client gets 26000
    /// The statement a Bind or Describe names, as the backend knows it:
    /// guards the unnamed statement, prepares a named one the backend
    /// lacks (into `out`), and records the reply (`reply` given which of
    /// the client's definitions it is). `None` when the name passes as it
    /// is (unnamed, or not the pooler's).
    fn backend_name(
        &mut self,
        name: &[u8],
        reply: impl Fn(Option<u64>) -> Reply,
        shared: &mut Shared<'_>,
        out: &mut Vec<u8>,
    ) -> Option<Vec<u8>> {
        if name.is_empty() {
            self.unnamed_guard(shared, out);
        }
        let found = self.prepared_id(name, shared, out);
        shared.push(Expect::Client(reply(found.map(|(_, serial)| serial))));
        let (id, _) = found?;
        let mut new_name = Vec::with_capacity(24);
        statement_name(id, &mut new_name);
        Some(new_name)
    }

    /// "unnamed prepared statement does not exist" as in a fresh session.
    fn unnamed_guard(&self, shared: &mut Shared<'_>, out: &mut Vec<u8>) {
        let mine = shared.statements.unnamed_key(shared.client_id);
        let held = shared.ledger.unnamed();
        if held == mine {
            return;
        }
        if let Some(definition) = shared.statements.unnamed() {
            // The client's own, from an earlier transaction elsewhere.
            put_msg(out, fe::PARSE, &[b"\0", definition]);
            shared.push(Expect::Injected(Reply::Parse {
                id: None,
                def: None,
            }));
        } else {
            // Another client's, one this client no longer has, or one too
            // large to keep that lives on another backend.
            put_msg(out, fe::CLOSE, &[&[target::STATEMENT], b"\0"]);
            shared.push(Expect::Injected(Reply::Close { evicted: None }));
        }
        shared.ledger.set_unnamed(mine);
    }

    fn describe(
        &mut self,
        body: &[u8],
        shared: &mut Shared<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, Violation> {
        let Describe { target: kind, name } = Describe::parse(body)?;
        if kind != Target::Statement {
            shared.push(Expect::Client(Reply::Describe { stmt: None }));
            return Ok(Outcome::Forward);
        }
        let reply = |stmt| Reply::Describe { stmt };
        let Some(mut new_name) = self.backend_name(name, reply, shared, out) else {
            // A Close added ahead (in `out`) is sent before the message.
            return Ok(Outcome::Forward);
        };
        new_name.push(0);
        put_msg(out, fe::DESCRIBE, &[&[target::STATEMENT], &new_name]);
        Ok(Outcome::Replaced {
            consumed: body.len() + 5,
        })
    }

    fn close(&mut self, body: &[u8], shared: &mut Shared<'_>) -> Result<Outcome, Violation> {
        let Close { target: kind, name } = Close::parse(body)?;
        if kind == Target::Statement && name.is_empty() {
            shared.statements.drop_unnamed();
            shared.ledger.set_unnamed(None);
        }
        // The backend keeps the statement for other clients; the LRU closes it.
        if kind == Target::Statement
            && !name.is_empty()
            && self.manage
            && shared.statements.close(name)
        {
            shared.push(Expect::Owed(Synthetic::CloseComplete));
            return Ok(Outcome::Swallowed);
        }
        shared.push(Expect::Client(Reply::Close { evicted: None }));
        Ok(Outcome::Forward)
    }

    /// The pooler id (and the definition serial) of the client's statement `name`, prepared on the
    /// backend first if it lacks it; `None` for the unnamed statement and
    /// names the pooler does not manage (the server answers for those).
    fn prepared_id(
        &self,
        name: &[u8],
        shared: &mut Shared<'_>,
        out: &mut Vec<u8>,
    ) -> Option<(u64, u64)> {
        if name.is_empty() || !self.manage {
            return None;
        }
        let (stmt, serial) = shared.statements.get_with_serial(name)?;
        let stmt = stmt.clone();
        if !shared.ledger.prepared().touch(stmt.id) {
            evict_for(stmt.id, shared, out);
            put_parse(out, stmt.id, &stmt.definition);
            shared.push(Expect::Injected(Reply::Parse {
                id: Some(stmt.id),
                def: None,
            }));
        }
        Some((stmt.id, serial))
    }
}

/// The ErrorResponse `body` with the pooler's name for statement `id`
/// (`"PGHARBOR_<id>"`, as PostgreSQL quotes it) put back to the client's
/// `name`, as a whole message; `None` if the error does not name it.
pub fn error_with_client_name(body: &[u8], id: u64, name: &[u8]) -> Option<Vec<u8>> {
    let mut ours = b"\"".to_vec();
    statement_name(id, &mut ours);
    ours.push(b'"');
    let fields = crate::protocol::messages::Fields::new(body);
    if !fields
        .iter()
        .any(|(_, v)| v.windows(ours.len()).any(|w| w == ours.as_slice()))
    {
        return None;
    }
    let mut theirs = b"\"".to_vec();
    theirs.extend_from_slice(name);
    theirs.push(b'"');
    let mut out = vec![crate::protocol::tags::be::ERROR_RESPONSE, 0, 0, 0, 0];
    for (code, mut value) in fields.iter() {
        out.push(code);
        while let Some(at) = value.windows(ours.len()).position(|w| w == ours.as_slice()) {
            out.extend_from_slice(&value[..at]);
            out.extend_from_slice(&theirs);
            value = &value[at + ours.len()..];
        }
        out.extend_from_slice(value);
        out.push(0);
    }
    out.push(0);
    let len = u32::try_from(out.len() - 1).ok()?;
    out[1..5].copy_from_slice(&len.to_be_bytes());
    Some(out)
}
