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

fn pin(sql: &str) -> Option<PinReason> {
    classify(sql.as_bytes(), &tracked).pin
}

fn check(cases: &[(&str, Option<PinReason>)]) {
    for (sql, want) in cases {
        assert_eq!(pin(sql), *want, "{sql}");
    }
}

/// The names a SET asked `tracked` about.
fn asked(sql: &str) -> Vec<String> {
    let seen = RefCell::new(Vec::new());
    classify(sql.as_bytes(), &|n| {
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
        assert_eq!(
            classify(q.as_bytes(), &tracked),
            SessionEffects::default(),
            "{q}"
        );
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
    assert!(asked("SET work_mem TO DEFAULT").is_empty());
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
    assert_eq!(classify(br#"SET "TimeZone" = 'UTC'"#, &blind).pin, None);
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
    let drops = |q: &str| classify(q.as_bytes(), &tracked).drops_prepared;
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
        ("SELECT U&\"; SET ROLE x\"", None),
        ("SELECT $x$ ; LOAD 'y' $x$", None),
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
    let fx = classify(b"DISCARD ALL; LOAD 'x'; DEALLOCATE ALL", &tracked);
    assert_eq!(
        fx,
        SessionEffects {
            pin: Some(Load),
            drops_prepared: true
        }
    );
}

#[test]
fn malformed_and_non_utf8_input() {
    assert_eq!(
        classify(b"SET \xff\xfe = 1", &tracked).pin,
        Some(SessionSet)
    );
    assert_eq!(
        classify(b"SELECT \xc3\xa9t\xe9; LISTEN x", &tracked).pin,
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
        assert_eq!(pin(q), None, "{q}");
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
            classify(&t[..end], &tracked);
            classify(&t[end..], &tracked);
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
        classify(&text, &tracked);
    }
}

#[test]
fn large_inputs_stay_linear() {
    let mut deep = b"/*".repeat(200_000);
    deep.extend_from_slice(&b"*/".repeat(200_000));
    deep.extend_from_slice(b"; SET ROLE x");
    assert_eq!(classify(&deep, &tracked).pin, Some(SetRole));
    let mut dollars = format!("${}$", "a".repeat(100_000)).into_bytes();
    dollars.extend_from_slice(&b"$aaaa".repeat(100_000));
    assert_eq!(classify(&dollars, &tracked).pin, None);
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
