//! Client B's steps: short, self-contained, run between A's so that
//! backends change hands in transaction and statement pooling.

use super::super::msg::Fe;
use super::{text, Gen, Who};

impl Gen {
    pub(super) fn b_step(&mut self) {
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
}
