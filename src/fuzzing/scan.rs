//! Target `scan`: [`Scanner`] over a byte stream cut at fuzzer-chosen
//! points reports the same messages as over the stream whole, and both
//! match an independent model of PostgreSQL's framing (`pq_getmessage`).
//!
//! Input: byte 0 picks the mode (bit 0: `step_capped`) and the set of
//! inspected types (bits 1-2), byte 1 the inspect cap, byte 2 the number of
//! cuts (mod 8), then two bytes per cut (an offset mod the stream length),
//! then the stream.

use super::{ensure, Failure};
use crate::protocol::scan::{Scanner, Step};
use crate::protocol::tags::{be, fe};

/// PostgreSQL's `PQ_LARGE_MESSAGE_LIMIT` (`MaxAllocSize - 1`): the largest
/// length word it accepts for any message type.
pub const PQ_LARGE_MESSAGE_LIMIT: usize = 0x3fff_fffe;

/// What a scan saw: each message's type, absolute start and total length,
/// and whether it was reported whole; or where the stream was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Message {
        tag: u8,
        start: usize,
        total: usize,
        whole: bool,
    },
    Refused {
        at: usize,
    },
}

/// The events, the bytes consumed, and whether it ended at a boundary.
type Outcome = (Vec<Event>, usize, bool);

struct Setup<'a> {
    capped: bool,
    set: u8,
    cap: usize,
    cuts: Vec<usize>,
    stream: &'a [u8],
}

fn setup(data: &[u8]) -> Setup<'_> {
    let at = |i: usize| data.get(i).copied().unwrap_or(0);
    let ncuts = usize::from(at(2) % 8);
    let stream = data.get(3 + 2 * ncuts..).unwrap_or(&[]);
    let mut cuts: Vec<usize> = (0..ncuts)
        .map(|i| usize::from(u16::from_be_bytes([at(3 + 2 * i), at(4 + 2 * i)])))
        .map(|c| {
            if stream.is_empty() {
                0
            } else {
                c % stream.len()
            }
        })
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    Setup {
        capped: at(0) & 1 == 1,
        set: (at(0) >> 1) & 3,
        cap: 5 + usize::from(at(1)) * 2,
        cuts,
        stream,
    }
}

/// The sets of types the relay inspects in each direction (see
/// `client/txn/relay/up.rs` and `down.rs`), none, and all.
fn inspected(set: u8, tag: u8) -> bool {
    match set {
        0 => false,
        1 => matches!(
            tag,
            fe::QUERY | fe::PARSE | fe::BIND | fe::DESCRIBE | fe::CLOSE | fe::TERMINATE
        ),
        2 => matches!(
            tag,
            be::READY_FOR_QUERY
                | be::PARAMETER_STATUS
                | be::ERROR_RESPONSE
                | be::PARSE_COMPLETE
                | be::CLOSE_COMPLETE
        ),
        _ => true,
    }
}

/// PostgreSQL's framing, written from `pq_getmessage` and the scanner's
/// documented contract rather than from the scanner's code.
fn model(s: &Setup<'_>) -> Outcome {
    let (stream, mut events, mut o) = (s.stream, Vec::new(), 0);
    let limit = PQ_LARGE_MESSAGE_LIMIT;
    loop {
        let Some(h) = stream.get(o..o + 5) else {
            return (events, o, true);
        };
        let len = u32::from_be_bytes([h[1], h[2], h[3], h[4]]) as usize;
        let total = len + 1;
        let inspect = inspected(s.set, h[0]);
        if len < 4 || len > limit || (inspect && total > s.cap && !s.capped) {
            events.push(Event::Refused { at: o });
            return (events, o, true);
        }
        let whole = inspect && total <= s.cap;
        if whole && o + total > stream.len() {
            return (events, o, true);
        }
        events.push(Event::Message {
            tag: h[0],
            start: o,
            total,
            whole,
        });
        if o + total > stream.len() {
            return (events, stream.len(), false);
        }
        o += total;
    }
}

/// Drives the scanner over `stream` delivered in pieces ending at `cuts`, as
/// the relay does: unconsumed bytes stay buffered in front of the next read.
fn drive(s: &Setup<'_>, cuts: &[usize]) -> Result<Outcome, Failure> {
    let mut scanner = Scanner::new();
    let (mut events, mut pending, mut base, mut owed) = (Vec::new(), Vec::new(), 0, 0usize);
    let mut from = 0;
    for &to in cuts.iter().chain([&s.stream.len()]) {
        pending.extend_from_slice(&s.stream[from..to]);
        from = to;
        let mut pos = 0;
        for _ in 0..=pending.len() + 1 {
            let step = if s.capped {
                scanner.step_capped(&pending, pos, |t| inspected(s.set, t), s.cap)
            } else {
                scanner.step(&pending, pos, |t| inspected(s.set, t), s.cap)
            };
            let step = match step {
                Ok(step) => step,
                Err(e) => {
                    ensure!(!e.0.is_empty(), "a refusal without a reason");
                    ensure!(
                        owed == 0,
                        "refused in the middle of a message at {}",
                        base + pos
                    );
                    events.push(Event::Refused { at: base + pos });
                    return Ok((events, base + pos, true));
                }
            };
            match step {
                Step::NeedMore => break,
                Step::Continuation { end } => {
                    ensure!(
                        end > pos && end <= pending.len(),
                        "continuation to {end} from {pos}"
                    );
                    ensure!(end - pos <= owed, "continuation past the message's end");
                    owed -= end - pos;
                    pos = end;
                }
                Step::Whole { tag, start, end } | Step::Header { tag, start, end } => {
                    let whole = matches!(step, Step::Whole { .. });
                    ensure!(owed == 0, "a header inside a message at {}", base + pos);
                    ensure!(
                        start == pos && end > pos && end <= pending.len(),
                        "{step:?} at {pos}"
                    );
                    let total = Scanner::peek_total(&pending, pos).unwrap_or(0);
                    ensure!(tag == pending[pos], "tag {tag} is not the byte at {pos}");
                    ensure!(
                        !whole || end - start == total,
                        "{step:?} of a {total}-byte message"
                    );
                    ensure!(
                        end - start == total.min(pending.len() - pos),
                        "{step:?} short"
                    );
                    owed = total - (end - start);
                    events.push(Event::Message {
                        tag,
                        start: base + start,
                        total,
                        whole,
                    });
                    pos = end;
                }
            }
            ensure!(
                scanner.at_boundary() == (owed == 0),
                "at_boundary disagrees"
            );
        }
        pending.drain(..pos);
        base += pos;
    }
    Ok((events, base, scanner.at_boundary()))
}

/// The `scan` target.
pub fn check(data: &[u8]) -> Result<(), Failure> {
    let s = setup(data);
    let expected = model(&s);
    let whole = drive(&s, &[])?;
    ensure!(
        whole == expected,
        "whole stream: {whole:?}, PostgreSQL's framing: {expected:?}"
    );
    let cut = drive(&s, &s.cuts)?;
    ensure!(
        cut == whole,
        "cut at {:?}: {cut:?}, whole: {whole:?}",
        s.cuts
    );
    Ok(())
}
