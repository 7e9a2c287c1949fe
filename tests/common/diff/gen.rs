//! The sequence generator: pure and seeded. A [`Sequence`] is a list of
//! steps, each a short script of actions (send these messages, read up to
//! that many ReadyForQuery, ...) for client A, the subject, or client B,
//! which runs short self-contained steps between A's so that in
//! transaction and statement pooling backends change hands between A's
//! steps. The same seed and mode always give the same sequence.
//!
//! Every SQL text uses `{T}` for the target's tag: A's table `a_{T}` (id
//! int primary key, v text; rows 1..5 at the start), B's table `b_{T}` (id
//! serial, v text), the channel `ch_{T}`, the application names `a_{T}`
//! and `b_{T}`.

use std::fmt::Write as _;

use super::msg::{Fe, Param, Text};
use super::rng::Rng;

mod cancel;
mod client_b;
mod copy;
mod extended;
mod simple;
mod sql;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Session,
    Transaction,
    Statement,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Session, Mode::Transaction, Mode::Statement];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Session => "session",
            Mode::Transaction => "transaction",
            Mode::Statement => "statement",
        }
    }

    /// Three letters for tags and role names.
    pub fn short(self) -> &'static str {
        match self {
            Mode::Session => "ses",
            Mode::Transaction => "txn",
            Mode::Statement => "stm",
        }
    }

    /// Whether the generator may open transaction blocks. Statement
    /// pooling refuses them by design (README: FATAL 0A000 "transaction
    /// blocks are not allowed in statement pooling mode"), a documented
    /// outcome rather than a deviation, so its sequences have none.
    pub fn allows_blocks(self) -> bool {
        self != Mode::Statement
    }

    pub fn from_name(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    A,
    B,
}

/// What a Read waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Until {
    /// This many ReadyForQuery.
    Ready(usize),
    /// After a Flush: this many messages that end the answer to one
    /// frontend message (ParseComplete, BindComplete, CloseComplete,
    /// RowDescription, NoData, CommandComplete, PortalSuspended,
    /// EmptyQueryResponse), or an ErrorResponse (after which the server
    /// answers nothing until Sync). Returns at once when an error arrived
    /// since the last ReadyForQuery.
    Replies(usize),
    /// CopyInResponse, or ReadyForQuery when the COPY failed before it began.
    CopyIn,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Writes the messages back to back; `cuts` (parts per million of the
    /// encoded length) split the write into pieces with a short pause
    /// between them.
    Send {
        msgs: Vec<Fe>,
        cuts: Vec<u32>,
    },
    /// Writes the first `keep` ppm of the encoded messages, then closes
    /// the socket (a disconnect in the middle of a message).
    SendPartialAndClose {
        msgs: Vec<Fe>,
        keep: u32,
    },
    Read(Until),
    /// Only when the last Read ended with CopyInResponse.
    IfCopyIn(Vec<Action>),
    /// Waits until PostgreSQL shows a query containing this marker as
    /// active (or the client was already answered), with a deadline.
    WaitActive(String),
    /// CancelRequest with this client's BackendKeyData, on a new
    /// connection; with `wait`, waits until the server closes that
    /// connection, else closes it right after the write.
    Cancel {
        wait: bool,
    },
    /// Closes the socket without Terminate.
    Close,
    /// Terminate, then reads until the server closes.
    Terminate,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub who: Who,
    pub what: String,
    pub actions: Vec<Action>,
    /// A cancel race: only the outcome (cancelled with 57014, or
    /// completed) and the final ReadyForQuery are compared.
    pub cancel: bool,
    /// A cancel racing a short query: either outcome is PostgreSQL's
    /// (timing decides), so only the final ReadyForQuery is compared.
    pub any_outcome: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    pub seed: u64,
    pub mode: Mode,
    pub steps: Vec<Step>,
    /// Statement names A defined (the probe checks none of them is
    /// visible to the next client).
    pub a_statements: Vec<String>,
    /// Set when only some of the generated steps are kept (their indices).
    pub kept: Option<Vec<usize>>,
}

