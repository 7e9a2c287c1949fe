//! A's COPY steps: COPY FROM STDIN with good or bad rows, COPY TO STDOUT.

use super::super::msg::{Fe, Text};
use super::{is_big, Action, Gen, Txn, Until, Who};
use std::fmt::Write as _;

impl Gen {
    pub(super) fn copy_rows(&mut self, bad: bool) -> Vec<Fe> {
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

    pub(super) fn copy_step(&mut self) {
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
}
