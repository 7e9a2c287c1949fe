//! The messages the rewriter writes itself, and the bits of client
//! messages it reads without a view.

use super::PREFIX_CAP;
use crate::backend::owed::{Expect, Reply};
use crate::backend::prepared::statement_name;
use crate::client::relay::Shared;
use crate::protocol::frontend::split_cstr;
use crate::protocol::tags::{fe, target};
use crate::protocol::Violation;

/// The statement name of the pooler's throwaway checks (with its NUL), in
/// the pooler's `PGHARBOR_` namespace.
pub(super) const CHECK_NAME: &[u8] = b"PGHARBOR_check\0";

/// Records `id` in the cache and writes a Close for each statement it evicts.
pub(super) fn evict_for(id: u64, shared: &mut Shared<'_>, out: &mut Vec<u8>) {
    for old in shared.ledger.prepared().insert(id) {
        let mut name = Vec::with_capacity(24);
        statement_name(old, &mut name);
        name.push(0);
        put_msg(out, fe::CLOSE, &[&[target::STATEMENT], &name]);
        shared.push(Expect::Injected(Reply::Close { evicted: Some(old) }));
    }
}

/// Writes Parse of the pooler's statement `id`.
pub(super) fn put_parse(out: &mut Vec<u8>, id: u64, definition: &[u8]) {
    let mut name = Vec::with_capacity(24);
    statement_name(id, &mut name);
    name.push(0);
    put_msg(out, fe::PARSE, &[&name, definition]);
}

/// Writes one message made of `parts`.
pub(super) fn put_msg(out: &mut Vec<u8>, tag: u8, parts: &[&[u8]]) {
    let len: usize = 4 + parts.iter().map(|p| p.len()).sum::<usize>();
    out.push(tag);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    for p in parts {
        out.extend_from_slice(p);
    }
}

/// The text of a Query body (up to its NUL, or all of it if there is none).
pub(super) fn cstr_prefix(body: &[u8]) -> &[u8] {
    split_cstr(body).map_or(body, |(s, _)| s)
}

/// The pooler's refusal of an oversized Parse or Bind whose names do not end
/// within the first [`PREFIX_CAP`] bytes it reads of it.
pub(super) fn names_beyond_prefix(what: &str) -> Violation {
    Violation::new(format!(
        "{what} message with names over {PREFIX_CAP} bytes is not supported"
    ))
}