impl Sequence {
    /// Human-readable listing for failure reports.
    pub fn show(&self) -> String {
        let mut s = format!(
            "sequence seed={:#018x} mode={} ({} steps{})\n",
            self.seed,
            self.mode.name(),
            self.steps.len(),
            match &self.kept {
                Some(k) => format!(", only generated steps {k:?}"),
                None => String::new(),
            }
        );
        for (i, st) in self.steps.iter().enumerate() {
            let i = self.kept.as_ref().map(|k| k[i]).unwrap_or(i);
            let _ = writeln!(
                s,
                "  step {i} [{:?}] {}{}",
                st.who,
                st.what,
                if st.any_outcome {
                    " (cancel race, either outcome)"
                } else if st.cancel {
                    " (cancel race)"
                } else {
                    ""
                }
            );
            show_actions(&mut s, &st.actions, 6);
        }
        s
    }

    /// The same sequence with only these steps (indices into `steps`), as
    /// the shrinker and `PGHARBOR_DIFF_KEEP` use it.
    pub fn keep(&self, keep: &[usize]) -> Sequence {
        let mut s = self.clone();
        s.steps = keep
            .iter()
            .filter_map(|&i| self.steps.get(i).cloned())
            .collect();
        s.kept = Some(keep.to_vec());
        s
    }

