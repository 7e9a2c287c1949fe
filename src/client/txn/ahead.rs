//! Parse without a backend: a client holding no backend that prepares named
//! statements the pooler already knows (any client prepared the same text
//! and parameter types) is answered by the pooler, ParseComplete for each
//! and ReadyForQuery for the Sync, and takes no backend. The statement is
//! prepared on a backend the first time it is bound or described there.
//!
//! A synchronous client (libpq's PQprepare, `pgbench -M prepared`) whose
//! other connections hold every backend mid-transaction would otherwise
//! wait for a backend they can only free once it returns. If the server
//! would now refuse the text (the schema changed), its error comes where
//! the statement is first used, as that statement's error.

use bytes::BytesMut;

use super::statements::ClientStatements;
use crate::protocol::messages::{Parse, TxStatus};
use crate::protocol::scan::Scanner;
use crate::protocol::server;
use crate::protocol::sql::{self, Strings};
use crate::protocol::tags::{be, fe};
use crate::registry::StatementRegistry;

/// What the pooler needs to answer Parses ahead.
pub struct Ahead<'a> {
    /// Pooler-wide statements.
    pub registry: &'a StatementRegistry,
    /// `pool.prepared_statement_bytes_per_client`.
    pub client_budget: usize,
    /// How the client's SQL reads.
    pub strings: Strings,
    /// Parameters the pooler follows from reports.
    pub tracked: &'a (dyn Fn(&str) -> bool + Sync),
}

impl Ahead<'_> {
    /// When `data` starts with named Parses of known statements and a Sync
    /// (and nothing else), defines them for the client, writes the replies
    /// to `out` and returns how many bytes were answered.
    pub fn answer(
        &self,
        data: &[u8],
        statements: &mut ClientStatements,
        out: &mut BytesMut,
    ) -> Option<usize> {
        let mut pos = 0;
        let mut found = Vec::new();
        loop {
            let total = Scanner::peek_total(data, pos)?;
            let msg = data.get(pos..pos + total)?;
            match msg[0] {
                fe::PARSE => {
                    let p = Parse::parse(&msg[5..]).ok()?;
                    if p.name.is_empty() || !self.harmless(p.query) {
                        return None;
                    }
                    let known = self.registry.get(p.definition)?;
                    let taken =
                        statements.get(p.name).is_some() || found.iter().any(|(n, _)| *n == p.name);
                    if taken
                        || statements
                            .over_budget(p.name, p.definition, self.client_budget)
                            .is_some()
                    {
                        // The server path gives the errors.
                        return None;
                    }
                    found.push((p.name, known));
                }
                fe::SYNC if !found.is_empty() => {
                    for (name, stmt) in found {
                        statements.define(name, stmt);
                        out.extend_from_slice(&[be::PARSE_COMPLETE, 0, 0, 0, 4]);
                    }
                    server::ready_for_query(out, TxStatus::Idle);
                    return Some(pos + total);
                }
                _ => return None,
            }
            pos += total;
        }
    }

    /// True when preparing `query` leaves no state a backend must see.
    fn harmless(&self, query: &[u8]) -> bool {
        let fx = sql::classify(query, self.strings, self.tracked);
        fx.pin.is_none() && fx.settings.is_empty() && !fx.drops_prepared && !fx.changes_strings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn parse(name: &str, sql: &str) -> Vec<u8> {
        msg(fe::PARSE, format!("{name}\0{sql}\0\0\0").as_bytes())
    }

    #[test]
    fn known_statements_are_answered_and_anything_else_goes_to_a_backend() {
        let registry = StatementRegistry::default();
        let known = registry.intern(b"SELECT 1\0\0\0", 1 << 20).unwrap();
        let tracked = |_: &str| false;
        let ahead = Ahead {
            registry: &registry,
            client_budget: 1 << 20,
            strings: Strings::Standard,
            tracked: &tracked,
        };
        let sync = msg(fe::SYNC, b"");
        let mut mine = ClientStatements::default();
        let mut out = BytesMut::new();
        let batch = [parse("a", "SELECT 1"), parse("b", "SELECT 1"), sync.clone()].concat();
        assert_eq!(ahead.answer(&batch, &mut mine, &mut out), Some(batch.len()));
        assert_eq!(&out[..], b"1\0\0\0\x041\0\0\0\x04Z\0\0\0\x05I");
        assert_eq!(mine.get(b"a").map(|s| s.id), Some(known.id));
        for refused in [
            [parse("c", "SELECT 2"), sync.clone()].concat(),
            [parse("a", "SELECT 1"), sync.clone()].concat(),
            [parse("", "SELECT 1"), sync.clone()].concat(),
            [parse("d", "SELECT 1"), msg(fe::FLUSH, b"")].concat(),
            parse("d", "SELECT 1"),
            sync.clone(),
            [parse("d", "SELECT 1"), parse("d", "SELECT 1"), sync.clone()].concat(),
        ] {
            let mut out = BytesMut::new();
            assert_eq!(ahead.answer(&refused, &mut mine, &mut out), None);
            assert!(out.is_empty());
        }
        let _held = registry
            .intern(b"SET search_path = x\0\0\0", 1 << 20)
            .unwrap();
        let set = [parse("e", "SET search_path = x"), sync].concat();
        assert_eq!(
            ahead.answer(&set, &mut mine, &mut out),
            None,
            "a pinning text needs its backend"
        );
    }
}
