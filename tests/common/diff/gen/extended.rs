//! A's extended-protocol steps: batches of units up to Sync, Flush,
//! suspended portals, named statements.

use super::super::msg::Fe;
use super::{replies, Action, Gen, Mode, Named, Txn, Until, Who};

impl Gen {
    /// One unit of an extended batch (Parse?/Describe?/Bind/Describe?/
    /// Execute/Close?), no Sync.
    pub(super) fn unit(&mut self, first: bool) -> Vec<Fe> {
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
    pub(super) fn batch(&mut self, n: usize, sync: bool) -> Vec<Fe> {
        let mut msgs = Vec::new();
        for i in 0..n {
            msgs.extend(self.unit(i == 0));
        }
        if sync {
            msgs.push(Fe::Sync);
        }
        msgs
    }

    pub(super) fn flush_step(&mut self) {
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

    pub(super) fn suspend_step(&mut self) {
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

    pub(super) fn named_step(&mut self) {
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
}
