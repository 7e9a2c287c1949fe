//! Target `rewrite`: the transaction-pooling rewriter on a stream of client
//! messages, well-formed or mangled. It never panics; it never refuses a
//! well-formed message (a mangled one it cannot read goes to the server
//! unchanged); whatever it sends the server is a run of whole,
//! correctly framed messages; with statement management on, a well-formed
//! Parse never reaches the server under the client's name (only the unnamed
//! statement and the pooler's `PGHARBOR_` names go out); and the books it
//! keeps (the owed-reply queue) stay within what was sent.
//!
//! Input: per message, one byte picks the type and the names, one the
//! query, one whether (and how) to mangle it.

use super::{ensure, Failure};
use crate::backend::Ledger;
use crate::client::relay::Shared;
use crate::client::txn::rewrite::{Outcome, Rewriter};
use crate::client::txn::statements::ClientStatements;
use crate::protocol::tags::fe;
use crate::registry::StatementRegistry;

const NAMES: &[&[u8]] = &[b"", b"s1", b"s2", b"a_long_statement_name_0123456789"];
const QUERIES: &[&[u8]] = &[
    b"SELECT 1",
    b"SELECT $1::int",
    b"SET search_path = x",
    b"DISCARD ALL",
    b"LISTEN chan",
    b"BEGIN",
    b"COMMIT",
    b"CREATE TEMP TABLE t(x int)",
];

fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn cstr(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(s);
    out.push(0);
}

/// One well-formed client message from two input bytes.
fn message(pick: u8, q: u8) -> Vec<u8> {
    let name = NAMES[usize::from(pick >> 4) % NAMES.len()];
    let query = QUERIES[usize::from(q) % QUERIES.len()];
    let mut b = Vec::new();
    let tag = match pick % 10 {
        0 => {
            cstr(&mut b, query);
            fe::QUERY
        }
        1 | 2 => {
            cstr(&mut b, name);
            cstr(&mut b, query);
            let types: u16 = u16::from(q & 1);
            b.extend_from_slice(&types.to_be_bytes());
            if types == 1 {
                b.extend_from_slice(&23u32.to_be_bytes());
            }
            fe::PARSE
        }
        3 | 4 => {
            cstr(&mut b, b"");
            cstr(&mut b, name);
            b.extend_from_slice(&0u16.to_be_bytes());
            b.extend_from_slice(&1u16.to_be_bytes());
            b.extend_from_slice(&1u32.to_be_bytes());
            b.push(b'7');
            b.extend_from_slice(&0u16.to_be_bytes());
            fe::BIND
        }
        5 => {
            b.push(if q & 1 == 0 { b'S' } else { b'P' });
            cstr(&mut b, name);
            fe::DESCRIBE
        }
        6 => {
            cstr(&mut b, b"");
            b.extend_from_slice(&0i32.to_be_bytes());
            fe::EXECUTE
        }
        7 => {
            b.push(if q & 1 == 0 { b'S' } else { b'P' });
            cstr(&mut b, name);
            fe::CLOSE
        }
        8 => fe::FLUSH,
        _ => fe::SYNC,
    };
    frame(tag, &b)
}

/// Checks `out` is a run of whole messages and returns their (tag, body).
fn frames(out: &[u8]) -> Result<Vec<(u8, &[u8])>, Failure> {
    let mut v = Vec::new();
    let mut at = 0;
    while at < out.len() {
        ensure!(out.len() - at >= 5, "a message header cut short at {at}");
        let len = u32::from_be_bytes([out[at + 1], out[at + 2], out[at + 3], out[at + 4]]) as usize;
        ensure!(
            len >= 4 && at + 1 + len <= out.len(),
            "bad length {len} at {at}"
        );
        v.push((out[at], &out[at + 5..at + 1 + len]));
        at += 1 + len;
    }
    Ok(v)
}

