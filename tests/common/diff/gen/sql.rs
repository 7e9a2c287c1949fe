//! A's statements: each generated in its extended and simple forms, and
//! what one does to the generator's transaction guess.

use super::super::msg::{Param, Text};
use super::{text, Gen, Sql, Txn};

impl Gen {
    /// One statement for A; with `big`, one of multi-MiB text or reply.
    pub(super) fn stmt(&mut self, big: bool) -> Sql {
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
    pub(super) fn after(&mut self, sql: &Sql) {
        if sql.fails && self.txn == Txn::Open {
            self.txn = Txn::Failed;
        }
    }
}
