//! Target `replies`: the owed-reply queue ([`Owed`]) agrees with a model of
//! how PostgreSQL answers a stream of frontend messages
//! (src/backend/tcop/postgres.c: one reply per extended message, an error
//! skips to Sync, Query and FunctionCall end with ReadyForQuery; copyfrom.c:
//! Sync and Flush are ignored during COPY IN, CopyData/CopyDone/CopyFail
//! are ignored outside it), however the server's replies interleave with
//! the client's pipelined messages.
//!
//! Input: each byte is one step. Its low 4 bits pick a client message (the
//! model only picks what a client may send in its state); its high bits
//! pick the server's answer (an error, rows, a COPY, a row limit). Then the
//! server's replies are delivered, each no earlier than the message that
//! caused it, at points a second pass over the input chooses.
//!
//! Properties: every server message is accepted and goes to the client;
//! the pooler's own statements (added between batches) are dropped; once
//! everything is delivered the queue is empty unless the model is still in
//! COPY IN, and its COPY state matches the model's.

use super::{ensure, Failure};
use crate::backend::owed::{CopyDir, Disposition, Expect, Owed, Reply};
use crate::protocol::tags::{be, fe};

/// One message of the client stream, with the replies PostgreSQL sends
/// for it (and whether those are the pooler's).
struct Step {
    /// What the pooler records for it (CopyData records nothing).
    sent: Option<Expect>,
    replies: Vec<u8>,
    pooler: bool,
}

/// The model's view of the server.
#[derive(Default)]
struct Model {
    /// ignore_till_sync after an error in an extended batch.
    skipping: bool,
    /// In COPY IN, and whether it was started by a simple Query.
    copy_in: Option<bool>,
    /// CopyData was sent in this COPY: the model sends no Sync after it
    /// (see `Owed::copy_ended` for why the pooler cannot tell those apart).
    copy_data_sent: bool,
    /// Extended messages since the last Sync.
    open_batch: bool,
}

impl Model {
    /// The next client message the input byte `b` picks, and what the
    /// server answers; `None` when the byte picks nothing sendable now.
    fn step(&mut self, b: u8) -> Option<Step> {
        let (pick, how) = (b & 0x0f, b >> 4);
        let error = how & 0b11 == 0b11;
        if let Some(simple) = self.copy_in {
            return Some(self.in_copy(pick, error, simple));
        }
        let client = |t: u8| match (t, Reply::for_frontend(t)) {
            (fe::COPY_DATA, _) => Some(Expect::CopyData),
            (_, Some(r)) => Some(Expect::Client(r)),
            (_, None) => Some(Expect::CopyEnd),
        };
        let mut replies = Vec::new();
        let tag = match pick {
            0..=1 => fe::QUERY,
            2 => fe::PARSE,
            3 => fe::BIND,
            4 => fe::DESCRIBE,
            5..=6 => fe::EXECUTE,
            7 => fe::CLOSE,
            8..=9 => fe::SYNC,
            10 => fe::FLUSH,
            11 => fe::FUNCTION_CALL,
            12 => fe::COPY_DATA,
            13 => fe::COPY_DONE,
            14 => fe::COPY_FAIL,
            _ if !self.open_batch && !self.skipping => {
                // The pooler's own statement, only ever between batches.
                return Some(Step {
                    sent: Some(Expect::Injected(Reply::Query { follows: false })),
                    replies: vec![
                        be::PARAMETER_STATUS,
                        be::NOTICE_RESPONSE,
                        be::COMMAND_COMPLETE,
                        be::READY_FOR_QUERY,
                    ],
                    pooler: true,
                });
            }
            _ => return None,
        };
        if tag == fe::FLUSH {
            self.open_batch = true;
            return None;
        }
        if matches!(tag, fe::COPY_DATA | fe::COPY_DONE | fe::COPY_FAIL) {
            // Outside COPY these are ignored, whatever the state.
            return Some(Step {
                sent: client(tag),
                replies,
                pooler: false,
            });
        }
        if tag == fe::SYNC {
            self.skipping = false;
            self.open_batch = false;
            replies.push(be::READY_FOR_QUERY);
            return Some(Step {
                sent: client(tag),
                replies,
                pooler: false,
            });
        }
        let extended = !matches!(tag, fe::QUERY | fe::FUNCTION_CALL);
        if self.skipping {
            if extended {
                self.open_batch = true;
            }
            return Some(Step {
                sent: client(tag),
                replies,
                pooler: false,
            });
        }
        if extended {
            self.open_batch = true;
        }
        match tag {
            fe::QUERY | fe::FUNCTION_CALL if error => {
                replies.extend([be::ERROR_RESPONSE, be::READY_FOR_QUERY]);
            }
            fe::QUERY if how & 0b11 == 0b10 => {
                replies.push(be::COPY_IN_RESPONSE);
                self.copy_in = Some(true);
            }
            fe::QUERY if how & 0b11 == 0b01 => replies.extend([
                be::COPY_OUT_RESPONSE,
                be::COPY_DATA,
                be::COPY_DONE,
                be::COMMAND_COMPLETE,
                be::NOTICE_RESPONSE,
                be::READY_FOR_QUERY,
            ]),
            fe::QUERY => replies.extend([
                be::ROW_DESCRIPTION,
                be::DATA_ROW,
                be::COMMAND_COMPLETE,
                be::PARAMETER_STATUS,
                be::READY_FOR_QUERY,
            ]),
            fe::FUNCTION_CALL => replies.extend([be::FUNCTION_CALL_RESPONSE, be::READY_FOR_QUERY]),
            _ if error => {
                replies.push(be::ERROR_RESPONSE);
                self.skipping = true;
            }
            fe::PARSE => replies.push(be::PARSE_COMPLETE),
            fe::BIND => replies.push(be::BIND_COMPLETE),
            fe::CLOSE => replies.push(be::CLOSE_COMPLETE),
            fe::DESCRIBE if how & 1 == 1 => {
                replies.extend([be::PARAMETER_DESCRIPTION, be::ROW_DESCRIPTION])
            }
            fe::DESCRIBE => replies.push(be::NO_DATA),
            _ => match how & 0b11 {
                0b10 => {
                    replies.push(be::COPY_IN_RESPONSE);
                    self.copy_in = Some(false);
                }
                0b01 => replies.extend([
                    be::COPY_OUT_RESPONSE,
                    be::COPY_DATA,
                    be::COPY_DONE,
                    be::COMMAND_COMPLETE,
                ]),
                _ if how & 0b100 != 0 => replies.extend([be::DATA_ROW, be::PORTAL_SUSPENDED]),
                _ => replies.extend([be::DATA_ROW, be::DATA_ROW, be::COMMAND_COMPLETE]),
            },
        }
        Some(Step {
            sent: client(tag),
            replies,
            pooler: false,
        })
    }