    /// Every message of the sequence, in order (for the well-formedness test).
    pub fn messages(&self) -> Vec<&Fe> {
        fn walk<'a>(acts: &'a [Action], out: &mut Vec<&'a Fe>) {
            for a in acts {
                match a {
                    Action::Send { msgs, .. } | Action::SendPartialAndClose { msgs, .. } => {
                        out.extend(msgs.iter())
                    }
                    Action::IfCopyIn(inner) => walk(inner, out),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        for st in &self.steps {
            walk(&st.actions, &mut out);
        }
        out
    }
}

fn show_actions(s: &mut String, acts: &[Action], indent: usize) {
    let pad = " ".repeat(indent);
    for a in acts {
        match a {
            Action::Send { msgs, cuts } => {
                let _ = writeln!(
                    s,
                    "{pad}send{}:",
                    if cuts.is_empty() {
                        String::new()
                    } else {
                        format!(" in {} pieces (cuts at ppm {cuts:?})", cuts.len() + 1)
                    }
                );
                for m in msgs {
                    let _ = writeln!(s, "{pad}  {}", m.show());
                }
            }
            Action::SendPartialAndClose { msgs, keep } => {
                let _ = writeln!(s, "{pad}send the first {keep} ppm of, then close:");
                for m in msgs {
                    let _ = writeln!(s, "{pad}  {}", m.show());
                }
            }
            Action::Read(u) => {
                let _ = writeln!(s, "{pad}read until {u:?}");
            }
            Action::IfCopyIn(inner) => {
                let _ = writeln!(s, "{pad}if CopyInResponse:");
                show_actions(s, inner, indent + 2);
            }
            Action::WaitActive(m) => {
                let _ = writeln!(s, "{pad}wait until {m:?} is active");
            }
            Action::Cancel { wait } => {
                let _ = writeln!(
                    s,
                    "{pad}CancelRequest{}",
                    if *wait {
                        ", wait for the server to close it"
                    } else {
                        ", not waiting"
                    }
                );
            }
            Action::Close => {
                let _ = writeln!(s, "{pad}close the socket");
            }
            Action::Terminate => {
                let _ = writeln!(s, "{pad}Terminate, read until closed");
            }
        }
    }
}

/// A generated statement in both forms.
#[derive(Debug, Clone)]
struct Sql {
    /// Extended protocol text, `$n` parameters.
    ext: Text,
    params: Vec<Param>,
    types: Vec<u32>,
    /// Simple protocol text, literals inlined.
    simple: Text,
    /// Certainly fails.
    fails: bool,
    /// Returns rows (worth a row limit).
    rows: bool,
}

impl Sql {
    fn plain(sql: &str) -> Sql {
        Sql {
            ext: Text::s(sql),
            params: vec![],
            types: vec![],
            simple: Text::s(sql),
            fails: false,
            rows: false,
        }
    }
    fn rows(mut self) -> Sql {
        self.rows = true;
        self
    }
    fn fails(mut self) -> Sql {
        self.fails = true;
        self
    }
    fn with(ext: &str, params: Vec<Param>, simple: &str) -> Sql {
        Sql {
            ext: Text::s(ext),
            params,
            types: vec![],
            simple: Text::s(simple),
            fails: false,
            rows: false,
        }
    }
}

fn text(s: impl Into<String>) -> Param {
    Param::Text(Text::S(s.into()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Txn {
    Idle,
    Open,
    Failed,
}

#[derive(Debug, Clone)]
struct Named {
    name: String,
    params: Vec<Param>,
}

struct Gen {
    rng: Rng,
    mode: Mode,
    steps: Vec<Step>,
    /// A's transaction state as far as the generator can tell (a guess: a
    /// statement that may fail leaves it Open). Only steers choices.
    txn: Txn,
    savepoint: bool,
    named: Vec<Named>,
    all_named: Vec<String>,
    /// Parameters of A's unnamed statement, if A defined one since its
    /// last simple Query.
    unnamed: Option<Vec<Param>>,
    /// A's unnamed statement is a COPY or the long sleep of a cancel step
    /// (binding it again would wait for COPY data or sleep).
    unnamed_no_rebind: bool,
    /// Portals that may still exist (inside a transaction block).
    portals: Vec<String>,
    listening: bool,
    counter: u32,
    /// Ids for COPY rows (above the range INSERTs use).
    copy_id: u32,
}

/// Most parts of a sequence; `generate` is the entry point.
pub fn generate(seed: u64, mode: Mode) -> Sequence {
    let mut g = Gen {
        rng: Rng::new(seed),
        mode,
        steps: Vec::new(),
        txn: Txn::Idle,
        savepoint: false,
        named: Vec::new(),
        all_named: Vec::new(),
        unnamed: None,
        unnamed_no_rebind: false,
        portals: Vec::new(),
        listening: false,
        counter: 0,
        copy_id: 100,
    };
    let n = g.rng.range(3, 14);
    for _ in 0..n {
        if g.rng.chance(30) {
            g.b_step();
        }
        g.a_step();
    }
    g.a_end();
    g.steps.push(Step {
        who: Who::B,
        what: "B leaves".into(),
        actions: vec![Action::Terminate],
        cancel: false,
        any_outcome: false,
    });
    Sequence {
        seed,
        mode,
        steps: g.steps,
        a_statements: g.all_named,
        kept: None,
    }
}

/// ReadyForQuery messages a write of these messages yields: one per Query
/// and per Sync (the generator puts Queries only between batches, never
/// between an extended message and its Sync).
fn readies(msgs: &[Fe]) -> usize {
    msgs.iter()
        .filter(|m| matches!(m, Fe::Query(_) | Fe::Sync))
        .count()
}

/// Messages since the last Sync whose answers end with one terminal reply
/// (see [`Until::Replies`]).
fn replies(msgs: &[Fe]) -> usize {
    msgs.iter()
        .filter(|m| {
            matches!(
                m,
                Fe::Parse { .. }
                    | Fe::Bind { .. }
                    | Fe::Describe { .. }
                    | Fe::Execute { .. }
                    | Fe::Close { .. }
            )
        })
        .count()
}

impl Gen {
    fn set_unnamed(&mut self, params: Option<Vec<Param>>) {
        self.unnamed = params;
        self.unnamed_no_rebind = false;
    }

    fn next(&mut self) -> u32 {
        self.counter += 1;
        self.counter
    }

    fn cuts(&mut self, big: bool) -> Vec<u32> {
        let n = if big {
            self.rng.range(2, 8)
        } else if self.rng.chance(20) {
            self.rng.range(1, 6)
        } else {
            0
        };
        let mut c: Vec<u32> = (0..n).map(|_| self.rng.ppm()).collect();
        c.sort_unstable();
        c.dedup();
        c
    }

    fn push(&mut self, who: Who, what: impl Into<String>, actions: Vec<Action>) {
        self.steps.push(Step {
            who,
            what: what.into(),
            actions,
            cancel: false,
            any_outcome: false,
        });
    }

    /// Send + read up to the ReadyForQuery messages they cause.
    fn send_read(&mut self, msgs: Vec<Fe>) -> Vec<Action> {
        let big = msgs.iter().any(is_big);
        let n = readies(&msgs);
        let cuts = self.cuts(big);
        vec![Action::Send { msgs, cuts }, Action::Read(Until::Ready(n))]
    }

    fn big_len(&mut self) -> usize {
        self.rng.range(1 << 20, 4 << 20) + self.rng.below(4096)
    }

    fn table_id(&mut self) -> u32 {
        self.rng.range(1, 12) as u32
    }
}

fn is_big(m: &Fe) -> bool {
    match m {
        Fe::Query(t) | Fe::CopyData(t) => t.len_hint() > 1 << 16,
        Fe::Parse { sql, .. } => sql.len_hint() > 1 << 16,
        Fe::Bind { params, .. } => params
            .iter()
            .any(|p| matches!(p, Param::Text(t) if t.len_hint() > 1 << 16)),
        _ => false,
    }
}
