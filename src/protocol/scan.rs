//! Follows message boundaries in a relayed byte stream without copying.
//!
//! The relay reads big chunks and forwards them whole; the scanner only looks
//! at the 5-byte headers (and the bodies of the few small messages the pooler
//! must understand) so that it knows where every message starts, even when a
//! 100 MB `DataRow` stream spans thousands of reads.

use super::tags::TagSet;
use super::{be_u32, Violation, MAX_MESSAGE};

/// One step of the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Bytes `[pos, end)` continue a message whose header was seen earlier.
    Continuation {
        /// End of the continuation bytes.
        end: usize,
    },
    /// A whole message the caller asked to inspect sits at `[start, end)`.
    Whole {
        /// Message type.
        tag: u8,
        /// Offset of the tag byte.
        start: usize,
        /// One past the last byte.
        end: usize,
    },
    /// A message the caller does not inspect starts at `start`; its bytes up to
    /// `end` are here and the rest will follow.
    Header {
        /// Message type.
        tag: u8,
        /// Offset of the tag byte.
        start: usize,
        /// End of what is buffered of it (may be the whole message).
        end: usize,
    },
    /// Fewer bytes than a header (or an inspected message) at `pos`: read more.
    NeedMore,
}

/// Scanner state carried between reads.
#[derive(Debug, Default, Clone)]
pub struct Scanner {
    /// Bytes of the current message still to come.
    remaining: usize,
}

impl Scanner {
    /// A scanner positioned at a message boundary.
    pub fn new() -> Self {
        Scanner::default()
    }

    /// True when the stream is at a message boundary.
    pub fn at_boundary(&self) -> bool {
        self.remaining == 0
    }

    /// Scans from `pos` in `buf`. `inspect(tag)` says which messages must be whole
    /// before they are reported; they are capped at `inspect_cap` bytes.
    pub fn step(
        &mut self,
        buf: &[u8],
        pos: usize,
        inspect: impl Fn(u8) -> bool,
        inspect_cap: usize,
    ) -> Result<Step, Violation> {
        self.step_inner(buf, pos, inspect, inspect_cap, false)
    }

    /// As [`Scanner::step`], but a message to inspect that is larger than
    /// `inspect_cap` is reported as a [`Step::Header`] (streamed) instead of
    /// being an error.
    pub fn step_capped(
        &mut self,
        buf: &[u8],
        pos: usize,
        inspect: impl Fn(u8) -> bool,
        inspect_cap: usize,
    ) -> Result<Step, Violation> {
        self.step_inner(buf, pos, inspect, inspect_cap, true)
    }

    /// Length of the message whose header is at `pos`, if its header is there.
    pub fn peek_total(buf: &[u8], pos: usize) -> Option<usize> {
        (buf.len() >= pos + 5).then(|| be_u32(&buf[pos + 1..pos + 5]) as usize + 1)
    }

    /// From `pos`, at a boundary, the end of the run of whole messages of
    /// the types in `tags` that `buf` holds: where the first other message,
    /// the first one not wholly there, or one with a bad length (left for
    /// [`Scanner::step`] to report) begins.
    #[inline]
    pub fn skip_run(&self, buf: &[u8], mut pos: usize, tags: TagSet) -> usize {
        debug_assert!(self.at_boundary());
        while buf.len() - pos >= 5 && tags.contains(buf[pos]) {
            let len = be_u32(&buf[pos + 1..pos + 5]) as usize;
            if !(4..=MAX_MESSAGE).contains(&len) || buf.len() - pos <= len {
                break;
            }
            pos += len + 1;
        }
        pos
    }