/// The statement name a rewritten message names, if it names one.
fn statement_named(tag: u8, body: &[u8]) -> Option<&[u8]> {
    let first = |b: &'_ [u8]| b.iter().position(|&c| c == 0);
    match tag {
        fe::PARSE => first(body).map(|i| &body[..i]),
        fe::BIND => {
            let p = first(body)?;
            let rest = &body[p + 1..];
            first(rest).map(|i| &rest[..i])
        }
        fe::DESCRIBE | fe::CLOSE if body.first() == Some(&b'S') => {
            let rest = &body[1..];
            first(rest).map(|i| &rest[..i])
        }
        _ => None,
    }
}

/// The `rewrite` target.
pub fn check(data: &[u8]) -> Result<(), Failure> {
    let registry = StatementRegistry::default();
    let mut statements = ClientStatements::default();
    let tracked = |_: &str| false;
    let manage = data.first().is_none_or(|b| b & 1 == 0);
    let mut rw = Rewriter {
        registry: &registry,
        manage,
        budget: 1 << 20,
        client_budget: 1 << 16,
        tracked: &tracked,
    };
    let mut ledger = Ledger::new(3);
    let mut shared = Shared::new(&mut ledger, 1, &mut statements);
    let mut rep = Vec::new();
    for (i, chunk) in data.get(1..).unwrap_or(&[]).chunks(3).enumerate() {
        let [pick, q, mangle] = [0, 1, 2].map(|k| chunk.get(k).copied().unwrap_or(0));
        let mut msg = message(pick, q);
        let mangled = mangle & 0x0f == 0x0f && msg.len() > 5;
        if mangled {
            // Cut the body short and fix the length, or drop its last NUL.
            let cut = 5 + usize::from(mangle >> 4) % (msg.len() - 5);
            msg.truncate(cut);
            let len = (msg.len() - 1) as u32;
            msg[1..5].copy_from_slice(&len.to_be_bytes());
        }
        rep.clear();
        let owed_before = shared.ledger.owed().len();
        let outcome = match rw.message(&msg, true, &mut shared, &mut rep) {
            Ok(o) => o,
            Err(v) => {
                ensure!(
                    mangled,
                    "message {i} ({:?}) refused: {v}",
                    msg.first().map(|t| *t as char)
                );
                continue;
            }
        };
        let sent: Vec<(u8, &[u8])> = match outcome {
            // A message the views refuse goes to the server as it is, for
            // PostgreSQL to refuse in its own words: the name in it names
            // nothing.
            Outcome::Forward if mangled => frames(&rep)?,
            Outcome::Forward => {
                let mut f = frames(&rep)?;
                f.extend(frames(&msg)?);
                f
            }
            _ => frames(&rep)?,
        };
        for (tag, body) in sent {
            let Some(name) = statement_named(tag, body).filter(|_| manage) else {
                continue;
            };
            // Bind, Describe and Close of a name the rewriter does not know
            // (never defined, or its Parse was unreadable) pass for the
            // server to refuse; which names it knows is checked end to end
            // by the differential harness.
            let pooler_name = name.is_empty() || name.starts_with(b"PGHARBOR_");
            ensure!(
                pooler_name || tag != fe::PARSE,
                "message {i}: the client's statement name {:?} reached the server in a \"{}\"",
                String::from_utf8_lossy(name),
                tag as char
            );
        }
        match outcome {
            Outcome::Replaced { consumed } => {
                ensure!(
                    consumed <= msg.len(),
                    "consumed {consumed} of {}",
                    msg.len()
                )
            }
            Outcome::Forward | Outcome::Swallowed => {}
        }
        // Each message adds at most its own reply plus the pooler's Parse
        // and a Close per evicted statement (the cache holds 3).
        ensure!(
            shared.ledger.owed().len() <= owed_before + 6,
            "message {i} added {} owed replies",
            shared.ledger.owed().len() - owed_before
        );
        if msg.first() == Some(&fe::SYNC) {
            // The server answers everything; the books empty out.
            let mut fixes = Vec::new();
            let mut sink = Vec::new();
            shared.ledger.take_due(&mut sink, &mut fixes);
            let _ = &mut fixes;
        }
    }
    Ok(())
}
