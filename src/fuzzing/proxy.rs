//! Target `proxy`: [`scan`] over the first bytes of a connection never
//! panics, and its verdicts are those a reader that peeks, takes only the
//! header's bytes and peeks again can rely on:
//!
//! - the verdict only ever moves forward as bytes arrive: Partial, then a
//!   Complete or Invalid that more bytes never change (so every byte of a
//!   Partial prefix is the header's, and what follows a header is never
//!   needed to judge it);
//! - a Complete header's length is within the bytes and the cap;
//! - a Partial prefix is shorter than the longest header.

use super::{ensure, Failure};
use crate::protocol::proxy::{scan, Origin, Scan, Version, MAX_HEADER_LEN, V1_MAX_LEN};

/// Checks every prefix of `data` up to one byte past the longest header.
pub fn check(data: &[u8]) -> Result<(), Failure> {
    let end = data.len().min(MAX_HEADER_LEN + 1);
    let mut verdict: Option<Scan> = None;
    for n in 0..=end {
        let now = scan(&data[..n]);
        match (verdict, now) {
            (None, Scan::Partial) => {
                ensure!(n < MAX_HEADER_LEN, "Partial after {n} bytes, past the cap");
            }
            (None, Scan::Complete(h)) => {
                ensure!(h.len == n, "Complete at {n} bytes claims {} bytes", h.len);
                let cap = match h.version {
                    Version::V1 => V1_MAX_LEN,
                    Version::V2 => MAX_HEADER_LEN,
                };
                ensure!(h.len <= cap, "header of {} bytes past its cap", h.len);
                if let Origin::Tcp { source, .. } = h.origin {
                    ensure!(
                        h.version == Version::V2 || data[..n].is_ascii(),
                        "a v1 header {source} with non-ASCII bytes"
                    );
                }
                verdict = Some(now);
            }
            (None, Scan::Invalid(_)) => verdict = Some(now),
            (Some(before), now) => {
                ensure!(
                    before == now,
                    "verdict changed from {before:?} to {now:?} at {n} bytes"
                );
            }
        }
    }
    Ok(())
}
