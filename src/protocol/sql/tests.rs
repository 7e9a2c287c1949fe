//! Tests of the session-state classifier.

use super::*;
use std::cell::RefCell;
use PinReason::*;

fn tracked(name: &str) -> bool {
    matches!(
        name,
        "search_path" | "timezone" | "client_encoding" | "application_name"
    )
}

/// Why the pooler must act on `sql`: its pin, or `SessionSet` for a SET
/// it follows (these tests ask whether a statement was seen at all; which
/// SETs are followed is tested on its own).
fn pin(sql: &str) -> Option<PinReason> {
    seen(classify(sql.as_bytes(), Strings::Standard, &tracked))
}

fn seen(fx: SessionEffects) -> Option<PinReason> {
    let follows = fx.settings.iter().any(|s| matches!(s, Setting::Set { .. }));
    fx.pin.or(follows.then_some(SessionSet))
}

fn check(cases: &[(&str, Option<PinReason>)]) {
    for (sql, want) in cases {
        assert_eq!(pin(sql), *want, "{sql}");
    }
}

/// The names a SET asked `tracked` about.
fn asked(sql: &str) -> Vec<String> {
    let seen = RefCell::new(Vec::new());
    classify(sql.as_bytes(), Strings::Standard, &|n| {
        seen.borrow_mut().push(n.to_string());
        false
    });
    seen.into_inner()
}

#[test]
fn ordinary_queries_pin_nothing() {
    for q in [
        "SELECT abalance FROM pgbench_accounts WHERE aid = 123;",
        "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
        "SELECT settings, my_set_config_col, set_config_x(1) FROM t",
        "BEGIN; SET LOCAL work_mem = '1MB'; COMMIT",
        "",
        ";;",
    ] {
        let fx = classify(q.as_bytes(), Strings::Standard, &tracked);
        assert_eq!((fx.pin, fx.settings), (None, vec![]), "{q}");
    }
}

#[test]
fn set_forms() {
    check(&[
        ("SET LOCAL work_mem = '1MB'", None),
        ("set local role admin", None),
        ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", None),
        ("SET TRANSACTION SNAPSHOT '00000003-1'", None),
        ("SET CONSTRAINTS ALL DEFERRED", None),
        ("SET SESSION AUTHORIZATION bob", Some(SessionAuthorization)),
        (
            "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
            Some(SessionCharacteristics),
        ),
        ("SET ROLE admin", Some(SetRole)),
        ("set session role admin", Some(SetRole)),
        ("/* SET LOCAL */ SET work_mem = 1", Some(SessionSet)),
        ("SET statement_timeout = 0", Some(SessionSet)),
        ("SET search_path = app, public", None),
        ("SET SESSION application_name TO 'x'", None),
        ("SET TIME ZONE 'UTC'", None),
        ("SET", Some(SessionSet)),
        ("SET 1 = 2", Some(SessionSet)),
    ]);
}

#[test]
fn reset_and_set_to_default_do_not_pin() {
    check(&[
        ("RESET ALL", None),
        ("RESET ROLE", None),
        ("RESET SESSION AUTHORIZATION", None),
        ("SET work_mem TO DEFAULT", None),
        ("SET SESSION work_mem = default", None),
        ("SET TIME ZONE DEFAULT", None),
        ("SET work_mem TO \"default\"", Some(SessionSet)),
    ]);
    assert_eq!(asked("SET work_mem TO DEFAULT"), ["work_mem"]);
}

