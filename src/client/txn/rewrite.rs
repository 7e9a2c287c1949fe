//! What the client → server direction does to each message in transaction
//! pooling: note the reply it earns, spot session state that must pin the
//! client, and map named prepared statements to the pooler's names on the
//! backend (preparing them there first when the backend lacks them).

#[cfg(test)]
use super::statements::ClientStatements;
use super::statements::{StatementRegistry, UNNAMED};
use crate::backend::owed::{Expect, Reply, Synthetic};
use crate::backend::prepared::statement_name;
use crate::backend::TxStatus;
use crate::client::relay::PREFIX_CAP;
use crate::client::relay::{account_plain, Shared};
use crate::protocol::frontend::split_cstr;
use crate::protocol::messages::{BindHead, Close, Describe, Parse, Target};
use crate::protocol::sql::{self, PinReason};
use crate::protocol::tags::{fe, target};
use crate::protocol::{PgError, Violation};

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
    /// Parameters the pooler follows itself (lower-case names).
    pub tracked: &'a (dyn Fn(&str) -> bool + Sync),
}

impl Rewriter<'_> {
    /// Forgets the names whose Parse the server refused or skipped.
    pub fn forget_undefined(&mut self, shared: &mut Shared<'_>) {
        for name in shared.undefined.drain(..) {
            shared.statements.close(&name);
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
                // Of an oversized query only its head is classified: what
                // pins is said by a statement's first words.
                self.classify(cstr_prefix(body), shared);
                // A simple Query drops the unnamed statement (exec_simple_query).
                shared.statements.drop_unnamed();
                shared.push(Expect::Client(Reply::Query));
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

    fn classify(&mut self, sql: &[u8], shared: &mut Shared<'_>) {
        let fx = sql::classify(sql, self.tracked);
        if let Some(r) = fx.pin {
            shared.pin(Pin::Sql(r));
        }
        if fx.drops_prepared {
            shared.ledger.prepared().clear();
            shared.cache_doubt = true;
            shared.statements.clear();
        }
    }

    fn parse(
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
        self.classify(query, shared);
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
        let stmt = self.registry.intern(definition);
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
    fn parse_oversized(
        &mut self,
        prefix: &[u8],
        shared: &mut Shared<'_>,
    ) -> Result<Outcome, Violation> {
        let name = Parse::name_in_prefix(prefix)?.ok_or_else(|| names_beyond_prefix("Parse"))?;
        let definition = prefix.get(name.len() + 1..).unwrap_or_default();
        self.classify(cstr_prefix(definition), shared);
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
    fn duplicate(&mut self, name: &[u8], shared: &mut Shared<'_>) -> Result<Outcome, Violation> {
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
        if name.is_empty() {
            self.unnamed_guard(shared, out);
        }
        let found = self.prepared_id(name, shared, out);
        shared.push(Expect::Client(Reply::Bind {
            stmt: found.map(|(_, serial)| serial),
        }));
        let id = found.map(|(id, _)| id);
        let Some(id) = id else {
            // A Close added ahead (in `out`) is sent before the message.
            return Ok(Outcome::Forward);
        };
        let mut new_name = Vec::with_capacity(24);
        statement_name(id, &mut new_name);
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
        if name.is_empty() {
            self.unnamed_guard(shared, out);
        }
        let found = self.prepared_id(name, shared, out);
        shared.push(Expect::Client(Reply::Describe {
            stmt: found.map(|(_, serial)| serial),
        }));
        let id = found.map(|(id, _)| id);
        let Some(id) = id else {
            // A Close added ahead (in `out`) is sent before the message.
            return Ok(Outcome::Forward);
        };
        let mut new_name = Vec::with_capacity(24);
        statement_name(id, &mut new_name);
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

/// The statement name of the pooler's throwaway checks (with its NUL), in
/// the pooler's `PGHARBOR_` namespace.
const CHECK_NAME: &[u8] = b"PGHARBOR_check\0";

/// Records `id` in the cache and writes a Close for each statement it evicts.
fn evict_for(id: u64, shared: &mut Shared<'_>, out: &mut Vec<u8>) {
    for old in shared.ledger.prepared().insert(id) {
        let mut name = Vec::with_capacity(24);
        statement_name(old, &mut name);
        name.push(0);
        put_msg(out, fe::CLOSE, &[&[target::STATEMENT], &name]);
        shared.push(Expect::Injected(Reply::Close { evicted: Some(old) }));
    }
}

/// Writes Parse of the pooler's statement `id`.
fn put_parse(out: &mut Vec<u8>, id: u64, definition: &[u8]) {
    let mut name = Vec::with_capacity(24);
    statement_name(id, &mut name);
    name.push(0);
    put_msg(out, fe::PARSE, &[&name, definition]);
}

/// Writes one message made of `parts`.
fn put_msg(out: &mut Vec<u8>, tag: u8, parts: &[&[u8]]) {
    let len: usize = 4 + parts.iter().map(|p| p.len()).sum::<usize>();
    out.push(tag);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    for p in parts {
        out.extend_from_slice(p);
    }
}

/// The text of a Query body (up to its NUL, or all of it if there is none).
fn cstr_prefix(body: &[u8]) -> &[u8] {
    split_cstr(body).map_or(body, |(s, _)| s)
}

/// The pooler's refusal of an oversized Parse or Bind whose names do not end
/// within the first [`PREFIX_CAP`] bytes it reads of it.
fn names_beyond_prefix(what: &str) -> Violation {
    Violation::new(format!(
        "{what} message with names over {PREFIX_CAP} bytes is not supported"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn run(msgs: &[Vec<u8>]) -> (Vec<Result<Outcome, Violation>>, Vec<u8>) {
        let whole: Vec<_> = msgs.iter().map(|m| (&m[..], true)).collect();
        run_parts(&whole)
    }

    /// Like [`run`], each message with its `whole` flag (false: the first
    /// bytes of a larger message, as the relay hands those over).
    fn run_parts(msgs: &[(&[u8], bool)]) -> (Vec<Result<Outcome, Violation>>, Vec<u8>) {
        let registry = StatementRegistry::default();
        let mut statements = ClientStatements::default();
        let tracked = |_: &str| false;
        let mut rw = Rewriter {
            registry: &registry,
            manage: true,
            tracked: &tracked,
        };
        let mut ledger = crate::backend::Ledger::new(4);
        let mut shared = Shared::new(&mut ledger, 1, &mut statements);
        let mut out = Vec::new();
        let results = msgs
            .iter()
            .map(|&(m, whole)| rw.message(m, whole, &mut shared, &mut out))
            .collect();
        (results, out)
    }

    #[test]
    fn named_statements_are_renamed_and_prepared_once() {
        let parse = msg(b'P', b"s1\0SELECT 1\0\0\0");
        let bind = msg(b'B', b"\0s1\0\0\0\0\0\0\0");
        let (r, out) = run(&[parse.clone(), bind, msg(b'S', b"")]);
        assert!(matches!(r[0], Ok(Outcome::Replaced { .. })));
        assert!(matches!(r[1], Ok(Outcome::Replaced { .. })));
        assert_eq!(r[2], Ok(Outcome::Forward));
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("PGHARBOR_"), "{text}");
        assert!(!text.contains("s1"), "{text}");
        // The same name again in one session: 42P05, answered by the pooler.
        let (r, _) = run(&[parse.clone(), msg(b'S', b""), parse]);
        assert_eq!(r[2], Ok(Outcome::Swallowed));
    }

    #[test]
    fn malformed_messages_go_to_the_server_as_they_are() {
        // PostgreSQL answers these with an ERROR (in pqformat's words, which
        // the views' own tests check) and the session goes on; the pooler
        // forwards them untouched and expects that reply.
        let cases = [
            msg(b'P', b"no terminator"),
            msg(b'P', b"s1\0unterminated query"),
            msg(b'P', b"s1\0SELECT 1\0"),
            msg(b'P', b"s1\0SELECT 1\0\0\0\0"),
            msg(b'B', b"portal only\0"),
            msg(b'B', b""),
            msg(b'D', b""),
            msg(b'D', b"Sname without nul"),
            msg(b'D', b"Xs1\0"),
            msg(b'C', b""),
            msg(b'C', b"S"),
            msg(b'C', b"Xs1\0"),
        ];
        for m in &cases {
            let (r, out) = run(std::slice::from_ref(m));
            assert_eq!(r[0], Ok(Outcome::Forward), "{}", m.escape_ascii());
            assert!(out.is_empty(), "{}: nothing added", m.escape_ascii());
        }
        for m in [vec![b'P', 0, 0], vec![]] {
            let (r, _) = run(std::slice::from_ref(&m));
            assert!(r[0].is_err(), "{m:?} has no header");
        }
    }

    #[test]
    fn portals_are_described_and_closed_by_the_server() {
        let (r, out) = run(&[
            msg(b'D', b"P\0"),
            msg(b'D', b"Pc1\0"),
            msg(b'C', b"Pc1\0"),
            msg(b'C', b"S\0"),
            msg(b'D', b"S\0"),
        ]);
        assert!(r.iter().all(|r| *r == Ok(Outcome::Forward)), "{r:?}");
        assert!(out.is_empty());
    }

    /// The head of a message of `total` bytes that declares its whole length.
    fn head(tag: u8, total: usize, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&((total - 1) as u32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn oversized_messages_are_read_by_their_names() {
        let total = 2 << 20;
        let mut bind_body = b"\0s1\0".to_vec();
        bind_body.resize(PREFIX_CAP, 7);
        let bind = head(b'B', total, &bind_body);
        let parse = msg(b'P', b"s1\0SELECT $1\0\0\0");
        let (r, out) = run_parts(&[(&parse, true), (&bind, false)]);
        assert!(matches!(r[0], Ok(Outcome::Replaced { .. })), "{:?}", r[0]);
        assert_eq!(
            r[1],
            Ok(Outcome::Replaced {
                consumed: bind.len()
            })
        );
        // The new Bind: its declared length grows by the longer name, and the
        // bytes after the names follow unchanged.
        assert_eq!(out[0], fe::PARSE);
        let new = &out[1 + u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize..];
        assert_eq!(new[0], fe::BIND);
        let renamed = b"\0PGHARBOR_";
        assert_eq!(&new[5..5 + renamed.len()], renamed);
        let grown = u32::from_be_bytes([new[1], new[2], new[3], new[4]]) as usize;
        let name_len = new[6..].iter().position(|&b| b == 0).unwrap_or(0);
        assert_eq!(grown, total - 1 + name_len - 2);
        assert!(new.ends_with(&[7; 64]));

        // An oversized named Parse passes as it is (the client is pinned).
        let mut parse_body = b"big\0SELECT ".to_vec();
        parse_body.resize(PREFIX_CAP, b'1');
        let parse = head(b'P', total, &parse_body);
        let (r, out) = run_parts(&[(&parse, false)]);
        assert_eq!(r[0], Ok(Outcome::Forward));
        assert!(out.is_empty());

        // Names that do not end within the prefix are refused.
        let long = head(b'P', total, &vec![b'n'; PREFIX_CAP]);
        let (r, _) = run_parts(&[(&long, false)]);
        let e = r[0].clone().expect_err("accepted a Parse name over 64 KiB");
        assert!(e.0.starts_with("Parse message with names over"), "{e}");
        let mut body = b"portal\0".to_vec();
        body.resize(PREFIX_CAP, b'n');
        let long = head(b'B', total, &body);
        let (r, _) = run_parts(&[(&long, false)]);
        let e = r[0].clone().expect_err("accepted a Bind name over 64 KiB");
        assert!(e.0.starts_with("Bind message with names over"), "{e}");
    }

    #[test]
    fn random_messages_never_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..5000 {
            let tag = b"PBDCQSEHFdcf"[(next() % 12) as usize];
            let len = (next() % 40) as usize;
            let body: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => 0,
                    1 => b'S',
                    _ => (next() % 256) as u8,
                })
                .collect();
            let _ = run(&[msg(tag, &body), msg(b'S', b"")]);
        }
    }

    #[test]
    fn server_errors_get_the_clients_statement_name_back() {
        let body = b"SERROR\0VERROR\0C08P01\0Mbind message supplies 1 parameters, but prepared statement \"PGHARBOR_6\" requires 0\0Fpostgres.c\0\0";
        let out = error_with_client_name(body, 6, b"s6").expect("renamed");
        assert_eq!(out[0], b'E');
        assert_eq!(
            u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize,
            out.len() - 1
        );
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("prepared statement \"s6\" requires 0"),
            "{text}"
        );
        assert!(!text.contains("PGHARBOR"), "{text}");
        assert!(text.contains("Fpostgres.c"), "{text}");
        // Another statement's name, or none, is left alone.
        assert_eq!(error_with_client_name(body, 7, b"s7"), None);
        assert_eq!(error_with_client_name(b"SERROR\0Mx\0\0", 6, b"s6"), None);
    }
}
