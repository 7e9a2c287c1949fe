//! Target `views`: every view in [`crate::protocol::messages`] on an
//! arbitrary body. None may panic; a client-message view accepts exactly
//! the bodies PostgreSQL accepts (modelled here from `postgres.c`), refuses
//! the rest in PostgreSQL's words, and what it accepts re-encodes, with
//! postgres-protocol where the names are text, to the same bytes.
//!
//! Input: byte 0 picks the view (mod 9, see [`check`]), the rest is the body.

use super::{ensure, prefixes, server_views, Failure};
use crate::protocol::messages::{BindHead, Close, Describe, Execute, Parse, Target};
use crate::protocol::tags::fe;
use bytes::BytesMut;
use postgres_protocol::message::frontend;

/// The `views` target.
pub fn check(data: &[u8]) -> Result<(), Failure> {
    let Some((&which, body)) = data.split_first() else {
        return Ok(());
    };
    match which % 9 {
        0 => parse(body),
        1 => bind(body),
        2 => describe_or_close(body, false),
        3 => describe_or_close(body, true),
        4 => execute(body),
        5 => server_views::parameter_status(body),
        6 => server_views::ready_for_query(body),
        7 => server_views::fields(body),
        _ => server_views::copy_response(body),
    }
}

/// Splits at the first NUL, as the model's own `pq_getmsgstring`.
fn cstr(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = b.iter().position(|&c| c == 0)?;
    Some((&b[..i], &b[i + 1..]))
}

/// The body of the one message postgres-protocol wrote with `build`, or
/// None when it refused (a name that is not text cannot be given to it).
fn encoded(tag: u8, build: impl FnOnce(&mut BytesMut) -> bool) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    if !build(&mut buf) || buf.first() != Some(&tag) {
        return None;
    }
    buf.get(5..).map(|b| b.to_vec())
}

fn text(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok()
}

/// PostgreSQL's wording for a client message it cannot read.
fn pg_wording(msg: &str) -> bool {
    matches!(
        msg,
        "no data left in message"
            | "invalid string in message"
            | "insufficient data left in message"
            | "invalid message format"
    )
}

fn parse(body: &[u8]) -> Result<(), Failure> {
    let accepts = cstr(body)
        .and_then(|(_, rest)| cstr(rest))
        .and_then(|(_, types)| {
            let n = types.get(..2).map(|n| u16::from_be_bytes([n[0], n[1]]))?;
            Some(types.len() == 2 + 4 * usize::from(n))
        })
        .unwrap_or(false);
    let view = Parse::parse(body);
    ensure!(
        view.is_ok() == accepts,
        "Parse::parse gave {view:?}, PostgreSQL accepts: {accepts}"
    );
    match view {
        Err(e) => ensure!(pg_wording(&e.0), "not PostgreSQL's wording: {e}"),
        Ok(p) => {
            let mut again = [p.name, b"\0", p.definition].concat();
            ensure!(again == body, "name and definition do not make the body");
            again = [p.query, b"\0", &p.param_types.to_be_bytes()].concat();
            for i in 0..p.param_types {
                let oid = p
                    .param_type(i)
                    .ok_or_else(|| Failure(format!("no type {i}")))?;
                again.extend_from_slice(&oid.to_be_bytes());
            }
            ensure!(
                again == p.definition,
                "query and types do not make the definition"
            );
            ensure!(
                p.param_type(p.param_types).is_none(),
                "a type past the count"
            );
            if let (Some(name), Some(query)) = (text(p.name), text(p.query)) {
                let types = (0..p.param_types).filter_map(|i| p.param_type(i));
                let theirs = encoded(fe::PARSE, |buf| {
                    frontend::parse(name, query, types, buf).is_ok()
                });
                ensure!(
                    theirs.as_deref() == Some(body),
                    "postgres-protocol writes {theirs:?}"
                );
            }
        }
    }
    for n in prefixes(body) {
        let name = Parse::name_in_prefix(&body[..n]).map_err(|e| Failure(e.0))?;
        let want = cstr(&body[..n]).map(|(name, _)| name);
        ensure!(
            name == want,
            "name_in_prefix of {n} bytes: {name:?}, want {want:?}"
        );
    }
    Ok(())
}

