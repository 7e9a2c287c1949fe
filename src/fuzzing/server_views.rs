//! The server-message half of the `views` target. The oracle here is
//! postgres-protocol's own parser (what tokio-postgres clients read these
//! messages with): where a view accepts a body, it must accept it too and
//! read the same values; where it refuses one the view accepts, that is a
//! failure; the view may refuse more only where it documents why.

use super::{ensure, prefixes, Failure};
use crate::protocol::messages::{CopyResponse, Fields, ParameterStatus, ReadyForQuery};
use crate::protocol::tags::be;
use bytes::{BufMut, BytesMut};
use postgres_protocol::message::backend::Message;
use tokio_postgres::fallible_iterator::FallibleIterator;

/// postgres-protocol's reading of one whole message of type `tag`.
fn theirs(tag: u8, body: &[u8]) -> Option<Message> {
    let len = u32::try_from(body.len() + 4).ok()?;
    let mut buf = BytesMut::with_capacity(body.len() + 5);
    buf.put_u8(tag);
    buf.put_u32(len);
    buf.put_slice(body);
    Message::parse(&mut buf).ok().flatten()
}

pub(super) fn parameter_status(body: &[u8]) -> Result<(), Failure> {
    let ours = ParameterStatus::parse(body);
    let Some(Message::ParameterStatus(p)) = theirs(be::PARAMETER_STATUS, body) else {
        ensure!(
            ours.is_err(),
            "accepted {ours:?}, postgres-protocol refuses it"
        );
        return Ok(());
    };
    let p2 = ours.map_err(|e| Failure(format!("refused what postgres-protocol reads: {e}")))?;
    ensure!(
        [p2.name, b"\0", p2.value, b"\0"].concat() == body,
        "re-encodes differently"
    );
    if let (Ok(name), Ok(value)) = (p.name(), p.value()) {
        ensure!(
            (name.as_bytes(), value.as_bytes()) == (p2.name, p2.value),
            "{p2:?}, postgres-protocol reads {name:?} = {value:?}"
        );
    }
    Ok(())
}

pub(super) fn ready_for_query(body: &[u8]) -> Result<(), Failure> {
    let ours = ReadyForQuery::parse(body);
    let Some(Message::ReadyForQuery(r)) = theirs(be::READY_FOR_QUERY, body) else {
        ensure!(
            ours.is_err(),
            "accepted {ours:?}, postgres-protocol refuses it"
        );
        return Ok(());
    };
    match ours {
        Ok(ours) => ensure!(
            ours.status.as_byte() == r.status(),
            "{ours:?} for {}",
            r.status()
        ),
        // Documented strictness: a status other than I, T, E.
        Err(e) => ensure!(
            !b"ITE".contains(&r.status()),
            "refused status {}: {e}",
            r.status()
        ),
    }
    Ok(())
}

pub(super) fn fields(body: &[u8]) -> Result<(), Failure> {
    let f = Fields::new(body);
    let all: Vec<(u8, &[u8])> = f.iter().collect();
    let mut again: Vec<u8> = Vec::new();
    for (code, value) in &all {
        ensure!(
            *code != 0 && !value.contains(&0),
            "field {code} {value:?} is torn"
        );
        again.push(*code);
        again.extend_from_slice(value);
        again.push(0);
    }
    ensure!(
        body.starts_with(&again),
        "the fields are not the start of the body"
    );
    for code in [b'S', b'V', b'C', b'M', b'D', b'X'] {
        let last = all.iter().rev().find(|(c, _)| *c == code).map(|(_, v)| *v);
        ensure!(
            f.get(code) == last,
            "get({code}) is not the last {code} field"
        );
    }
    let severity = f.get(b'V').or(f.get(b'S'));
    ensure!(f.severity() == severity, "severity {:?}", f.severity());
    let fatal = matches!(severity, Some(b"FATAL" | b"PANIC"));
    ensure!(
        f.is_fatal() == fatal,
        "is_fatal {} for {severity:?}",
        f.is_fatal()
    );
    ensure!(
        f.sqlstate() == f.get(b'C') && f.message() == f.get(b'M'),
        "shorthands"
    );
    for n in prefixes(body) {
        let cut: Vec<_> = Fields::new(&body[..n]).iter().collect();
        ensure!(
            all.starts_with(&cut),
            "a prefix of {n} bytes yields other fields: {cut:?}"
        );
    }
    // postgres-protocol reads both ErrorResponse and NoticeResponse this way.
    let Some(Message::ErrorResponse(e)) = theirs(be::ERROR_RESPONSE, body) else {
        return Err(Failure("postgres-protocol refused an ErrorResponse".into()));
    };
    let mut it = e.fields();
    let mut theirs: Vec<(u8, Vec<u8>)> = Vec::new();
    let whole = loop {
        match it.next() {
            Ok(Some(field)) => theirs.push((field.type_(), field.value_bytes().to_vec())),
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    ensure!(
        whole == f.is_well_formed(),
        "is_well_formed {}, postgres-protocol: {whole}",
        !whole
    );
    let ours: Vec<(u8, Vec<u8>)> = all.iter().map(|(c, v)| (*c, v.to_vec())).collect();
    ensure!(
        theirs == ours,
        "fields {ours:?}, postgres-protocol reads {theirs:?}"
    );
    Ok(())
}

pub(super) fn copy_response(body: &[u8]) -> Result<(), Failure> {
    let ours = CopyResponse::parse(body);
    if let Ok(c) = ours {
        let mut again = vec![u8::from(c.binary)];
        again.extend_from_slice(&c.columns.to_be_bytes());
        ensure!(body.starts_with(&again), "{c:?} is not what the body says");
        ensure!(
            body.len() == 3 + 2 * usize::from(c.columns),
            "{c:?} in {} bytes",
            body.len()
        );
    }
    // CopyBothResponse has the same body; postgres-protocol reads only these two.
    for tag in [be::COPY_IN_RESPONSE, be::COPY_OUT_RESPONSE] {
        let theirs = match theirs(tag, body) {
            Some(Message::CopyInResponse(c)) => {
                let formats: Result<Vec<u16>, _> = c.column_formats().collect();
                formats.map(|f| (c.format(), f))
            }
            Some(Message::CopyOutResponse(c)) => {
                let formats: Result<Vec<u16>, _> = c.column_formats().collect();
                formats.map(|f| (c.format(), f))
            }
            _ => {
                ensure!(
                    ours.is_err(),
                    "accepted {ours:?}, postgres-protocol refuses it"
                );
                continue;
            }
        };
        match (&ours, theirs) {
            (Ok(c), Ok((format, cols))) => {
                ensure!(u8::from(c.binary) == format, "{c:?}, format {format}");
                ensure!(
                    usize::from(c.columns) == cols.len(),
                    "{c:?}, {} columns",
                    cols.len()
                );
            }
            (Ok(c), Err(e)) => ensure!(false, "accepted {c:?}, postgres-protocol: {e}"),
            // Documented strictness: formats other than 0 and 1.
            (Err(e), Ok((format, cols))) => ensure!(
                format > 1 || cols.iter().any(|&f| f > 1),
                "refused format {format} {cols:?}: {e}"
            ),
            (Err(_), Err(_)) => {}
        }
    }
    Ok(())
}
