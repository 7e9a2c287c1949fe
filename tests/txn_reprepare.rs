//! A plan invalidated by DDL is re-prepared, not repeated: after ALTER TABLE
//! changes a result type, PostgreSQL answers a prepared statement with
//! `0A000 cached plan must not change result type`, and a driver's cache
//! (asyncpg's) recovers by preparing the statement again under a new name.
//! Through pgharbor the new name must get a fresh statement on the server,
//! as on a direct connection, not the same invalid one.

mod common;

use std::time::Duration;

use common::ext::{bind, execute, parse, read_batch, sync, Batch};
use common::wire::message;
use common::{Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Transport, SCRAM_USER, TEST_DB};

const WAIT: Duration = Duration::from_secs(20);

fn login(ep: &Endpoint, user: (&str, Option<&str>)) -> RawConn {
    let mut c = RawConn::connect(ep);
    c.login(&[("user", user.0), ("database", TEST_DB)], user.1)
        .unwrap_or_else(|e| panic!("login: {e:?}"));
    c
}

fn run(c: &mut RawConn, msgs: &[Vec<u8>]) -> Batch {
    c.send(&msgs.concat()).expect("send");
    let b = read_batch(c, WAIT);
    assert!(b.ended.is_none(), "{b:?}");
    b
}

fn close_statement(name: &str) -> Vec<u8> {
    let mut body = vec![b'S'];
    body.extend_from_slice(name.as_bytes());
    body.push(0);
    message(b'C', &body)
}

/// The client's view of the script: each batch's message flow, errors and rows.
fn script(ep: &Endpoint, admin: &mut RawConn, table: &str) -> Vec<String> {
    let mut a = login(ep, (SCRAM_USER.0, Some(SCRAM_USER.1)));
    let mut b = login(ep, (SCRAM_USER.0, Some(SCRAM_USER.1)));
    let sql = format!("SELECT * FROM {table}");
    let use_it = |name: &str| vec![bind("", name, &[]), execute(""), sync()];
    let mut out = Vec::new();
    let mut note = |who: &str, r: Batch| {
        out.push(format!("{who}: {} {:?} {:?}", r.flow(), r.codes(), r.rows));
    };
    let mut first = vec![parse("s1", &sql)];
    first.extend(use_it("s1"));
    note("A", run(&mut a, &first));
    let mut other = vec![parse("b1", &sql)];
    other.extend(use_it("b1"));
    note("B", run(&mut b, &other));
    let alter = admin.query(&format!("ALTER TABLE {table} ADD COLUMN b int DEFAULT 7"));
    assert!(alter.error.is_none(), "{:?}", alter.error);
    note("A", run(&mut a, &use_it("s1")));
    // The driver's recovery: forget the statement, prepare it again.
    let mut again = vec![close_statement("s1"), parse("s2", &sql)];
    again.extend(use_it("s2"));
    note("A", run(&mut a, &again));
    note("B", run(&mut b, &use_it("b1")));
    let mut again = vec![close_statement("b1"), parse("b2", &sql)];
    again.extend(use_it("b2"));
    note("B", run(&mut b, &again));
    note("A", run(&mut a, &use_it("s2")));
    out
}

#[test]
fn a_statement_invalidated_by_ddl_is_prepared_afresh_when_the_client_prepares_it_again() {
    let pg = PgCluster::shared();
    let mut admin = login(&pg.endpoint(Transport::Unix), ("postgres", None));
    let setup = |admin: &mut RawConn, t: &str| {
        let r = admin.query(&format!(
            "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (a int); INSERT INTO {t} VALUES (1); \
             GRANT SELECT ON {t} TO {}",
            SCRAM_USER.0
        ));
        assert!(r.error.is_none(), "{:?}", r.error);
    };
    let t = format!("reprep_{}", std::process::id());
    setup(&mut admin, &t);
    let direct = script(&pg.endpoint(Transport::Unix), &mut admin, &t);
    assert!(
        direct.iter().any(|l| l.contains("0A000")),
        "PostgreSQL refuses the old plan: {direct:#?}"
    );
    for size in [1, 2] {
        let p = Pooler::start(pg, PoolerOpts::transaction(size));
        setup(&mut admin, &t);
        let through = script(&p.endpoint(Transport::Unix), &mut admin, &t);
        assert_eq!(through, direct, "pool of {size}");
    }
    let _ = admin.query(&format!("DROP TABLE {t}"));
}

#[test]
fn a_parse_answered_without_a_backend_still_gets_the_servers_error_when_used() {
    // B prepares the text on a backend; C's Parse of it is answered by the
    // pooler; the table is dropped; C's use of the statement fails as on
    // a direct connection (the error of that statement, never silence).
    let pg = PgCluster::shared();
    let mut admin = login(&pg.endpoint(Transport::Unix), ("postgres", None));
    let t = format!("ahead_{}", std::process::id());
    let p = Pooler::start(pg, PoolerOpts::transaction(2));
    let ep = p.endpoint(Transport::Unix);
    let r = admin.query(&format!(
        "CREATE TABLE {t} (a int); GRANT SELECT ON {t} TO {}",
        SCRAM_USER.0
    ));
    assert!(r.error.is_none(), "{:?}", r.error);
    let sql = format!("SELECT * FROM {t}");
    let mut b = login(&ep, (SCRAM_USER.0, Some(SCRAM_USER.1)));
    let r = run(&mut b, &[parse("b1", &sql), sync()]);
    assert!(r.errors.is_empty(), "{r:?}");
    let mut c = login(&ep, (SCRAM_USER.0, Some(SCRAM_USER.1)));
    let r = run(&mut c, &[parse("c1", &sql), sync()]);
    assert_eq!(r.flow(), "1Z", "{r:?}");
    let r = admin.query(&format!("DROP TABLE {t}"));
    assert!(r.error.is_none(), "{:?}", r.error);
    let r = run(&mut c, &[bind("", "c1", &[]), execute(""), sync()]);
    assert_eq!(r.codes(), ["42P01"], "{r:?}");
    let r = c.query("SELECT 1");
    assert!(r.error.is_none(), "the session goes on: {:?}", r.error);
}