    /// A client message during COPY IN: data, its end, or a Sync the
    /// server ignores.
    fn in_copy(&mut self, pick: u8, error: bool, simple: bool) -> Step {
        let mut replies = Vec::new();
        let sent = match pick % 4 {
            0 if !self.copy_data_sent => Some(Expect::Client(Reply::Sync)),
            1 => {
                // CopyDone, or CopyFail when `error`.
                self.copy_in = None;
                replies.push(if error {
                    be::ERROR_RESPONSE
                } else {
                    be::COMMAND_COMPLETE
                });
                if simple {
                    replies.push(be::READY_FOR_QUERY);
                } else if error {
                    self.skipping = true;
                }
                Some(Expect::CopyEnd)
            }
            _ => {
                self.copy_data_sent = true;
                if error {
                    // Bad data: the COPY fails at once.
                    self.copy_in = None;
                    replies.push(be::ERROR_RESPONSE);
                    if simple {
                        replies.push(be::READY_FOR_QUERY);
                    } else {
                        self.skipping = true;
                    }
                }
                Some(Expect::CopyData)
            }
        };
        if self.copy_in.is_none() {
            self.copy_data_sent = false;
        }
        Step {
            sent,
            replies,
            pooler: false,
        }
    }
}

/// The check.
pub fn check(data: &[u8]) -> Result<(), Failure> {
    let half = data.len() / 2;
    let (script, schedule) = data.split_at(half);
    let mut model = Model::default();
    let steps: Vec<Step> = script.iter().filter_map(|&b| model.step(b)).collect();
    let mut owed = Owed::default();
    let mut fixes = Vec::new();
    let mut due = Vec::new();
    // Replies produced so far and not delivered: (tag, from the pooler).
    let mut pending: std::collections::VecDeque<(u8, bool)> = Default::default();
    let mut delivered = 0usize;
    let mut sched = schedule.iter().copied().cycle();
    for (i, step) in steps.iter().enumerate() {
        if let Some(e) = &step.sent {
            owed.push(e.clone(), &mut fixes);
        }
        pending.extend(step.replies.iter().map(|&t| (t, step.pooler)));
        // Deliver some of what the server has sent so far.
        let n = if schedule.is_empty() {
            pending.len()
        } else {
            usize::from(sched.next().unwrap_or(0) % 4).min(pending.len())
        };
        for _ in 0..n {
            deliver(&mut owed, &mut pending, &mut due, &mut fixes, i)?;
            delivered += 1;
        }
    }
    while !pending.is_empty() {
        deliver(&mut owed, &mut pending, &mut due, &mut fixes, steps.len())?;
        delivered += 1;
    }
    ensure!(
        due.is_empty(),
        "no synthetic reply was queued, yet {due:?} came due"
    );
    match model.copy_in {
        Some(_) => {
            ensure!(
                owed.copy() == Some(CopyDir::In) && !owed.is_empty(),
                "the server is in COPY IN, the queue says copy {:?} with {} owed",
                owed.copy(),
                owed.len()
            );
        }
        None => {
            ensure!(
                owed.is_empty(),
                "after {delivered} replies nothing is owed, the queue still holds {}",
                owed.len()
            );
            ensure!(
                owed.copy().is_none(),
                "no COPY runs, the queue says {:?}",
                owed.copy()
            );
        }
    }
    Ok(())
}

fn deliver(
    owed: &mut Owed,
    pending: &mut std::collections::VecDeque<(u8, bool)>,
    due: &mut Vec<u8>,
    fixes: &mut Vec<crate::backend::owed::CacheFix>,
    at: usize,
) -> Result<(), Failure> {
    let Some((tag, pooler)) = pending.pop_front() else {
        return Ok(());
    };
    owed.take_due(due, fixes);
    let want = if pooler && tag != be::NOTIFICATION_RESPONSE {
        Disposition::Drop
    } else {
        Disposition::Forward
    };
    match owed.on_server(tag, None, fixes) {
        Ok(d) => ensure!(
            d == want,
            "server message \"{}\" after client message {at}: {d:?}, want {want:?}",
            tag.escape_ascii()
        ),
        Err(e) => return Err(Failure(format!("after client message {at}: {e}"))),
    }
    Ok(())
}
