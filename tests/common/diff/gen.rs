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

    /// One statement for A; with `big`, one of multi-MiB text or reply.
    fn stmt(&mut self, big: bool) -> Sql {
        #[derive(Clone, Copy)]
        enum K {
            One,
            Series,
            Table,
            Add,
            DivZero,
            Syntax,
            Missing,
            BadInt,
            Insert,
            Update,
            Delete,
            Upsert,
            Nulls,
            Notice,
            Warning,
            Notify,
            Show,
            SetWorkMem,
            SetDateStyle,
            Date,
            Empty,
            BigRow,
            BigParam,
            BigNotice,
            BigError,
        }
        let choices = if big {
            vec![
                (3, K::BigRow),
                (3, K::BigParam),
                (2, K::BigNotice),
                (2, K::BigError),
            ]
        } else {
            vec![
                (8, K::One),
                (8, K::Series),
                (6, K::Table),
                (6, K::Add),
                (3, K::DivZero),
                (2, K::Syntax),
                (2, K::Missing),
                (2, K::BadInt),
                (8, K::Insert),
                (5, K::Update),
                (3, K::Delete),
                (4, K::Upsert),
                (3, K::Nulls),
                (4, K::Notice),
                (2, K::Warning),
                (3, K::Notify),
                (3, K::Show),
                (2, K::SetWorkMem),
                (2, K::SetDateStyle),
                (3, K::Date),
                (2, K::Empty),
            ]
        };
        let k = self.rng.weighted(&choices);
        match k {
            K::One => Sql::plain("SELECT 1 AS one").rows(),
            K::Series => {
                let n = self.rng.range(0, 40);
                Sql::with(
                    "SELECT g AS n, md5(g::text) AS h FROM generate_series(1, $1::int) g",
                    vec![text(n.to_string())],
                    &format!("SELECT g AS n, md5(g::text) AS h FROM generate_series(1, {n}) g"),
                )
                .rows()
            }
            K::Table => Sql::plain("SELECT id, v FROM a_{T} ORDER BY id").rows(),
            K::Add => {
                let n = self.rng.range(0, 1000) as i32;
                let mut s = Sql::with(
                    "SELECT $1::int + 1 AS next",
                    vec![text(n.to_string())],
                    &format!("SELECT {n}::int + 1 AS next"),
                )
                .rows();
                if self.rng.chance(30) {
                    // Typed in Parse, sent in binary.
                    s.types = vec![23];
                    s.params = vec![Param::Int4(n)];
                }
                s
            }
            K::DivZero => Sql::with(
                "SELECT 1 / $1::int AS boom",
                vec![text("0")],
                "SELECT 1 / 0 AS boom",
            )
            .fails(),
            K::Syntax => Sql::plain("SELEC 1").fails(),
            K::Missing => Sql::plain("SELECT * FROM missing_{T}").fails(),
            K::BadInt => Sql::with(
                "SELECT $1::int AS n",
                vec![text("x")],
                "SELECT 'x'::int AS n",
            )
            .fails(),
            K::Insert => {
                let id = self.table_id();
                Sql::with(
                    "INSERT INTO a_{T}(id, v) VALUES ($1, $2)",
                    vec![text(id.to_string()), text(format!("i{id}"))],
                    &format!("INSERT INTO a_{{T}}(id, v) VALUES ({id}, 'i{id}')"),
                )
            }
            K::Update => {
                let id = self.table_id();
                Sql::with(
                    "UPDATE a_{T} SET v = v || '+' WHERE id = $1",
                    vec![text(id.to_string())],
                    &format!("UPDATE a_{{T}} SET v = v || '+' WHERE id = {id}"),
                )
            }
            K::Delete => {
                let id = self.table_id();
                Sql::with(
                    "DELETE FROM a_{T} WHERE id = $1",
                    vec![text(id.to_string())],
                    &format!("DELETE FROM a_{{T}} WHERE id = {id}"),
                )
            }
            K::Upsert => {
                let id = self.table_id();
                Sql::with(
                    "INSERT INTO a_{T}(id, v) VALUES ($1, 'u') ON CONFLICT (id) DO UPDATE \
                     SET v = a_{T}.v || 'u' RETURNING id, v",
                    vec![text(id.to_string())],
                    &format!(
                        "INSERT INTO a_{{T}}(id, v) VALUES ({id}, 'u') ON CONFLICT (id) DO \
                         UPDATE SET v = a_{{T}}.v || 'u' RETURNING id, v"
                    ),
                )
                .rows()
            }
            K::Nulls => Sql::plain("SELECT NULL::int AS n, ''::text AS e, true AS t").rows(),
            K::Notice => {
                let n = self.rng.range(0, 99);
                Sql::plain(&format!("DO $$BEGIN RAISE NOTICE 'note {n}'; END$$"))
            }
            K::Warning => Sql::plain(
                "DO $$BEGIN RAISE WARNING 'careful' USING HINT = 'a hint'; \
                 RAISE NOTICE 'second'; END$$",
            ),
            K::Notify => {
                let n = self.rng.range(0, 99);
                Sql::with(
                    "SELECT pg_notify($1, $2)",
                    vec![text("ch_{T}"), text(format!("p{n}"))],
                    &format!("NOTIFY ch_{{T}}, 'p{n}'"),
                )
            }
            K::Show => {
                let q: &&str = self.rng.pick(&["SHOW work_mem", "SHOW DateStyle"]);
                Sql::plain(q).rows()
            }
            K::SetWorkMem => {
                let n = self.rng.range(1, 64);
                Sql::plain(&format!("SET work_mem = '{n}MB'"))
            }
            K::SetDateStyle => Sql::plain(&format!(
                "SET DateStyle = '{}'",
                self.rng
                    .pick(&["ISO, DMY", "ISO, MDY", "SQL, DMY", "German"])
            )),
            K::Date => Sql::with(
                "SELECT $1::date AS d, $1::date + 1 AS e",
                vec![text("2024-01-31")],
                "SELECT '2024-01-31'::date AS d, '2024-01-31'::date + 1 AS e",
            )
            .rows(),
            K::Empty => Sql::plain(""),
            K::BigRow => {
                let n = self.big_len();
                Sql::with(
                    "SELECT repeat('x', $1::int) AS big",
                    vec![text(n.to_string())],
                    &format!("SELECT repeat('x', {n}) AS big"),
                )
                .rows()
            }
            K::BigParam => {
                let n = self.big_len();
                Sql {
                    ext: Text::s("SELECT length($1::text) AS len, md5($1::text) AS h"),
                    params: vec![Param::Text(Text::Big {
                        pre: "p".into(),
                        ch: b'q',
                        n,
                        post: "p".into(),
                    })],
                    types: vec![],
                    simple: Text::Big {
                        pre: "SELECT length(s) AS len, md5(s) AS h FROM (SELECT 'p".into(),
                        ch: b'q',
                        n,
                        post: "p'::text AS s) q".into(),
                    },
                    fails: false,
                    rows: true,
                }
            }
            K::BigNotice => {
                let n = self.big_len();
                Sql::plain(&format!(
                    "DO $$BEGIN RAISE NOTICE '%', repeat('n', {n}); END$$"
                ))
            }
            K::BigError => {
                let n = self.big_len();
                Sql::plain(&format!(
                    "DO $$BEGIN RAISE EXCEPTION '%', repeat('e', {n}); END$$"
                ))
                .fails()
            }
        }
    }

    /// A's statement outcome on the transaction guess.
    fn after(&mut self, sql: &Sql) {
        if sql.fails && self.txn == Txn::Open {
            self.txn = Txn::Failed;
        }
    }

    fn a_step(&mut self) {
        #[derive(Clone, Copy)]
        enum S {
            Simple,
            Multi,
            Txn,
            Ext,
            Pipeline,
            Flush,
            Suspend,
            Unnamed,
            Named,
            Copy,
            Big,
            Notify,
            Cancel,
            LateCancel,
            Param,
        }
        let mut choices = vec![
            (20, S::Simple),
            (6, S::Multi),
            (18, S::Ext),
            (6, S::Pipeline),
            (8, S::Flush),
            (5, S::Suspend),
            (4, S::Unnamed),
            (4, S::Named),
            (8, S::Copy),
            (4, S::Big),
            (4, S::Notify),
            (2, S::Cancel),
            (2, S::LateCancel),
            (3, S::Param),
        ];
        if self.mode.allows_blocks() {
            choices.push((14, S::Txn));
        }
        match self.rng.weighted(&choices) {
            S::Simple => {
                let sql = self.stmt(false);
                self.after(&sql);
                self.set_unnamed(None);
                let acts = self.send_read(vec![Fe::Query(sql.simple.clone())]);
                self.push(Who::A, "simple query", acts);
            }
            S::Multi => self.multi(),
            S::Txn => self.txn_step(),
            S::Ext => {
                let n = self.rng.range(1, 3);
                let msgs = self.batch(n, true);
                let acts = self.send_read(msgs);
                self.push(Who::A, format!("extended batch of {n}"), acts);
            }
            S::Pipeline => {
                let mut msgs = Vec::new();
                let batches = self.rng.range(2, 4);
                // Documented difference (README, transaction pooling): once
                // a batch of a pipeline has a named Parse, later batches of
                // that pipeline bind no named statement. If an error makes
                // the server skip that Parse, PostgreSQL answers a later
                // Bind by its own session's statements, while pgharbor, which
                // sent the later batches before it knew, took the Parse as
                // done when it mapped names to the backend's statements.
                let mut hidden: Vec<Named> = Vec::new();
                for _ in 0..batches {
                    let named_parse = msgs
                        .iter()
                        .any(|m| matches!(m, Fe::Parse { name, .. } if !name.is_empty()));
                    if named_parse {
                        hidden.append(&mut self.named);
                    }
                    if self.rng.chance(20) {
                        let sql = self.stmt(false);
                        self.after(&sql);
                        self.set_unnamed(None);
                        msgs.push(Fe::Query(sql.simple));
                    }
                    let before: Vec<String> = self.named.iter().map(|n| n.name.clone()).collect();
                    let n = self.rng.range(1, 3);
                    msgs.extend(self.batch(n, true));
                    let (new, old): (Vec<Named>, Vec<Named>) = std::mem::take(&mut self.named)
                        .into_iter()
                        .partition(|n| !before.contains(&n.name));
                    self.named = old;
                    hidden.extend(new);
                }
                self.named.extend(hidden);
                let acts = self.send_read(msgs);
                self.push(Who::A, format!("{batches} pipelined batches"), acts);
            }
            S::Flush => self.flush_step(),
            S::Suspend => self.suspend_step(),
            S::Unnamed if self.unnamed_no_rebind => {
                // Binding A's unnamed statement again would start a COPY
                // or a long sleep: a plain query instead.
                self.set_unnamed(None);
                self.unnamed_no_rebind = false;
                let acts = self.send_read(vec![Fe::query("SELECT 'instead' AS i")]);
                self.push(Who::A, "simple query", acts);
            }
            S::Unnamed => {
                // Bind the unnamed statement without a Parse in this batch:
                // on PostgreSQL it is A's own (or 26000 when A has none).
                let params = self.unnamed.clone().unwrap_or_default();
                let mut msgs = vec![Fe::bind("", "", params)];
                if self.rng.chance(50) {
                    msgs.insert(0, Fe::describe(false, ""));
                }
                msgs.push(Fe::execute("", 0));
                msgs.push(Fe::Sync);
                let acts = self.send_read(msgs);
                self.push(Who::A, "reuse the unnamed statement", acts);
            }
            S::Named => self.named_step(),
            S::Copy => self.copy_step(),
            S::Big => {
                let sql = self.stmt(true);
                self.after(&sql);
                let msgs = if self.rng.chance(50) {
                    self.set_unnamed(None);
                    vec![Fe::Query(sql.simple.clone())]
                } else {
                    self.set_unnamed(Some(sql.params.clone()));
                    vec![
                        Fe::Parse {
                            name: String::new(),
                            sql: sql.ext.clone(),
                            types: sql.types.clone(),
                        },
                        Fe::Bind {
                            portal: String::new(),
                            stmt: String::new(),
                            params: sql.params.clone(),
                            binary_results: false,
                        },
                        Fe::Execute {
                            portal: String::new(),
                            max_rows: 0,
                        },
                        Fe::Sync,
                    ]
                };
                let acts = vec![
                    Action::Send {
                        msgs,
                        cuts: self.cuts(true),
                    },
                    Action::Read(Until::Ready(1)),
                ];
                self.push(Who::A, "large message", acts);
            }
            S::Notify => {
                let n = self.next();
                let mut msgs = Vec::new();
                if !self.listening || self.rng.chance(20) {
                    msgs.push(Fe::query("LISTEN ch_{T}"));
                    self.listening = true;
                }
                let in_block =
                    self.mode.allows_blocks() && self.txn == Txn::Idle && self.rng.chance(40);
                if in_block {
                    msgs.push(Fe::query(format!(
                        "BEGIN; NOTIFY ch_{{T}}, 'in block {n}'; SELECT 1 AS x; COMMIT"
                    )));
                } else {
                    msgs.push(Fe::query(format!("NOTIFY ch_{{T}}, 'n{n}'")));
                }
                if self.rng.chance(30) {
                    msgs.push(Fe::parse("", "SELECT pg_notify('ch_{T}', 'ext')"));
                    msgs.push(Fe::bind("", "", vec![]));
                    msgs.push(Fe::execute("", 0));
                    msgs.push(Fe::Sync);
                    self.set_unnamed(Some(vec![]));
                } else {
                    self.set_unnamed(None);
                }
                if self.rng.chance(15) {
                    msgs.push(Fe::query("UNLISTEN ch_{T}"));
                    self.listening = false;
                }
                let acts = self.send_read(msgs);
                self.push(Who::A, "LISTEN/NOTIFY on its own channel", acts);
            }
            S::Cancel => self.cancel_step(),
            S::LateCancel if self.txn == Txn::Idle && self.rng.chance(50) => {
                // A cancel sent right behind a short query: it may land
                // during it or after it (either is fine), but never on the
                // query B runs next.
                self.set_unnamed(None);
                let sleep = self.rng.pick(&["0", "0.002", "0.01", "0.03"]).to_string();
                self.steps.push(Step {
                    who: Who::A,
                    what: "a short query with a CancelRequest right behind it".into(),
                    actions: vec![
                        Action::Send {
                            msgs: vec![Fe::query(format!("SELECT pg_sleep({sleep}) AS raced"))],
                            cuts: vec![],
                        },
                        Action::Cancel { wait: false },
                        Action::Read(Until::Ready(1)),
                    ],
                    cancel: true,
                    any_outcome: true,
                });
                let acts = self.send_read(vec![Fe::query("SELECT pg_sleep(0.3), 'b' AS after")]);
                self.push(Who::B, "a short sleep right after A's raced cancel", acts);
            }
            S::LateCancel => {
                self.set_unnamed(None);
                let acts = vec![
                    Action::Send {
                        msgs: vec![Fe::query("SELECT 'late' AS l")],
                        cuts: vec![],
                    },
                    Action::Read(Until::Ready(1)),
                    Action::Cancel {
                        wait: self.rng.chance(50),
                    },
                ];
                // PostgreSQL ignores a cancel that reaches an idle backend:
                // B's query right after it must not be cancelled either.
                self.push(Who::A, "a query, then a late CancelRequest", acts);
                let acts = self.send_read(vec![Fe::query("SELECT pg_sleep(0.3), 'b' AS after")]);
                self.push(Who::B, "a short sleep right after A's late cancel", acts);
            }
            S::Param => {
                let sql = match self.rng.below(3) {
                    0 => "SET application_name = 'x_{T}'".to_string(),
                    1 => format!(
                        "SET TimeZone = '{}'",
                        self.rng.pick(&["UTC", "Europe/Paris", "America/New_York"])
                    ),
                    _ => format!(
                        "SET DateStyle = '{}'",
                        self.rng.pick(&["ISO, DMY", "SQL, MDY", "Postgres, DMY"])
                    ),
                };
                self.set_unnamed(None);
                let acts = self.send_read(vec![
                    Fe::query(sql),
                    Fe::query("SELECT '2024-01-31 12:00'::timestamptz AS ts, current_setting('application_name') AS app"),
                ]);
                self.push(Who::A, "set a reported parameter", acts);
            }
        }
    }

    fn multi(&mut self) {
        let n = self.rng.range(2, 3);
        let mut parts = Vec::new();
        for _ in 0..n {
            let s = self.stmt(false);
            if let Text::S(t) = &s.simple {
                if !t.is_empty() {
                    parts.push(t.clone());
                }
            }
            self.after(&s);
        }
        if self.rng.chance(25) {
            // Fails after a write: the implicit block rolls back.
            let id = self.table_id();
            parts = vec![
                format!("INSERT INTO a_{{T}}(id, v) VALUES ({id}, 'multi')"),
                "SELECT 1 / 0".into(),
            ];
            if self.txn == Txn::Open {
                self.txn = Txn::Failed;
            }
        }
        self.set_unnamed(None);
        let acts = self.send_read(vec![Fe::Query(Text::S(parts.join("; ")))]);
        self.push(Who::A, "multi-statement query", acts);
    }

    fn txn_step(&mut self) {
        let ext = self.rng.chance(25);
        let sql: String = match self.txn {
            Txn::Idle => match self.rng.below(4) {
                0 => {
                    // A whole block in one Query.
                    let s = self.stmt(false);
                    let body = match &s.simple {
                        Text::S(t) if !t.is_empty() => t.clone(),
                        _ => "SELECT 2".into(),
                    };
                    let end = if self.rng.chance(70) {
                        "COMMIT"
                    } else {
                        "ROLLBACK"
                    };
                    self.set_unnamed(None);
                    let acts =
                        self.send_read(vec![Fe::Query(Text::S(format!("BEGIN; {body}; {end}")))]);
                    self.push(Who::A, "a transaction block in one query", acts);
                    return;
                }
                1 => {
                    self.txn = Txn::Open;
                    "BEGIN ISOLATION LEVEL REPEATABLE READ".into()
                }
                _ => {
                    self.txn = Txn::Open;
                    "BEGIN".into()
                }
            },
            Txn::Open => match self.rng.below(9) {
                0 | 1 => {
                    self.txn = Txn::Idle;
                    "COMMIT".into()
                }
                2 => {
                    self.txn = Txn::Idle;
                    "ROLLBACK".into()
                }
                3 => {
                    self.savepoint = true;
                    "SAVEPOINT sp".into()
                }
                4 if self.savepoint => "ROLLBACK TO SAVEPOINT sp".into(),
                5 if self.savepoint => {
                    self.savepoint = false;
                    "RELEASE SAVEPOINT sp".into()
                }
                6 => format!("SET LOCAL work_mem = '{}MB'", self.rng.range(1, 32)),
                7 => format!(
                    "SET LOCAL DateStyle = '{}'",
                    self.rng.pick(&["German", "SQL, DMY"])
                ),
                _ => "SHOW work_mem".into(),
            },
            Txn::Failed => match self.rng.below(5) {
                0 if self.savepoint => {
                    self.txn = Txn::Open;
                    "ROLLBACK TO SAVEPOINT sp".into()
                }
                1 => {
                    self.txn = Txn::Idle;
                    "COMMIT".into()
                }
                2 => "SELECT 1".into(),
                _ => {
                    self.txn = Txn::Idle;
                    "ROLLBACK".into()
                }
            },
        };
        if self.txn == Txn::Idle {
            self.savepoint = false;
            self.portals.clear();
        }
        let msgs = if ext {
            self.set_unnamed(Some(vec![]));
            vec![
                Fe::parse("", sql.clone()),
                Fe::bind("", "", vec![]),
                Fe::execute("", 0),
                Fe::Sync,
            ]
        } else {
            self.set_unnamed(None);
            vec![Fe::query(sql.clone())]
        };
        let acts = self.send_read(msgs);
        self.push(Who::A, format!("transaction control: {sql}"), acts);
    }

    /// One unit of an extended batch (Parse?/Describe?/Bind/Describe?/
    /// Execute/Close?), no Sync.
    fn unit(&mut self, first: bool) -> Vec<Fe> {
        let sql = self.stmt(false);
        self.after(&sql);
        let mut msgs = Vec::new();
        // Which statement: unnamed, a new named one, or an existing one.
        let r = self.rng.below(100);
        let (stmt, params) = if r < 15 && !self.named.is_empty() {
            let n = self.rng.pick(&self.named).clone();
            // Transaction and statement pooling answer a Parse of a name
            // in use themselves and, unlike PostgreSQL, do not roll back
            // what came before it in the batch (README, a documented
            // difference): only generated where nothing comes before it.
            let dup_ok = self.mode == Mode::Session || (first && self.txn == Txn::Idle);
            if self.rng.chance(20) && dup_ok {
                msgs.push(Fe::parse(&n.name, "SELECT 'dup' AS d"));
            }
            (n.name, n.params)
        } else if r < 55 {
            let name = format!("s{}", self.next());
            msgs.push(Fe::Parse {
                name: name.clone(),
                sql: sql.ext.clone(),
                types: sql.types.clone(),
            });
            self.named.push(Named {
                name: name.clone(),
                params: sql.params.clone(),
            });
            self.all_named.push(name.clone());
            (name, sql.params.clone())
        } else {
            msgs.push(Fe::Parse {
                name: String::new(),
                sql: sql.ext.clone(),
                types: sql.types.clone(),
            });
            self.set_unnamed(Some(sql.params.clone()));
            (String::new(), sql.params.clone())
        };
        if self.rng.chance(20) {
            msgs.push(Fe::describe(false, &stmt));
        }
        let portal = if self.rng.chance(25) {
            format!("p{}", self.next())
        } else {
            String::new()
        };
        msgs.push(Fe::Bind {
            portal: portal.clone(),
            stmt: stmt.clone(),
            params,
            binary_results: self.rng.chance(10),
        });
        if self.rng.chance(30) {
            msgs.push(Fe::describe(true, &portal));
        }
        let limit = if sql.rows && self.rng.chance(25) {
            self.rng.range(1, 3) as u32
        } else {
            0
        };
        msgs.push(Fe::execute(&portal, limit));
        if limit > 0 && self.rng.chance(60) {
            msgs.push(Fe::execute(&portal, 0));
        }
        if !portal.is_empty() && self.rng.chance(30) {
            msgs.push(Fe::close(true, &portal));
        }
        if !stmt.is_empty() && self.rng.chance(10) {
            msgs.push(Fe::close(false, &stmt));
            self.named.retain(|n| n.name != stmt);
        }
        msgs
    }

    /// `n` units and a Sync.
    fn batch(&mut self, n: usize, sync: bool) -> Vec<Fe> {
        let mut msgs = Vec::new();
        for i in 0..n {
            msgs.extend(self.unit(i == 0));
        }
        if sync {
            msgs.push(Fe::Sync);
        }
        msgs
    }

    fn flush_step(&mut self) {
        let mut acts = Vec::new();
        let rounds = self.rng.range(1, 2);
        for i in 0..rounds {
            let n = self.rng.range(1, 2);
            let mut msgs = Vec::new();
            for j in 0..n {
                msgs.extend(self.unit(i == 0 && j == 0));
            }
            let expect = replies(&msgs);
            msgs.push(Fe::Flush);
            let cuts = self.cuts(false);
            acts.push(Action::Send { msgs, cuts });
            acts.push(Action::Read(Until::Replies(expect)));
        }
        acts.push(Action::Send {
            msgs: vec![Fe::Sync],
            cuts: vec![],
        });
        acts.push(Action::Read(Until::Ready(1)));
        self.push(Who::A, "Flush before Sync", acts);
    }

    fn suspend_step(&mut self) {
        let n = self.rng.range(3, 9);
        let portal = format!("p{}", self.next());
        let mut acts = Vec::new();
        let sql = format!("SELECT g AS n FROM generate_series(1, {n}) g");
        // Inside a block the portal outlives the Sync.
        let keep = self.txn == Txn::Open && self.rng.chance(50);
        let mut msgs = vec![
            Fe::parse("", sql),
            Fe::bind(&portal, "", vec![]),
            Fe::execute(&portal, 2),
        ];
        self.set_unnamed(Some(vec![]));
        if self.rng.chance(50) {
            // The suspended portal's first rows arrive after a Flush.
            msgs.push(Fe::Flush);
            acts.push(Action::Send { msgs, cuts: vec![] });
            acts.push(Action::Read(Until::Replies(3)));
            msgs = vec![];
        }
        msgs.push(Fe::execute(&portal, self.rng.range(1, 2) as u32));
        if !keep {
            msgs.push(Fe::execute(&portal, 0));
        }
        msgs.push(Fe::Sync);
        if keep {
            self.portals.push(portal.clone());
        }
        let cuts = self.cuts(false);
        acts.push(Action::Send { msgs, cuts });
        acts.push(Action::Read(Until::Ready(1)));
        if keep || self.rng.chance(20) {
            // After the Sync: still there inside a block, gone (34000) outside.
            acts.push(Action::Send {
                msgs: vec![Fe::execute(&portal, 0), Fe::Sync],
                cuts: vec![],
            });
            acts.push(Action::Read(Until::Ready(1)));
        }
        self.push(Who::A, "row limits and PortalSuspended", acts);
    }

    fn named_step(&mut self) {
        // Statements across batches: Describe, Bind again, Close, Parse a
        // closed name again.
        let mut msgs = Vec::new();
        if let Some(n) = self.named.first().cloned() {
            msgs.push(Fe::describe(false, &n.name));
            msgs.push(Fe::bind("", &n.name, n.params.clone()));
            msgs.push(Fe::execute("", 0));
            msgs.push(Fe::Sync);
            if self.rng.chance(40) {
                msgs.push(Fe::close(false, &n.name));
                msgs.push(Fe::Sync);
                self.named.retain(|x| x.name != n.name);
                if self.rng.chance(50) {
                    msgs.push(Fe::parse(&n.name, "SELECT 'again' AS a"));
                    msgs.push(Fe::bind("", &n.name, vec![]));
                    msgs.push(Fe::execute("", 0));
                    msgs.push(Fe::Sync);
                    self.named.push(Named {
                        name: n.name.clone(),
                        params: vec![],
                    });
                }
            }
        } else {
            // Names never defined: 26000 on Describe and Bind.
            msgs.push(Fe::describe(false, "nope"));
            msgs.push(Fe::Sync);
            msgs.push(Fe::bind("", "nope", vec![]));
            msgs.push(Fe::execute("", 0));
            msgs.push(Fe::Sync);
            msgs.push(Fe::close(false, "nope"));
            msgs.push(Fe::Sync);
        }
        let acts = self.send_read(msgs);
        self.push(Who::A, "named statements across batches", acts);
    }

    fn copy_rows(&mut self, bad: bool) -> Vec<Fe> {
        let mut lines = String::new();
        let n = self.rng.range(1, 6);
        for i in 0..n {
            self.copy_id += 1;
            if bad && i == n / 2 {
                lines.push_str("notanumber\tbad\n");
            } else if bad && self.rng.chance(30) {
                // A duplicate key (rows 1..5 exist at the start).
                lines.push_str("3\tdup\n");
            } else {
                let _ = writeln!(lines, "{}\tc{}", self.copy_id, self.copy_id);
            }
        }
        // CopyData boundaries need not follow lines.
        let bytes = lines.into_bytes();
        let pieces = self.rng.range(1, 3).min(bytes.len());
        let mut cuts: Vec<usize> = (1..pieces)
            .map(|_| self.rng.range(1, bytes.len() - 1))
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = Vec::new();
        let mut at = 0;
        for c in cuts.into_iter().chain(std::iter::once(bytes.len())) {
            if c > at {
                out.push(Fe::CopyData(Text::S(
                    String::from_utf8(bytes[at..c].to_vec()).expect("ascii"),
                )));
                at = c;
            }
        }
        if self.rng.chance(10) {
            // One multi-MiB line.
            self.copy_id += 1;
            out.push(Fe::CopyData(Text::Big {
                pre: format!("{}\t", self.copy_id),
                ch: b'c',
                n: self.big_len(),
                post: "\n".into(),
            }));
        }
        out
    }

    fn copy_step(&mut self) {
        let ext = self.rng.chance(50);

        let copy_in = self.rng.chance(65);
        if !copy_in {
            let sql = if self.rng.chance(25) {
                "COPY (SELECT id, v FROM a_{T} ORDER BY id) TO STDOUT (FORMAT binary)"
            } else {
                "COPY (SELECT id, v FROM a_{T} ORDER BY id) TO STDOUT"
            };
            let msgs = if ext {
                self.set_unnamed(Some(vec![]));
                self.unnamed_no_rebind = true;
                vec![
                    Fe::parse("", sql),
                    Fe::bind("", "", vec![]),
                    Fe::describe(true, ""),
                    Fe::execute("", 0),
                    Fe::Sync,
                ]
            } else {
                self.set_unnamed(None);
                vec![Fe::query(sql)]
            };
            let acts = self.send_read(msgs);
            self.push(
                Who::A,
                format!(
                    "COPY TO STDOUT, {} protocol",
                    if ext { "extended" } else { "simple" }
                ),
                acts,
            );
            return;
        }
        let bad = self.rng.chance(20);
        let fail = !bad && self.rng.chance(15);
        let sql = "COPY a_{T}(id, v) FROM STDIN";
        // Below, the unnamed statement becomes this COPY (extended) or is
        // dropped (simple Query).
        let mut data = self.copy_rows(bad);
        if fail {
            data.truncate(1);
            data.push(Fe::CopyFail("client gave up".into()));
        } else {
            data.push(Fe::CopyDone);
        }
        if (bad || fail) && self.txn == Txn::Open {
            self.txn = Txn::Failed;
        }
        let start = if ext {
            // libpq's PQexecParams: Parse/Bind/Describe/Execute/Sync, then
            // the data, CopyDone and a second Sync (PostgreSQL ignores the
            // first one during COPY IN).
            self.set_unnamed(Some(vec![]));
            self.unnamed_no_rebind = true;
            data.push(Fe::Sync);
            vec![
                Fe::parse("", sql),
                Fe::bind("", "", vec![]),
                Fe::describe(true, ""),
                Fe::execute("", 0),
                Fe::Sync,
            ]
        } else {
            self.set_unnamed(None);
            vec![Fe::query(sql)]
        };
        let big = data.iter().any(is_big);
        let cuts = self.cuts(big);
        let acts = vec![
            Action::Send {
                msgs: start,
                cuts: vec![],
            },
            Action::Read(Until::CopyIn),
            Action::IfCopyIn(vec![
                Action::Send { msgs: data, cuts },
                Action::Read(Until::Ready(1)),
            ]),
        ];
        self.push(
            Who::A,
            format!(
                "COPY FROM STDIN, {} protocol{}",
                if ext { "extended" } else { "simple" },
                if bad {
                    ", bad data"
                } else if fail {
                    ", CopyFail"
                } else {
                    ""
                }
            ),
            acts,
        );
    }

    fn cancel_step(&mut self) {
        let n = self.next();
        let marker = format!("cancel {{T}} {n}");
        let sql = format!("/*{marker}*/ SELECT pg_sleep(5) AS slept");
        let msgs = if self.rng.chance(50) {
            self.set_unnamed(None);
            vec![Fe::query(sql)]
        } else {
            self.set_unnamed(Some(vec![]));
            self.unnamed_no_rebind = true;
            vec![
                Fe::parse("", sql),
                Fe::bind("", "", vec![]),
                Fe::execute("", 0),
                Fe::Sync,
            ]
        };
        if self.txn == Txn::Open {
            self.txn = Txn::Failed;
        }
        self.steps.push(Step {
            who: Who::A,
            what: "a long query, cancelled once it runs".into(),
            actions: vec![
                Action::Send { msgs, cuts: vec![] },
                Action::WaitActive(marker),
                Action::Cancel { wait: true },
                Action::Read(Until::Ready(1)),
            ],
            cancel: true,
            any_outcome: false,
        });
    }

    fn b_step(&mut self) {
        let n = self.next();
        let allow_blocks = self.mode.allows_blocks();
        let k = self.rng.below(if allow_blocks { 8 } else { 7 });
        let (what, msgs) = match k {
            0 => (
                "simple query",
                vec![Fe::query(format!("SELECT 'b' AS who, {n} AS n"))],
            ),
            1 => (
                "unnamed statement",
                vec![
                    Fe::parse("", "SELECT $1::text AS b"),
                    Fe::bind("", "", vec![text(format!("b{n}"))]),
                    Fe::execute("", 0),
                    Fe::Sync,
                ],
            ),
            2 => (
                "leaves an unnamed statement behind",
                vec![Fe::parse("", "SELECT 'from B' AS leak"), Fe::Sync],
            ),
            3 => {
                let name = format!("bs{n}");
                (
                    "named statement",
                    vec![
                        Fe::parse(&name, "SELECT $1::int * 2 AS b2"),
                        Fe::bind("", &name, vec![text(n.to_string())]),
                        Fe::execute("", 0),
                        Fe::Sync,
                    ],
                )
            }
            4 => (
                "insert into its own table",
                vec![Fe::query(format!("INSERT INTO b_{{T}}(v) VALUES ('b{n}')"))],
            ),
            5 => (
                "its own DateStyle",
                vec![
                    Fe::query(format!(
                        "SET DateStyle = '{}'",
                        self.rng.pick(&["SQL, DMY", "German", "ISO, MDY"])
                    )),
                    Fe::query("SELECT '2024-01-31'::date AS d"),
                ],
            ),
            6 => (
                "a notice",
                vec![Fe::query("DO $$BEGIN RAISE NOTICE 'from B'; END$$")],
            ),
            _ => (
                "a transaction block",
                vec![Fe::query(format!(
                    "BEGIN; INSERT INTO b_{{T}}(v) VALUES ('t{n}'); COMMIT"
                ))],
            ),
        };
        let acts = self.send_read(msgs);
        self.push(Who::B, what, acts);
    }

    /// How A leaves: Terminate, or a disconnect at some point.
    fn a_end(&mut self) {
        #[derive(Clone, Copy)]
        enum E {
            Terminate,
            Close,
            MidMessage,
            MidBatch,
            MidQuery,
            MidCopy,
            Unread,
        }
        let e = self.rng.weighted(&[
            (35, E::Terminate),
            (10, E::Close),
            (15, E::MidMessage),
            (10, E::MidBatch),
            (15, E::MidQuery),
            (8, E::MidCopy),
            (7, E::Unread),
        ]);
        let (what, acts) = match e {
            E::Terminate => ("A leaves with Terminate", vec![Action::Terminate]),
            E::Close => ("A's socket closes between steps", vec![Action::Close]),
            E::MidMessage => {
                let mut msgs = Vec::new();
                if self.rng.chance(50) {
                    let big = self.rng.chance(20);
                    let s = self.stmt(big);
                    msgs.push(Fe::Query(s.simple));
                    let s = self.stmt(false);
                    msgs.push(Fe::Query(s.simple));
                } else {
                    let n = self.rng.range(1, 3);
                    msgs = self.batch(n, true);
                }
                let keep = self.rng.ppm();
                (
                    "A's socket closes in the middle of a write",
                    vec![Action::SendPartialAndClose { msgs, keep }],
                )
            }
            E::MidBatch => {
                let n = self.rng.range(1, 2);
                let msgs = self.batch(n, false);
                (
                    "A's socket closes after a batch without Sync",
                    vec![Action::Send { msgs, cuts: vec![] }, Action::Close],
                )
            }
            E::MidQuery => {
                let n = self.next();
                let id = 50 + n;
                let marker = format!("slow {{T}} {n}");
                let sql = format!(
                    "/*{marker}*/ INSERT INTO a_{{T}}(id, v) SELECT {id}, 'slow' FROM pg_sleep(0.3)"
                );
                let mut acts = vec![Action::Send {
                    msgs: vec![Fe::query(sql)],
                    cuts: vec![],
                }];
                if self.rng.chance(50) {
                    acts.push(Action::WaitActive(marker));
                }
                acts.push(Action::Close);
                ("A's socket closes while its query runs", acts)
            }
            E::MidCopy => {
                let mut data = self.copy_rows(false);
                data.truncate(1);
                (
                    "A's socket closes during COPY FROM STDIN",
                    vec![
                        Action::Send {
                            msgs: vec![Fe::query("COPY a_{T}(id, v) FROM STDIN")],
                            cuts: vec![],
                        },
                        Action::Read(Until::CopyIn),
                        Action::IfCopyIn(vec![
                            Action::Send {
                                msgs: data,
                                cuts: vec![],
                            },
                            Action::Close,
                        ]),
                        Action::Close,
                    ],
                )
            }
            E::Unread => {
                let n = self.big_len();
                (
                    "A's socket closes with a large reply unread",
                    vec![
                        Action::Send {
                            msgs: vec![Fe::query(format!("SELECT repeat('u', {n}) AS unread"))],
                            cuts: vec![],
                        },
                        Action::Close,
                    ],
                )
            }
        };
        self.push(Who::A, what, acts);
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
