//! A's steps over the simple protocol and transaction blocks, the step
//! choice itself, and how A leaves.

use super::super::msg::{Fe, Param, Text};
use super::{Action, Gen, Named, Step, Txn, Until, Who};

impl Gen {
    pub(super) fn a_step(&mut self) {
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

    pub(super) fn multi(&mut self) {
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

    pub(super) fn txn_step(&mut self) {
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

    /// How A leaves: Terminate, or a disconnect at some point.
    pub(super) fn a_end(&mut self) {
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
