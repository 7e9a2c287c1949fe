//! The relay for transaction and statement pooling. As in session pooling
//! the two directions run concurrently on reused buffers; here each
//! direction also looks at every message header, so that the pooler knows
//! whom each reply belongs to ([`Replies`]) and can return the backend the
//! moment the server is idle with nothing owed.
//!
//! Messages pass in runs: a chunk that needs no change is written from the
//! read buffer as it is; only a chunk with a rewritten, added or answered
//! message is copied into an output buffer.

mod down;
mod up;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::rewrite::{Rewriter, Shared};
use crate::backend::{Backend, ParamSet};
use crate::client::relay::{Meter, Progress, RelayEnd};
use crate::protocol::scan::Scanner;
use crate::protocol::FrameBuf;
use crate::stream::{ReadHalf, WriteHalf};
use down::Down;
use up::Up;

/// Largest client message read whole to be rewritten or classified.
pub const WHOLE_CAP: usize = 1 << 20;

/// How the relay should behave.
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// Return as soon as the backend is idle (false: the client is pinned).
    pub release_at_idle: bool,
    /// Statement pooling: a transaction block is refused.
    pub statement: bool,
    /// Close a client that sits idle inside a transaction this long.
    pub idle_tx_timeout: Option<Duration>,
}

/// How a relay over one backend ended.
#[derive(Debug)]
pub enum TxnEnd {
    /// The backend is idle and owes nothing: give it back.
    Idle,
    /// The client or server ended (or the relay must end) as in session pooling.
    Ended(RelayEnd),
}

/// Where a relay left the backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct Left {
    /// At message boundaries in both directions with nothing owed.
    pub clean: bool,
    /// The backend must be closed rather than pooled.
    pub discard: bool,
    /// Why the client must keep this backend, if it must.
    pub pin: Option<super::rewrite::Pin>,
}

/// Flags the directions share besides the [`Shared`] state.
struct Flags {
    /// The up direction is in the middle of a write to the server.
    writing: AtomicBool,
    /// The client is in the middle of a message part of which went out.
    client_mid: AtomicBool,
    /// Synthetic replies were queued: the down direction must send them.
    due: Notify,
    /// The server went idle inside a transaction: the client's clock starts.
    idle_in_tx: Notify,
}

/// Relays one client over one backend until the backend can be given back
/// or the session ends.
#[allow(clippy::too_many_arguments)]
pub async fn relay(
    (cr, cw): (&mut ReadHalf<'_>, &mut WriteHalf<'_>),
    cbuf: &mut FrameBuf,
    cscan: &mut Scanner,
    backend: &mut Backend,
    rewriter: &mut Rewriter<'_>,
    client_params: &mut Arc<ParamSet>,
    meter: &mut Meter<'_>,
    mode: Mode,
) -> (TxnEnd, Left) {
    let Backend {
        stream,
        buf: bbuf,
        scanner: bscan,
        params,
        tx,
        pending_replies,
        queued,
        prepared,
        ..
    } = backend;
    let shared = Mutex::new(Shared::new(prepared));
    let flags = Flags {
        writing: AtomicBool::new(false),
        client_mid: AtomicBool::new(!cscan.at_boundary()),
        due: Notify::new(),
        idle_in_tx: Notify::new(),
    };
    let progress = Progress::new();
    let (mut br, mut bw) = stream.split();
    let end = {
        let up = Up {
            shared: &shared,
            flags: &flags,
            progress: &progress,
            rewriter,
            mode,
        }
        .run(cr, &mut bw, cbuf, cscan, queued);
        let down = Down {
            shared: &shared,
            flags: &flags,
            progress: &progress,
            mode,
        }
        .run(
            &mut br,
            cw,
            (bbuf, bscan),
            (params, client_params, tx),
            pending_replies,
            meter,
        );
        // Up first: it forwards what the client already sent before down
        // can decide the backend is idle.
        tokio::select! {
            biased;
            end = up => TxnEnd::Ended(end),
            end = down => end,
        }
    };
    meter.flush(Some(&progress.bytes_in));
    let mut s = match shared.into_inner() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    // Names whose Parse failed in this relay's last replies: forget them now,
    // the next relay starts with fresh shared state.
    rewriter.forget_undefined(&mut s);
    let clean = s.replies.is_empty()
        && s.unsynced == 0
        && cscan.at_boundary()
        && bscan.at_boundary()
        && bbuf.is_empty()
        && *pending_replies == 0
        && !flags.writing.load(Ordering::Relaxed);
    let left = Left {
        clean,
        discard: s.discard,
        pin: s.pin,
    };
    (end, left)
}