fn bind(body: &[u8]) -> Result<(), Failure> {
    let whole = BindHead::parse(body).map_err(|e| Failure(e.0))?;
    let want = cstr(body).and_then(|(portal, rest)| Some((portal, cstr(rest)?.0)));
    ensure!(
        whole.map(|h| (h.portal, h.statement)) == want,
        "BindHead::parse gave {whole:?}, the names are {want:?}"
    );
    if let Some(h) = whole {
        let again = [h.portal, b"\0", h.statement, b"\0"].concat();
        ensure!(
            body.get(..h.rest_at) == Some(&again[..]),
            "rest_at {} is off",
            h.rest_at
        );
        if let (Some(portal), Some(statement)) = (text(h.portal), text(h.statement)) {
            let theirs = encoded(fe::BIND, |buf| {
                let none: [Option<&[u8]>; 0] = [];
                let serialize =
                    |_: Option<&[u8]>, _: &mut BytesMut| Ok(postgres_protocol::IsNull::Yes);
                frontend::bind(portal, statement, [], none, serialize, [], buf).is_ok()
            });
            let head = theirs.as_deref().and_then(|b| b.get(..h.rest_at));
            ensure!(
                head == Some(&again[..]),
                "postgres-protocol writes {theirs:?}"
            );
        }
    }
    for n in prefixes(body) {
        let head = BindHead::parse(&body[..n]).map_err(|e| Failure(e.0))?;
        let want = whole.filter(|h| h.rest_at <= n);
        ensure!(
            head == want,
            "a prefix of {n} bytes gave {head:?}, want {want:?}"
        );
    }
    Ok(())
}

fn describe_or_close(body: &[u8], close: bool) -> Result<(), Failure> {
    let (tag, what) = if close {
        (fe::CLOSE, "CLOSE")
    } else {
        (fe::DESCRIBE, "DESCRIBE")
    };
    let view = if close {
        Close::parse(body).map(|c| (c.target, c.name))
    } else {
        Describe::parse(body).map(|d| (d.target, d.name))
    };
    // pq_getmsgbyte, pq_getmsgstring, pq_getmsgend, then the subtype.
    let layout_ok = body.len() >= 2 && cstr(&body[1..]).is_some_and(|(_, rest)| rest.is_empty());
    let accepts = layout_ok && matches!(body[0], b'S' | b'P');
    ensure!(
        view.is_ok() == accepts,
        "{what} gave {view:?}, PostgreSQL accepts: {accepts}"
    );
    match view {
        Err(e) if layout_ok => {
            let want = format!("invalid {what} message subtype {}", body[0]);
            ensure!(e.0 == want, "{e}, PostgreSQL says {want}");
        }
        Err(e) => ensure!(pg_wording(&e.0), "not PostgreSQL's wording: {e}"),
        Ok((target, name)) => {
            let again = [&[target.as_byte()][..], name, b"\0"].concat();
            ensure!(again == body, "re-encodes as {again:?}");
            ensure!(
                Target::from_byte(body[0]) == Some(target),
                "target {target:?}"
            );
            if let Some(name) = text(name) {
                let theirs = encoded(tag, |buf| match close {
                    true => frontend::close(target.as_byte(), name, buf).is_ok(),
                    false => frontend::describe(target.as_byte(), name, buf).is_ok(),
                });
                ensure!(
                    theirs.as_deref() == Some(body),
                    "postgres-protocol writes {theirs:?}"
                );
            }
        }
    }
    Ok(())
}

fn execute(body: &[u8]) -> Result<(), Failure> {
    let accepts = cstr(body).is_some_and(|(_, rest)| rest.len() == 4);
    let view = Execute::parse(body);
    ensure!(
        view.is_ok() == accepts,
        "Execute gave {view:?}, PostgreSQL accepts: {accepts}"
    );
    match view {
        Err(e) => ensure!(pg_wording(&e.0), "not PostgreSQL's wording: {e}"),
        Ok(x) => {
            let again = [x.portal, b"\0", &x.max_rows.to_be_bytes()].concat();
            ensure!(again == body, "re-encodes as {again:?}");
            if let Some(portal) = text(x.portal) {
                let theirs = encoded(fe::EXECUTE, |buf| {
                    frontend::execute(portal, x.max_rows, buf).is_ok()
                });
                ensure!(
                    theirs.as_deref() == Some(body),
                    "postgres-protocol writes {theirs:?}"
                );
            }
        }
    }
    Ok(())
}