#[test]
fn set_asks_tracked_with_the_parameter_name() {
    assert_eq!(asked("SET TIME ZONE 'UTC'"), ["timezone"]);
    assert_eq!(asked("SET SESSION NAMES 'UTF8'"), ["client_encoding"]);
    assert_eq!(asked("SET SCHEMA 'app'"), ["search_path"]);
    assert_eq!(asked("SET XML OPTION DOCUMENT"), ["xmloption"]);
    assert_eq!(asked("SET Work_Mem TO '1MB'"), ["work_mem"]);
    assert_eq!(asked("SET myapp.User_Id = 7"), ["myapp.user_id"]);
    assert_eq!(asked(r#"SET "My""App".X = 7"#), [r#"My"App.x"#]);
    assert_eq!(asked("SET search_path FROM CURRENT"), ["search_path"]);
}

#[test]
fn quoted_parameter_names_keep_their_case() {
    assert_eq!(asked(r#"SET "TimeZone" = 'UTC'"#), ["TimeZone"]);
    assert_eq!(pin(r#"SET "TimeZone" = 'UTC'"#), Some(SessionSet));
    let blind = |n: &str| n.eq_ignore_ascii_case("timezone");
    assert_eq!(
        classify(br#"SET "TimeZone" = 'UTC'"#, Strings::Standard, &blind).pin,
        None
    );
}

#[test]
fn listen_prepare_load_declare() {
    check(&[
        ("LISTEN jobs", Some(Listen)),
        ("UNLISTEN *", None),
        ("PREPARE q(int) AS SELECT $1", Some(SqlPrepare)),
        ("PREPARE TRANSACTION 'gid-1'", None),
        ("LOAD 'auto_explain'", Some(Load)),
        ("SELECT listen, load, prepare FROM t", None),
        ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", Some(HoldCursor)),
        (
            "declare c no scroll cursor with hold for select 1",
            Some(HoldCursor),
        ),
        ("DECLARE c CURSOR WITHOUT HOLD FOR SELECT 1", None),
        ("DECLARE c CURSOR FOR SELECT 1", None),
        (
            "DECLARE c CURSOR FOR WITH hold AS (SELECT 1) SELECT * FROM hold",
            None,
        ),
    ]);
}

#[test]
fn temporary_objects() {
    check(&[
        ("CREATE TEMP TABLE t (a int)", Some(TempObject)),
        ("create global temporary table t (a int)", Some(TempObject)),
        ("CREATE LOCAL TEMP TABLE t AS SELECT 1", Some(TempObject)),
        (
            "CREATE OR REPLACE TEMP VIEW v AS SELECT 1",
            Some(TempObject),
        ),
        ("CREATE TEMP SEQUENCE s", Some(TempObject)),
        ("CREATE TABLE pg_temp.t (a int)", Some(TempObject)),
        (
            "CREATE FUNCTION \"pg_temp\".f() RETURNS int AS 'SELECT 1'",
            Some(TempObject),
        ),
        ("SELECT * INTO TEMP t FROM u", Some(TempObject)),
        ("SELECT 1 AS a INTO TEMPORARY TABLE t", Some(TempObject)),
        (
            "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
            Some(TempObject),
        ),
        ("SET search_path = pg_temp, public", Some(TempObject)),
        ("CREATE TABLE t (temp int, temporary text)", None),
        ("CREATE INDEX temp ON t (a)", None),
        ("INSERT INTO temp VALUES (1)", None),
        ("MERGE INTO temp USING u ON true DO NOTHING", None),
        ("SELECT temp, 'pg_temp' FROM my_pg_temp", None),
        ("DISCARD TEMP", None),
    ]);
}

#[test]
fn discard_and_deallocate_all() {
    let drops = |q: &str| classify(q.as_bytes(), Strings::Standard, &tracked).drops_prepared;
    assert!(drops("DISCARD ALL") && drops("deallocate all"));
    assert!(drops("DEALLOCATE PREPARE ALL"));
    assert!(!drops("DEALLOCATE q") && !drops("DEALLOCATE \"all\"") && !drops("DISCARD PLANS"));
    assert_eq!(pin("DISCARD ALL"), None);
}

#[test]
fn session_functions() {
    check(&[
        ("SELECT pg_advisory_lock(1)", Some(AdvisoryLock)),
        ("SELECT pg_advisory_lock_shared(1), 2", Some(AdvisoryLock)),
        ("select PG_TRY_ADVISORY_LOCK (1)", Some(AdvisoryLock)),
        (
            "SELECT pg_catalog.pg_try_advisory_lock_shared/* */(1, 2)",
            Some(AdvisoryLock),
        ),
        (
            "SELECT x FROM t WHERE pg_advisory_lock(id) IS NOT NULL",
            Some(AdvisoryLock),
        ),
        ("SELECT set_config('a.b', '1', false)", Some(SetConfig)),
        ("SELECT pg_catalog.set_config\n(x, y, z)", Some(SetConfig)),
        ("SELECT pg_advisory_xact_lock(1)", None),
        ("SELECT pg_try_advisory_xact_lock_shared(1)", None),
        ("SELECT pg_advisory_unlock(1)", None),
        (
            "SELECT 'pg_advisory_lock(1)', E'set_config(\\'', U&'set_config('",
            None,
        ),
        ("SELECT \"pg_advisory_lock(\" FROM t", None),
        ("SELECT pg_advisory_lock FROM t", None),
        ("SELECT my_set_config_col(1)", None),
        ("-- SELECT pg_advisory_lock(1)\nSELECT 1", None),
        ("/* /* SET ROLE x */ pg_advisory_lock( */ SELECT 1", None),
    ]);
}

#[test]
fn dollar_bodies_are_scanned() {
    check(&[
        (
            "DO $$BEGIN PERFORM pg_advisory_lock(1); END$$",
            Some(AdvisoryLock),
        ),
        (
            "DO $f$ BEGIN EXECUTE 'CREATE TEMP TABLE t()'; END $f$",
            Some(TempObject),
        ),
        (
            "DO $$ BEGIN EXECUTE 'LISTEN ' || quote_ident(ch); END $$",
            Some(Listen),
        ),
        ("DO $$BEGIN SET work_mem = '1MB'; END$$", Some(SessionSet)),
        (
            "DO $$BEGIN IF x THEN SET ROLE admin; END IF; END$$",
            Some(SetRole),
        ),
        ("SELECT $q$ it's $q$, $$set_config($$", Some(SetConfig)),
        (
            "CREATE FUNCTION f() AS $b$ SELECT 1 INTO TEMP t $b$ LANGUAGE sql",
            Some(TempObject),
        ),
        (
            "DO $$BEGIN UPDATE t SET a = 1; SET LOCAL work_mem = 1; END$$",
            None,
        ),
        (
            "SELECT $1, $2::text, $tag$ pg_advisory_xact_lock(1) $tag$",
            None,
        ),
        ("SELECT a$b$c FROM t", None),
    ]);
}

#[test]
fn quotes_and_comments_hide_semicolons() {
    check(&[
        ("SELECT 'a;b''; SET ROLE x'", None),
        ("SELECT E'\\'; SET ROLE x'", None),
        ("SELECT \"a;\"\"; SET ROLE x\"", None),
        // Its escapes are not decoded: a name it spells could be any name.
        ("SELECT U&\"; SET ROLE x\"", Some(Unreadable)),
        ("SELECT $x$ ; y LOAD 'y' $x$", None),
        ("SELECT 1 /* ; /* ; */ SET ROLE x */", None),
        ("SELECT 1 -- ; SET ROLE x", None),
        ("SELECT 'it''s'; SET ROLE x", Some(SetRole)),
        ("SELECT $1; SET ROLE x", Some(SetRole)),
        ("SELECT 1 -- c\n; SET ROLE x", Some(SetRole)),
        ("SELECT e'\\\\'; SET ROLE x", Some(SetRole)),
    ]);
}

#[test]
fn several_statements() {
    check(&[
        ("SELECT 1; SET work_mem = '1MB'", Some(SessionSet)),
        ("BEGIN; SET LOCAL x = 1; COMMIT", None),
        ("LISTEN a; SELECT pg_advisory_lock(1)", Some(Listen)),
        ("PREPARE p AS SELECT pg_advisory_lock($1)", Some(SqlPrepare)),
    ]);
    let fx = classify(
        b"DISCARD ALL; LOAD 'x'; DEALLOCATE ALL",
        Strings::Standard,
        &tracked,
    );
    assert_eq!(
        fx,
        SessionEffects {
            pin: Some(Load),
            drops_prepared: true,
            settings: vec![Setting::ResetAll],
            changes_strings: true,
            ..SessionEffects::default()
        }
    );
}

#[test]
fn malformed_and_non_utf8_input() {
    assert_eq!(
        classify(b"SET \xff\xfe = 1", Strings::Standard, &tracked).pin,
        Some(SessionSet)
    );
    assert_eq!(
        classify(
            b"SELECT \xc3\xa9t\xe9; LISTEN x",
            Strings::Standard,
            &tracked
        )
        .pin,
        Some(Listen)
    );
    for q in [
        "SELECT 'abc",
        "SELECT \"ab",
        "SELECT $$ab",
        "SELECT $a$ $a",
        "/* /* */",
        "E'\\",
    ] {
        // PostgreSQL refuses such a text; the pooler cannot be sure of it.
        assert_eq!(pin(q), Some(Unreadable), "{q}");
    }
    assert_eq!(pin("SELECT $$pg_advisory_lock(1)"), Some(AdvisoryLock));
}

/// xorshift64: deterministic noise without a new crate.
fn noise(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn never_panics() {
    let tricky: &[&[u8]] = &[
        b"SET SESSION \"a\"\"b\".c TO DEFAULT; DO $x$ SET ROLE r; $x$ -- e'\\",
        b"U&'\\' E'\\\\'' $1$a$ /* /* */ */ $$ $ab$ SELECT INTO TEMP $ab$ \"",
        b"DECLARE c CURSOR WITH HOLD FOR SELECT set_config(\xff\x80, 'x')",
        b"CREATE OR REPLACE GLOBAL TEMP; PREPARE TRANSACTION; DEALLOCATE PREPARE",
    ];
    for t in tricky {
        for end in 0..=t.len() {
            classify(&t[..end], Strings::Standard, &tracked);
            classify(&t[end..], Strings::Standard, &tracked);
        }
    }
    let alphabet = b"'\"$-/*;(.=\\&eEuU_aZ0 \n\x80SETtmpLIS";
    let mut state = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        let len = (noise(&mut state) % 40) as usize;
        let text: Vec<u8> = (0..len)
            .map(|_| match noise(&mut state) % 4 {
                0 => noise(&mut state) as u8,
                _ => alphabet[(noise(&mut state) % alphabet.len() as u64) as usize],
            })
            .collect();
        classify(&text, Strings::Standard, &tracked);
    }
}

#[test]
fn large_inputs_stay_linear() {
    let mut deep = b"/*".repeat(200_000);
    deep.extend_from_slice(&b"*/".repeat(200_000));
    deep.extend_from_slice(b"; SET ROLE x");
    assert_eq!(
        classify(&deep, Strings::Standard, &tracked).pin,
        Some(SetRole)
    );
    let mut dollars = format!("${}$", "a".repeat(100_000)).into_bytes();
    dollars.extend_from_slice(&b"$aaaa".repeat(100_000));
    assert_eq!(
        classify(&dollars, Strings::Standard, &tracked).pin,
        Some(Unreadable)
    );
}

#[test]
fn statements_a_failed_transaction_still_runs() {
    for sql in [
        "ROLLBACK",
        "rollback to savepoint a",
        "COMMIT",
        "end",
        "ABORT",
        "PREPARE TRANSACTION 'x'",
        "",
        " ; ",
        "/* c */ ROLLBACK",
    ] {
        assert!(ends_failed_transaction(sql.as_bytes()), "{sql}");
    }
    for sql in [
        "SELECT 1",
        "PREPARE p AS SELECT 1",
        "SAVEPOINT a",
        "RELEASE a",
        "BEGIN",
    ] {
        assert!(!ends_failed_transaction(sql.as_bytes()), "{sql}");
    }
}

fn pin_as(sql: &str, strings: Strings) -> Option<PinReason> {
    seen(classify(sql.as_bytes(), strings, &tracked))
}

#[test]
fn line_comments_end_at_either_newline() {
    check(&[
        ("SELECT 1 -- c\r; SET work_mem = 1", Some(SessionSet)),
        ("SELECT 1 -- c\n; SET work_mem = 1", Some(SessionSet)),
        ("SELECT 1 -- c; SET work_mem = 1", None),
    ]);
}

#[test]
fn backslashes_read_as_the_clients_standard_conforming_strings() {
    // Off, `\'` is a quote inside the literal, which then ends early.
    let q = r"SELECT 'x\''; SET work_mem = 1; --'";
    assert_eq!(pin_as(q, Strings::Standard), None);
    assert_eq!(pin_as(q, Strings::Escaped), Some(SessionSet));
    assert_eq!(pin_as(q, Strings::Unknown), Some(Unreadable));
    // On, `'x\'` ends at its second quote.
    let q = r"SELECT 'x\'; SET work_mem = 1; --'";
    assert_eq!(pin_as(q, Strings::Standard), Some(SessionSet));
    assert_eq!(pin_as(q, Strings::Escaped), None);
    // E'' always escapes, U&'', B'' and X'' never do; N'' is a plain quote.
    for (q, want) in [
        (r"SELECT E'x\'; SET work_mem = 1; --'", None),
        (r"SELECT U&'x\'; SET work_mem = 1", Some(SessionSet)),
        (r"SELECT B'1\'; SET work_mem = 1", Some(SessionSet)),
        (r"SELECT x'1f\'; SET work_mem = 1", Some(SessionSet)),
        (r"SELECT B'1''; SET work_mem = 1; --'", None),
    ] {
        for s in [Strings::Standard, Strings::Escaped, Strings::Unknown] {
            assert_eq!(pin_as(q, s), want, "{q} as {s:?}");
        }
    }
    let q = r"SELECT N'x\'; SET work_mem = 1; --'";
    assert_eq!(pin_as(q, Strings::Standard), Some(SessionSet));
    assert_eq!(pin_as(q, Strings::Escaped), None);
    // Without a backslash the reading does not matter.
    assert_eq!(pin_as("SELECT 'a''b'", Strings::Unknown), None);
}

#[test]
fn nested_comments_and_tagged_dollar_quotes() {
    check(&[
        ("/* /* */ LOAD 'x' */ SELECT 1", None),
        ("/* /* */ */ LOAD 'x'", Some(Load)),
        ("/*/ LOAD 'x' */ SELECT 1", None),
        ("SELECT a$b$; LOAD 'x'", Some(Load)),
    ]);
}

#[test]
fn dollar_quotes_end_at_their_own_tag() {
    // A statement inside a body is scanned (and pins) but is not the
    // text's own: it records no setting.
    let followed = |q: &str| !settings(q).1.is_empty();
    assert!(!followed("SELECT $a$ $b$ ; SET work_mem = 1; $b$ $a$"));
    assert!(followed("SELECT $a$x$a$; SET work_mem = 1"));
    assert!(!followed("SELECT $a$ $A$; SET work_mem = 1; $a$"));
    assert!(followed("SELECT $a$ $A$ $a$; SET work_mem = 1"));
}

#[test]
fn bodies_in_strings_and_comments_in_bodies_are_read() {
    check(&[
        ("DO 'BEGIN SET search_path = x; END'", Some(SessionSet)),
        (
            "DO $$BEGIN /* c */ SET work_mem = 1; END$$",
            Some(SessionSet),
        ),
        (
            "DO $$BEGIN NULL; -- c\nSET work_mem = 1; END$$",
            Some(SessionSet),
        ),
        (
            "DO $$BEGIN EXECUTE 'PREPARE p AS SELECT 1'; END$$",
            Some(SqlPrepare),
        ),
        (
            "DO $$BEGIN EXECUTE 'DECLARE c CURSOR WITH HOLD FOR SELECT 1'; END$$",
            Some(HoldCursor),
        ),
        (
            "CREATE FUNCTION f() RETURNS void LANGUAGE sql AS 'SELECT pg_advisory_lock(1)'",
            Some(AdvisoryLock),
        ),
        ("SELECT 'SET work_mem = 1'", None),
        ("SELECT 1 INTO LOCAL TEMP t", Some(TempObject)),
        (
            "UPDATE pg_catalog.pg_settings SET setting = '1' WHERE name = 'x'",
            Some(SetConfig),
        ),
        ("SELECT * FROM pg_settings", None),
        ("SET local.foo = 1", Some(SessionSet)),
        ("SET names.foo = 1", Some(SessionSet)),
        // The continuation of an E'' literal escapes as it does.
        (
            "SELECT E'a'\n'\\''; SET work_mem = 1; --'",
            Some(SessionSet),
        ),
        ("SELECT 'a'\n'\\''; SET work_mem = 1; --'", None),
        ("SELECT 'a'\n'b'; SET work_mem = 1", Some(SessionSet)),
    ]);
    let drops = |q: &str| classify(q.as_bytes(), Strings::Standard, &tracked).drops_prepared;
    assert!(drops("DEALLOCATE \"PGHARBOR_1\""));
    assert!(drops("DEALLOCATE PREPARE pgharbor_7"));
    assert!(drops("DO $$BEGIN EXECUTE 'DEALLOCATE ALL'; END$$"));
    assert!(!drops("DEALLOCATE mine"));
}

#[test]
fn text_that_ends_inside_a_quote_or_comment_pins() {
    for q in [
        "SELECT 'abc",
        "SELECT \"abc",
        "SELECT /* abc",
        "SELECT /* /* */",
        "SELECT $x$ abc",
        "SELECT E'abc\\'",
        "SELECT B'01",
    ] {
        assert_eq!(pin(q), Some(Unreadable), "{q}");
    }
    assert_eq!(pin("SELECT 1 -- ends in a comment"), None);
}

#[test]
fn statements_that_change_standard_conforming_strings() {
    let changes = |q: &str| classify(q.as_bytes(), Strings::Standard, &tracked).changes_strings;
    for q in [
        "SET standard_conforming_strings = off",
        "set local standard_conforming_strings to on",
        "SET SESSION \"standard_conforming_strings\" TO DEFAULT",
        "RESET standard_conforming_strings",
        "RESET ALL",
        "SELECT 1; DISCARD ALL",
    ] {
        assert!(changes(q), "{q}");
    }
    for q in [
        "SELECT 1",
        "SET work_mem = 1",
        "RESET work_mem",
        "DISCARD PLANS",
    ] {
        assert!(!changes(q), "{q}");
    }
}

fn settings(sql: &str) -> (Option<PinReason>, Vec<Setting>) {
    let fx = classify(sql.as_bytes(), Strings::Standard, &tracked);
    (fx.pin, fx.settings)
}

fn set(name: &str, sql: &str) -> Setting {
    Setting::Set {
        name: name.into(),
        sql: sql.into(),
    }
}

#[test]
fn plain_sets_are_followed_as_written() {
    let reset = |n: &str| Setting::Reset { name: n.into() };
    for (q, want) in [
        (
            "SET work_mem = '64MB'",
            vec![set("work_mem", "work_mem = '64MB'")],
        ),
        (
            "set session Statement_Timeout to 5000 ; SELECT 1",
            vec![set("statement_timeout", "Statement_Timeout to 5000")],
        ),
        (
            "SET my.list = a, \"B\", 'c', -1.5 /* why */",
            vec![set("my.list", "my.list = a, \"B\", 'c', -1.5")],
        ),
        (
            "SET XML OPTION DOCUMENT",
            vec![set("xmloption", "XML OPTION DOCUMENT")],
        ),
        (
            "RESET work_mem; SET lock_timeout TO DEFAULT",
            vec![reset("work_mem"), reset("lock_timeout")],
        ),
        ("RESET ALL", vec![Setting::ResetAll]),
        ("DISCARD ALL", vec![Setting::ResetAll]),
        // Followed from the server's reports instead.
        ("SET search_path = a; RESET search_path", vec![]),
        ("SET LOCAL work_mem = 1", vec![]),
    ] {
        assert_eq!(settings(q), (None, want), "{q}");
    }
}

#[test]
fn sets_the_pooler_cannot_replay_pin() {
    for q in [
        r"SET work_mem = E'1\x4dB'",
        "SET work_mem = '1' || 'MB'",
        "SET work_mem FROM CURRENT",
        "SET \"role\" = 'bob'",
        "SET transaction_read_only = on",
        "SET work_mem",
    ] {
        assert_eq!(settings(q).0, Some(SessionSet), "{q}");
    }
    let fx = classify(
        b"BEGIN; SET work_mem = 1; COMMIT",
        Strings::Standard,
        &tracked,
    );
    assert!(fx.controls_transaction && !fx.settings.is_empty());
    for q in [
        "SAVEPOINT a",
        "RELEASE a",
        "ROLLBACK TO a",
        "rollback transaction to savepoint a",
        "PREPARE TRANSACTION 'x'",
    ] {
        assert!(
            classify(q.as_bytes(), Strings::Standard, &tracked).savepoint,
            "{q}"
        );
    }
}

/// How many of `count` generated texts (1 to `most` pieces drawn from
/// `pieces`, the same ones for the same `seed`) `quick` answers; each it
/// answers must get `want` from the full classifier, under both readings
/// of a backslash.
fn quick_answers(
    (pieces, seed): (&[&str], u64),
    (count, most): (usize, usize),
    quick: fn(&[u8]) -> bool,
    want: &SessionEffects,
) -> usize {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(seed);
    let mut answered = 0;
    for _ in 0..count {
        let n = rng.gen_range(1..most + 1);
        let sql: String = (0..n)
            .map(|_| pieces[rng.gen_range(0..pieces.len())])
            .collect();
        if !quick(sql.as_bytes()) {
            continue;
        }
        answered += 1;
        for standard in [true, false] {
            assert_eq!(
                &classify_as(sql.as_bytes(), standard, &tracked),
                want,
                "{sql:?}"
            );
        }
    }
    answered
}

/// The quick look answers only where the full classifier finds nothing,
/// under both readings of a backslash: checked on texts made of the
/// pieces either of them looks at.
#[test]
fn the_quick_look_agrees_with_the_classifier() {
    const PIECES: [&str; 52] = [
        "SELECT ",
        "select",
        "WITH ",
        "UPDATE ",
        "insert ",
        "TABLE",
        "values",
        "create ",
        "DO ",
        "SET ",
        " ",
        "\n",
        "\t",
        ";",
        "; ",
        "(",
        ")",
        "'",
        "''",
        "\"",
        "\"\"",
        "$1",
        "$$",
        "$a$",
        "--",
        "/*",
        "*/",
        "\\",
        "U&",
        "&",
        "E'",
        "temp ",
        "pg_temp",
        "Temporary",
        "into ",
        "pg_advisory_lock",
        "set_config",
        "pg_settings",
        "x",
        "1",
        "\"pg_temp\"",
        "\"Set_Config\"",
        "pg_try_advisory_lock_shared",
        "temperature",
        "e",
        "_",
        ".",
        "0x",
        "U&\"",
        "$",
        "é",
        "TEMP",
    ];
    let nothing = SessionEffects::default();
    let quick = quick_answers((&PIECES, 15), (300_000, 9), quick::nothing_to_do, &nothing);
    assert!(quick > 1_000, "only {quick} texts took the quick look");
    for q in [
        "SELECT abalance FROM pgbench_accounts WHERE aid = 123;",
        "  update t set a = $1 where b = $2 ;\n",
        r#"SELECT "users".* FROM "users" WHERE "users"."id" = $1"#,
        "SELECT * FROM temperature WHERE x = 1temp",
        "INSERT INTO h (a) VALUES (1, CURRENT_TIMESTAMP)",
        // pgbench's TPC-B-like script, all but BEGIN and END.
        "UPDATE pgbench_accounts SET abalance = abalance + -4821 WHERE aid = 5;",
        "SELECT abalance FROM pgbench_accounts WHERE aid = 5;",
        "UPDATE pgbench_tellers SET tbalance = tbalance + -4821 WHERE tid = 7;",
        "UPDATE pgbench_branches SET bbalance = bbalance + -4821 WHERE bid = 1;",
        "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (7, 1, 5, -4821, CURRENT_TIMESTAMP);",
    ] {
        assert!(quick::nothing_to_do(q.as_bytes()), "{q}");
    }
    for q in [
        "SELECT 1; SET work_mem = 1",
        "SELECT 'temp'",
        r#"SELECT "a"#,
        "SELECT 1 /* x */",
        "SELECT pg_advisory_lock(1)",
        r#"SELECT * FROM "Pg_Temp".t"#,
        "SELECT * INTO TEMP t FROM u",
        "WITH u AS (UPDATE pg_settings SET setting = 1) SELECT 1",
        "SELECT $x$a$x$",
        r#"SELECT U&"d\0061t" FROM t"#,
        "SELECTx",
        "SET work_mem = 1",
    ] {
        assert!(!quick::nothing_to_do(q.as_bytes()), "{q}");
    }
}

/// A bare BEGIN, COMMIT, END, ROLLBACK or ABORT gets from the quick look
/// what the full classifier gives it, under both readings of a backslash;
/// anything more goes to the classifier.
#[test]
fn bare_transaction_control_agrees_with_the_classifier() {
    const PIECES: [&str; 24] = [
        "BEGIN",
        "begin",
        "Commit",
        "END",
        "ROLLBACK",
        "abort",
        "WORK",
        "transaction",
        "START",
        " ",
        "\n",
        "\t",
        ";",
        "; ",
        "--",
        "/*",
        "*/",
        "TO",
        "s",
        "AND CHAIN",
        "PREPARED",
        "'a'",
        "ISOLATION LEVEL SERIALIZABLE",
        "x",
    ];
    let control = SessionEffects {
        controls_transaction: true,
        ..SessionEffects::default()
    };
    let bare = quick_answers(
        (&PIECES, 37),
        (100_000, 4),
        quick::bare_transaction_control,
        &control,
    );
    assert!(bare > 1_000, "only {bare} texts were bare");
    for q in [
        "BEGIN",
        "begin;",
        "  END ;\n",
        "COMMIT WORK",
        "rollback transaction;",
        "ABORT",
    ] {
        assert!(quick::bare_transaction_control(q.as_bytes()), "{q}");
        assert_eq!(
            classify(q.as_bytes(), Strings::Unknown, &tracked),
            control,
            "{q}"
        );
    }
    for q in [
        "BEGIN ISOLATION LEVEL SERIALIZABLE",
        "ROLLBACK TO s",
        "COMMIT AND CHAIN",
        "COMMIT PREPARED 'a'",
        "BEGIN; SET work_mem = 1",
        "BEGIN;;",
        "BEGIN -- x",
        "START TRANSACTION",
        "BEGINx",
        "",
        ";",
    ] {
        assert!(!quick::bare_transaction_control(q.as_bytes()), "{q}");
    }
}

/// Every name the classifier pins on sends a text to it, in any case,
/// and a word of the same length that is not a name does not.
#[test]
fn the_quick_look_stops_at_every_name_of_any_case() {
    for name in watch::NAMES {
        let name = std::str::from_utf8(name).unwrap_or_default();
        for word in [name.to_string(), name.to_ascii_uppercase()] {
            let q = format!("SELECT * FROM {word} WHERE x = 1");
            assert!(!quick::nothing_to_do(q.as_bytes()), "{q}");
        }
        let other = "x".repeat(name.len());
        let q = format!("SELECT * FROM {other} WHERE x = 1");
        assert!(quick::nothing_to_do(q.as_bytes()), "{q}");
    }
}
