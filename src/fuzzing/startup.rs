//! Target `startup`: [`FrameBuf::startup_frame`] and [`parse_startup`]
//! never accept a first packet PostgreSQL refuses, and read the same
//! parameters from one it accepts.
//!
//! Input: byte 0 sets the size of each read (1 to 256 bytes), the rest is
//! what the client sends. The model follows `ProcessStartupPacket` (in
//! `postmaster.c`, later `backend_startup.c`) for protocol 3.
//!
//! Deliberately outside the model: the rules PostgreSQL applies to
//! parameter VALUES after the layout check (a user name must be given,
//! `replication` must be a boolean or `database`): pgharbor checks those at
//! login (`client/login.rs`), not in the parser.

use super::{ensure, Failure};
use crate::protocol::frontend::{parse_startup, StartupError, StartupRequest};
use crate::protocol::{
    FrameBuf, CANCEL_REQUEST_CODE, GSSENC_REQUEST_CODE, MAX_STARTUP_PACKET, SSL_REQUEST_CODE,
};

/// What PostgreSQL makes of a first packet's body (after its length word).
#[derive(Debug, PartialEq, Eq)]
enum Pg<'a> {
    /// SSLRequest or GSSENCRequest.
    Negotiate,
    /// A CancelRequest it would act on.
    Cancel,
    /// A 3.x StartupMessage: its name/value pairs, `_pq_.` ones included.
    Startup(Vec<(&'a [u8], &'a [u8])>),
    /// Anything it answers with an error.
    Refused,
}

/// The length check on the length word, with PostgreSQL's int32 arithmetic.
fn pg_length_ok(word: [u8; 4]) -> bool {
    let len = i32::from_be_bytes(word).wrapping_sub(4);
    (4..=MAX_STARTUP_PACKET as i32).contains(&len)
}

/// `strlen` from `at`, with the zero byte PostgreSQL allocates past the end.
fn strlen(body: &[u8], at: usize) -> usize {
    let rest = body.get(at..).unwrap_or(&[]);
    rest.iter().position(|&b| b == 0).unwrap_or(rest.len())
}

fn pg_startup(body: &[u8]) -> Pg<'_> {
    let Some(&[a, b, c, d]) = body.get(..4) else {
        return Pg::Refused;
    };
    let proto = u32::from_be_bytes([a, b, c, d]);
    match proto {
        SSL_REQUEST_CODE | GSSENC_REQUEST_CODE => return Pg::Negotiate,
        CANCEL_REQUEST_CODE if body.len() == 12 => return Pg::Cancel,
        CANCEL_REQUEST_CODE => return Pg::Refused,
        _ if proto >> 16 != 3 => return Pg::Refused,
        _ => {}
    }
    let (len, mut offset, mut pairs) = (body.len(), 4, Vec::new());
    while offset < len {
        if body[offset] == 0 {
            break;
        }
        let valoffset = offset + strlen(body, offset) + 1;
        if valoffset >= len {
            break;
        }
        let vallen = strlen(body, valoffset);
        pairs.push((
            &body[offset..valoffset - 1],
            &body[valoffset..valoffset + vallen],
        ));
        offset = valoffset + vallen + 1;
    }
    if offset != len - 1 {
        return Pg::Refused;
    }
    Pg::Startup(pairs)
}

fn utf8(b: &[u8]) -> bool {
    std::str::from_utf8(b).is_ok()
}

/// The `startup` target.
pub fn check(data: &[u8]) -> Result<(), Failure> {
    let Some((&chunk, stream)) = data.split_first() else {
        return Ok(());
    };
    let chunk = usize::from(chunk) + 1;
    // The sizes the client side uses (client/mod.rs): a small first buffer
    // that may grow for a large packet.
    let mut buf = FrameBuf::new(2048, 64 * 1024);
    let mut fed = 0;
    let frame = loop {
        match buf.startup_frame(MAX_STARTUP_PACKET) {
            Err(e) => {
                let word = stream.get(..4).and_then(|w| <[u8; 4]>::try_from(w).ok());
                ensure!(
                    word.is_some_and(|w| !pg_length_ok(w)),
                    "refused a length PostgreSQL accepts: {e}"
                );
                return Ok(());
            }
            Ok(Some(frame)) => break frame,
            Ok(None) if fed == stream.len() => return Ok(()),
            Ok(None) => {
                let spare = buf.spare();
                let n = chunk.min(spare.len()).min(stream.len() - fed);
                ensure!(n > 0, "no room to read into with {} bytes buffered", fed);
                spare[..n].copy_from_slice(&stream[fed..fed + n]);
                buf.filled(n);
                fed += n;
            }
        }
    };
    let word = [stream[0], stream[1], stream[2], stream[3]];
    ensure!(
        pg_length_ok(word),
        "framed a packet whose length PostgreSQL refuses"
    );
    let len = u32::from_be_bytes(word) as usize;
    ensure!(
        frame.total == len && frame.body_len == len - 4,
        "{frame:?} for length {len}"
    );
    let body = buf.body(&frame);
    ensure!(
        body == &stream[4..len],
        "the framed body is not the packet's"
    );

    let pg = pg_startup(body);
    match (parse_startup(body), &pg) {
        // Where pgharbor is stricter on purpose: it wants UTF-8 names and
        // values, and the final NUL itself (PostgreSQL's loop lets one
        // stray last byte through). Anything else PostgreSQL takes, it takes.
        (Err(e), Pg::Startup(pairs))
            if body.last() == Some(&0) && pairs.iter().all(|(k, v)| utf8(k) && utf8(v)) =>
        {
            ensure!(false, "refused a StartupMessage PostgreSQL accepts: {e}")
        }
        (Err(StartupError::Malformed(_) | StartupError::UnsupportedVersion { .. }), _) => {}
        (Ok(StartupRequest::Ssl | StartupRequest::GssEnc), Pg::Negotiate) => {}
        (Ok(StartupRequest::Cancel { .. }), Pg::Cancel) => {}
        (Ok(StartupRequest::Startup(m)), Pg::Startup(pairs)) => {
            let (opts, params): (Vec<_>, Vec<_>) =
                pairs.iter().partition(|(k, _)| k.starts_with(b"_pq_."));
            let ours: Vec<_> = m
                .params
                .iter()
                .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
                .collect();
            ensure!(
                ours == params,
                "parameters {ours:?}, PostgreSQL reads {params:?}"
            );
            let names: Vec<_> = opts.iter().map(|(k, _)| *k).collect();
            let ours: Vec<_> = m.protocol_options.iter().map(|k| k.as_bytes()).collect();
            ensure!(
                ours == names,
                "protocol options {ours:?}, PostgreSQL reads {names:?}"
            );
            let minor = u16::from_be_bytes([body[2], body[3]]);
            ensure!(
                m.minor == minor,
                "minor version {} read as {}",
                minor,
                m.minor
            );
        }
        (ours, pg) => ensure!(false, "accepted {ours:?} where PostgreSQL makes it {pg:?}"),
    }
    Ok(())
}
