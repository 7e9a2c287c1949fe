//! The relay, one for every pool mode: moving bytes between a client and
//! its backend, both directions at once, with every message accounted in
//! the backend's [`Ledger`] so the pooler always knows whose reply comes
//! next and what the backend is doing.
//!
//! Each direction reads a large chunk into a reused buffer, walks the
//! message headers in place, and forwards unchanged runs straight from the
//! read buffer; only a chunk with a rewritten, added or answered message is
//! copied. Running the two directions concurrently (rather than one
//! `select!` that writes inline) keeps a server that streams results while
//! the client streams input from deadlocking against the pooler.
//!
//! Session pooling is this relay pinned, with rewriting off: the client's
//! messages are only accounted. Transaction and statement pooling add the
//! [`Rewriter`] (statement names, pinning) and end the relay the moment the
//! backend is idle with nothing owed.

mod down;
mod follow;
mod meter;
mod up;

use crate::client::gate::{Gate, Gated};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::client::signal::Signal;

pub use follow::Follow;
pub(crate) use meter::Progress;
pub use meter::{Meter, RelayEnd};

use super::txn::rewrite::{Pin, Rewriter};
use super::txn::statements::{ClientStatements, UNNAMED};
use crate::backend::owed::{CacheFix, Expect, Reply};
use crate::backend::{Ledger, Link, ParamSet};
use crate::protocol::scan::Scanner;
use crate::protocol::sql::{Setting, Strings};
use crate::protocol::tags::fe;
use crate::protocol::FrameBuf;
use crate::stream::{ReadHalf, WriteHalf};
use down::Down;
use up::Up;

/// Largest client message read whole to be rewritten or classified.
pub const WHOLE_CAP: usize = 1 << 20;
/// Of a client message too large to read whole, how much must be buffered
/// before it is looked at: enough for the names at the start of a Bind or
/// Parse (PostgreSQL truncates identifiers to 63 bytes; longer names are
/// still valid statement names, but not this long).
pub const PREFIX_CAP: usize = 64 * 1024;

/// How the relay should behave.
pub struct Mode<'r, 'x> {
    /// Return as soon as the backend is idle (false: session pooling, or a
    /// pinned client).
    pub release_at_idle: bool,
    /// Statement pooling: a transaction block is refused.
    pub statement: bool,
    /// Close a client that sits idle inside a transaction this long.
    pub idle_tx_timeout: Option<Duration>,
    /// Transaction pooling's rewriting; `None` in session pooling.
    pub rewriter: Option<&'r mut Rewriter<'x>>,
    /// The parameters the client was shown, kept current from the
    /// server's reports (transaction pooling: they follow the client).
    pub client_params: Option<&'r mut Arc<ParamSet>>,
    /// Who the client is, for whose unnamed statement the backend holds.
    pub client_id: u64,
    /// The client's named statements, which both directions consult.
    pub statements: &'r mut ClientStatements,
    /// How the client's SQL reads as the relay starts (kept by the client
    /// between relays, see [`Left::strings`]).
    pub strings: Strings,
}

/// How a relay over one backend ended.
#[derive(Debug)]
pub enum TxnEnd {
    /// The backend is idle and owes nothing: give it back.
    Idle,
    /// The client or server ended (or the relay must end).
    Ended(RelayEnd),
}

/// What the relay learnt about the client while it held the backend.
#[derive(Debug, Clone, Default)]
pub struct Left {
    /// Why the client must keep this backend, if it must.
    pub pin: Option<Pin>,
    /// The client's followed SETs and RESETs that lasted, in order.
    pub settings: Vec<Setting>,
    /// How the client's SQL reads now.
    pub strings: Strings,
}

