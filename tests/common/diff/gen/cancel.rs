//! A's cancel step: a long query, cancelled once the server runs it.

use super::super::msg::Fe;
use super::{Action, Gen, Step, Txn, Until, Who};

impl Gen {
    pub(super) fn cancel_step(&mut self) {
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
}
