//! The server → client direction of the relay.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use std::task::Poll;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

mod scan;

use super::{Flags, Meter, Progress, RelayEnd, Shared, TxnEnd};
use crate::backend::{BackendError, ParamSet, PoolerStatement, TxStatus};
use crate::protocol::scan::Scanner;
use crate::protocol::FrameBuf;
use crate::stream::{poll_fill, ReadHalf, WriteHalf};
use scan::Chunk;

pub(super) struct Down<'s, 'b> {
    pub(super) shared: &'s Mutex<Shared<'b>>,
    pub(super) flags: &'s Flags,
    pub(super) progress: &'s Progress,
    pub(super) release_at_idle: bool,
    pub(super) statement: bool,
    /// The up direction may queue replies of the pooler's own (it rewrites):
    /// wait for those as well as for the server.
    pub(super) answers: bool,
    /// The pooler may send statements of its own in this relay.
    pub(super) own_statements: bool,
    /// Bound on the server's answer to each of the pooler's own statements.
    pub(super) command_timeout: Duration,
}

impl Down<'_, '_> {
    pub(super) async fn run(
        self,
        br: &mut ReadHalf<'_>,
        cw: &mut WriteHalf<'_>,
        (buf, scan): (&mut FrameBuf, &mut Scanner),
        mut client_params: Option<&mut Arc<ParamSet>>,
        meter: &mut Meter<'_>,
    ) -> TxnEnd {
        let mut out: Vec<u8> = Vec::new();
        let mut fatal = false;
        // Since when the next reply owed is to one of the pooler's own messages.
        let mut own_since: Option<Instant> = None;
        // The last pass sent what it scanned: the replies of the pooler's
        // own that were due then went with it, and one that comes due later
        // is signalled through `due`.
        let mut just_sent = false;
        loop {
            if let Some(end) = self.check_idle(buf, scan) {
                return end;
            }
            // An empty buffer has nothing to scan, unless replies of the
            // pooler's own may have come due since the last pass.
            let nothing_due = !self.answers || std::mem::take(&mut just_sent);
            let chunk = if buf.is_empty() && nothing_due {
                Ok(Chunk {
                    pos: 0,
                    modified: false,
                    exchange_done: false,
                    in_tx: false,
                    answered: (0, 0),
                })
            } else {
                self.scan_chunk(
                    buf,
                    scan,
                    &mut out,
                    client_params.as_deref_mut(),
                    &mut fatal,
                )
            };
            let Chunk {
                pos,
                modified,
                exchange_done,
                in_tx,
                answered,
            } = match chunk {
                Ok(c) => c,
                Err(why) => return TxnEnd::Ended(RelayEnd::BackendGone(why)),
            };
            if pos > 0 || modified {
                let data: &[u8] = if modified {
                    &out
                } else {
                    &buf.readable()[..pos]
                };
                if cw.write_all(data).await.is_err() {
                    return TxnEnd::Ended(RelayEnd::ClientGone);
                }
                meter.sent_to_client(pos as u64);
                buf.consume(pos);
                out.clear();
                if answered.0 > 0 {
                    meter.answered(answered.0, answered.1);
                }
                if exchange_done {
                    meter.exchange_done(self.progress, in_tx);
                }
                just_sent = true;
                continue;
            }
            let own = self.own_statement_deadline(&mut own_since);
            // Replies the pooler owes may come due while the server is
            // quiet: they are taken first, and the next pass sends them.
            let watch_due =
                own.is_some() || self.answers || self.flags.queued_unsent.load(Ordering::Relaxed);
            let read = std::future::poll_fn(|cx| {
                if watch_due && self.flags.due.poll_take(cx).is_ready() {
                    return Poll::Ready(None);
                }
                poll_fill(br, cx, buf).map(Some)
            });
            let read = match own {
                // The server is answering the pooler's own SET, Parse or
                // Close now, ahead of the client's messages: bounded, so a
                // server that stops answering does not hold the client.
                Some(at) => match tokio::time::timeout_at(at, read).await {
                    Ok(r) => r,
                    Err(_) => {
                        let e = BackendError::CommandTimeout {
                            what: PoolerStatement::Prepared,
                            timeout: self.command_timeout,
                        };
                        return TxnEnd::Ended(RelayEnd::BackendGone(e.to_string()));
                    }
                },
                None => read.await,
            };
            let Some(read) = read else {
                continue;
            };
            if let Err(e) = read {
                if fatal {
                    return TxnEnd::Ended(RelayEnd::BackendFatal);
                }
                return TxnEnd::Ended(RelayEnd::BackendGone(e.to_string()));
            }
        }
    }

    /// When the wait for the reply to the pooler's own statement at the
    /// head of the queue must end, if one is at the head (its clock starts
    /// when it gets there: the server answers in order).
    fn own_statement_deadline(&self, since: &mut Option<Instant>) -> Option<Instant> {
        let injected = self.own_statements
            && !self.flags.queued_unsent.load(Ordering::Relaxed)
            && self
                .shared
                .lock()
                .is_ok_and(|s| s.ledger.owed().head_is_injected());
        if !injected {
            *since = None;
            return None;
        }
        let started = *since.get_or_insert_with(Instant::now);
        Some(started + self.command_timeout)
    }

    /// The end of this relay if the backend can be given back now (or a
    /// statement-mode client opened a transaction).
    #[inline]
    fn check_idle(&self, buf: &FrameBuf, scan: &Scanner) -> Option<TxnEnd> {
        if !self.release_at_idle && !self.statement {
            return None;
        }
        self.idle_end(buf, scan)
    }

    /// [`Down::check_idle`] for a relay that ends at idle.
    fn idle_end(&self, buf: &FrameBuf, scan: &Scanner) -> Option<TxnEnd> {
        // What needs no lock first: right after a read the buffer holds
        // what came, and the books need not be looked at.
        if !buf.is_empty()
            || !scan.at_boundary()
            || self.flags.writing.load(Ordering::Relaxed)
            || self.flags.client_mid.load(Ordering::Relaxed)
        {
            return None;
        }
        let s = self.shared.lock().ok()?;
        let owed = s.ledger.owed();
        if !owed.is_empty() || owed.unsynced() != 0 {
            return None;
        }
        if s.ledger.tx() != TxStatus::Idle {
            return self
                .statement
                .then_some(TxnEnd::Ended(RelayEnd::TransactionInStatementMode));
        }
        (self.release_at_idle && s.pin.is_none()).then_some(TxnEnd::Idle)
    }
}