/// State both directions share while a client holds a backend: the
/// backend's ledger, and what belongs to this client's hold of it.
pub struct Shared<'l> {
    /// The backend's protocol state.
    pub ledger: &'l mut Ledger,
    /// Cache corrections for the client (`Undefine`).
    pub fixes: Vec<CacheFix>,
    /// Set once the client must keep this backend.
    pub pin: Option<Pin>,
    /// A client's DISCARD ALL / DEALLOCATE ALL is in flight: if it fails,
    /// nobody knows what is left prepared, so the backend is closed.
    pub cache_doubt: bool,
    /// Names the client defined in batches not yet answered, with the
    /// serial of each definition.
    pub defined: Vec<(u64, Box<[u8]>)>,
    /// Names whose Parse failed or was skipped: the up direction forgets them.
    pub undefined: Vec<Box<[u8]>>,
    /// After an error the pooler raised itself, the client's messages up
    /// to its Sync are dropped, as the server drops them after its own.
    pub skipping_to_sync: bool,
    /// The client holding the backend.
    pub client_id: u64,
    /// The client's named statements (transaction pooling; empty otherwise).
    pub statements: &'l mut ClientStatements,
    /// How the client's SQL reads: its standard_conforming_strings, or
    /// unknown while a statement that may change it is unanswered.
    pub strings: Strings,
    /// What became of the client's followed settings.
    pub follow: Follow,
    /// Pooler statements PostgreSQL can no longer run as prepared (the
    /// tables under them changed type): new Parses of their text get new
    /// statements, prepared afresh.
    pub retired: Vec<u64>,
}

impl<'l> Shared<'l> {
    /// Fresh client-side state over a backend's ledger.
    pub fn new(
        ledger: &'l mut Ledger,
        client_id: u64,
        statements: &'l mut ClientStatements,
    ) -> Self {
        Shared {
            ledger,
            fixes: Vec::new(),
            pin: None,
            cache_doubt: false,
            defined: Vec::new(),
            undefined: Vec::new(),
            skipping_to_sync: false,
            client_id,
            statements,
            strings: Strings::Standard,
            follow: Follow::default(),
            retired: Vec::new(),
        }
    }

    /// Records a message sent (or answered); moves the client's own cache
    /// corrections to `undefined`.
    pub fn push(&mut self, e: Expect) {
        self.ledger.push(e, &mut self.fixes);
        if !self.fixes.is_empty() {
            self.apply_fixes();
        }
    }

    /// Moves names whose Parse failed or was skipped to `undefined`.
    pub fn apply_fixes(&mut self) {
        for f in self.fixes.drain(..) {
            match f {
                CacheFix::Undefine(UNNAMED) => self.statements.unnamed_unknown(),
                CacheFix::Undefine(def) => {
                    if let Some(at) = self.defined.iter().position(|(d, _)| *d == def) {
                        let (_, name) = self.defined.swap_remove(at);
                        self.undefined.push(name);
                    }
                }
                CacheFix::FollowedQuery { ok } => self.follow.answered(ok),
                CacheFix::Forget(_) | CacheFix::Restore(_) => {}
            }
        }
    }

    /// Pins the client (the first reason wins).
    pub fn pin(&mut self, p: Pin) {
        if self.pin.is_none() {
            self.pin = Some(p);
        }
    }
}

/// Accounts a client message the pooler does not rewrite: the reply it
/// earns, if any.
pub fn account_plain(tag: u8, shared: &mut Shared<'_>) {
    match tag {
        fe::FLUSH => shared.ledger.flushed(),
        fe::COPY_DONE | fe::COPY_FAIL => shared.push(Expect::CopyEnd),
        fe::COPY_DATA => shared.push(Expect::CopyData),
        fe::SYNC => {
            shared.ledger.prepared().next_batch();
            shared.push(Expect::Client(Reply::Sync));
        }
        t => {
            if let Some(r) = Reply::for_frontend(t) {
                shared.push(Expect::Client(r));
            }
        }
    }
}

/// How the SQL of a client shown `params` reads.
pub(crate) fn client_strings(params: Option<&ParamSet>) -> Strings {
    Strings::from_setting(params.and_then(|p| p.get("standard_conforming_strings")))
}

/// The gates of a relay's two directions (see [`Gated`]), kept by the
/// client between its relays.
#[derive(Default)]
pub struct Gates {
    up: Gate,
    down: Gate,
}