    fn step_inner(
        &mut self,
        buf: &[u8],
        pos: usize,
        inspect: impl Fn(u8) -> bool,
        inspect_cap: usize,
        stream_oversized: bool,
    ) -> Result<Step, Violation> {
        let avail = buf.len() - pos;
        if self.remaining > 0 {
            if avail == 0 {
                return Ok(Step::NeedMore);
            }
            let take = self.remaining.min(avail);
            self.remaining -= take;
            return Ok(Step::Continuation { end: pos + take });
        }
        if avail < 5 {
            return Ok(Step::NeedMore);
        }
        let tag = buf[pos];
        let len = be_u32(&buf[pos + 1..pos + 5]) as usize;
        if !(4..=MAX_MESSAGE).contains(&len) {
            return Err(Violation::new(format!(
                "invalid message length {len} for message type \"{}\"",
                tag.escape_ascii()
            )));
        }
        let total = len + 1;
        if inspect(tag) && !(stream_oversized && total > inspect_cap) {
            if total > inspect_cap {
                return Err(Violation::new(format!(
                    "message type \"{}\" of {total} bytes is too long",
                    tag.escape_ascii()
                )));
            }
            if avail < total {
                return Ok(Step::NeedMore);
            }
            return Ok(Step::Whole {
                tag,
                start: pos,
                end: pos + total,
            });
        }
        let take = total.min(avail);
        self.remaining = total - take;
        Ok(Step::Header {
            tag,
            start: pos,
            end: pos + take,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    /// Drives the scanner over `chunks` and returns (tag, whole?) events.
    fn run(chunks: &[&[u8]]) -> Vec<(u8, bool)> {
        let mut s = Scanner::new();
        let mut out = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for c in chunks {
            pending.extend_from_slice(c);
            let mut pos = 0;
            loop {
                match s.step(&pending, pos, |t| t == b'Z', 64).unwrap() {
                    Step::NeedMore => break,
                    Step::Continuation { end } => pos = end,
                    Step::Whole { tag, end, .. } => {
                        out.push((tag, true));
                        pos = end;
                    }
                    Step::Header { tag, end, .. } => {
                        out.push((tag, false));
                        pos = end;
                    }
                }
            }
            pending.drain(..pos);
        }
        out
    }

    #[test]
    fn follows_boundaries_across_any_split() {
        let mut stream = msg(b'D', &[7u8; 300]);
        stream.extend(msg(b'C', b"SELECT 1\0"));
        stream.extend(msg(b'Z', b"I"));
        let whole = run(&[&stream]);
        assert_eq!(whole, vec![(b'D', false), (b'C', false), (b'Z', true)]);
        for split in 1..stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(run(&[a, b]), whole, "split at {split}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(run(&bytes), whole);
    }

    #[test]
    fn capped_step_streams_oversized_messages() {
        let big = msg(b'Q', &[b'x'; 100]);
        let mut s = Scanner::new();
        match s.step_capped(&big[..50], 0, |t| t == b'Q', 64).unwrap() {
            Step::Header {
                tag: b'Q',
                start: 0,
                end: 50,
            } => {}
            other => panic!("unexpected {other:?}"),
        }
        assert!(!s.at_boundary());
        assert_eq!(Scanner::peek_total(&big, 0), Some(big.len()));
        assert_eq!(Scanner::peek_total(&big[..4], 0), None);
    }

    #[test]
    fn rejects_bad_lengths() {
        let mut s = Scanner::new();
        assert!(s.step(b"Q\0\0\0\x02", 0, |_| false, 64).is_err());
        assert!(s.step(b"Q\xff\xff\xff\xff", 0, |_| false, 64).is_err());
        let big = msg(b'Z', &[0u8; 100]);
        assert!(s.step(&big, 0, |t| t == b'Z', 64).is_err());
    }

    #[test]
    fn skip_run_stops_at_another_type_a_partial_message_or_a_bad_length() {
        let row = msg(b'D', b"abc");
        let mut buf = [row.clone(), row.clone(), msg(b'C', b"SELECT 2\0")].concat();
        let s = Scanner::new();
        let rows = TagSet::of(b"D");
        assert_eq!(s.skip_run(&buf, 0, rows), 2 * row.len(), "stops at the C");
        assert_eq!(s.skip_run(&buf, 0, TagSet::of(b"C")), 0, "not a run of C");
        buf.truncate(2 * row.len() - 1);
        assert_eq!(
            s.skip_run(&buf, 0, rows),
            row.len(),
            "the partial second row is left"
        );
        let mut bad = row.clone();
        bad.extend_from_slice(&[b'D', 0, 0, 0, 2]);
        assert_eq!(
            s.skip_run(&bad, 0, rows),
            row.len(),
            "a bad length is left for step"
        );
        let mut s2 = Scanner::new();
        assert!(s2.step(&bad, row.len(), |_| false, 1024).is_err());
        assert_eq!(s.skip_run(&buf, buf.len(), rows), buf.len(), "nothing left");
        let whole = [row.clone(), msg(b'C', b"SELECT 1\0"), msg(b'Z', b"I")].concat();
        assert_eq!(
            s.skip_run(&whole, 0, TagSet::of(b"DC")),
            whole.len() - 6,
            "a run of several types, up to the first outside the set"
        );
    }
}