/// Flags the directions share besides the [`Shared`] state.
struct Flags {
    /// The up direction is in the middle of a write to the server.
    writing: AtomicBool,
    /// The client is in the middle of a message part of which went out.
    client_mid: AtomicBool,
    /// Synthetic replies were queued: the down direction must send them.
    due: Signal,
    /// The server went idle inside a transaction: the client's clock starts
    /// (`None` without an idle-in-transaction limit: nobody watches).
    idle_in_tx: Option<Notify>,
    /// Statements the pooler queued wait for the client's first bytes: the
    /// server is not answering them yet, so their clock has not started.
    queued_unsent: AtomicBool,
}

/// Relays one client over one backend until the backend can be given back
/// (transaction pooling) or the session ends.
pub async fn relay(
    (cr, cw): (&mut ReadHalf<'_>, &mut WriteHalf<'_>),
    cbuf: &mut FrameBuf,
    cscan: &mut Scanner,
    link: &mut Link,
    (meter, gates): (&mut Meter<'_>, &Gates),
    mode: Mode<'_, '_>,
) -> (TxnEnd, Left) {
    let command_timeout = link.command_timeout();
    let parts = link.relay_parts();
    let mut shared = Shared::new(parts.ledger, mode.client_id, mode.statements);
    shared.strings = mode.strings;
    let shared = Mutex::new(shared);
    let flags = Flags {
        writing: AtomicBool::new(false),
        client_mid: AtomicBool::new(!cscan.at_boundary()),
        due: Signal::default(),
        idle_in_tx: mode.idle_tx_timeout.map(|_| Notify::new()),
        queued_unsent: AtomicBool::new(!parts.queued.is_empty()),
    };
    // Only the rewriter and statements queued at checkout put the pooler's
    // own messages on the wire during a relay.
    let own_statements = !parts.queued.is_empty();
    let progress = Progress::new(meter);
    let (mut br, mut bw) = parts.stream.split();
    let Mode {
        release_at_idle,
        statement,
        idle_tx_timeout,
        mut rewriter,
        client_params,
        ..
    } = mode;
    let answers = rewriter.is_some();
    let end = {
        // Each wake polls only the direction it is for. Each gated future
        // is pinned where it is made: moved into the select, it would be
        // copied whole (over a kilobyte) per relay.
        let up = std::pin::pin!(Gated::new(
            Up {
                shared: &shared,
                flags: &flags,
                progress: &progress,
                rewriter: rewriter.as_deref_mut(),
                idle_tx_timeout,
                dropping: false,
                queue_send: if release_at_idle {
                    up::QueueSend::AtOnce
                } else {
                    up::QueueSend::WithClient
                },
            }
            .run(cr, &mut bw, cbuf, cscan, parts.queued),
            &gates.up,
        ));
        let down = std::pin::pin!(Gated::new(
            Down {
                shared: &shared,
                flags: &flags,
                progress: &progress,
                release_at_idle,
                statement,
                answers,
                own_statements: answers || own_statements,
                command_timeout,
            }
            .run(
                &mut br,
                cw,
                (parts.buf, parts.scanner),
                client_params,
                meter,
            ),
            &gates.down,
        ));
        // Up first: it forwards what the client already sent before down
        // can decide the backend is idle.
        tokio::select! {
            biased;
            end = up => TxnEnd::Ended(end),
            end = down => end,
        }
    };
    meter.relay_done(&progress.bytes_in);
    let mut s = match shared.into_inner() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    if flags.writing.load(Ordering::Relaxed) {
        s.ledger.break_with("a write to the server was cut short");
    }
    if let TxnEnd::Ended(RelayEnd::BackendGone(why)) = &end {
        s.ledger.break_with(why.clone());
    }
    if let TxnEnd::Ended(RelayEnd::BackendFatal) = &end {
        s.ledger.break_with("the server ended the session");
    }
    s.ledger.set_sent_partial(!cscan.at_boundary());
    if let Some(rw) = rewriter {
        // Names whose Parse failed in this relay's last replies.
        rw.forget_undefined(&mut s);
    }
    // What the client's settings did is what the backend now has.
    let (lasted, voided) = s.follow.take_outcomes();
    s.ledger.applied().settle(&lasted, &voided);
    let left = Left {
        pin: s.pin,
        settings: lasted,
        strings: s.strings,
    };
    (end, left)
}
