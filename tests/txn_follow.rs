//! Transaction pooling follows a client's plain SETs instead of pinning it:
//! the same script runs on a direct connection and through pgharbor, with a
//! second client taking the shared backend between every statement, and
//! the first client must see what PostgreSQL shows it (a SET in a rolled
//! back transaction undone, SET LOCAL for one transaction, a failed Query
//! undoing its SET), while the second only ever sees the defaults.

mod common;

use common::wire::QueryResult;
use common::{Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Transport};

/// A's statements, one simple Query each.
const SCRIPT: &[&str] = &[
    "SET work_mem = '20MB'",
    "SHOW work_mem",
    "BEGIN",
    "SET work_mem = '30MB'",
    "SHOW work_mem",
    "ROLLBACK",
    "SHOW work_mem",
    "BEGIN",
    "SET search_path = follow_nowhere, public",
    "COMMIT",
    "SHOW search_path",
    "BEGIN",
    "SET LOCAL statement_timeout = '9s'",
    "SHOW statement_timeout",
    "COMMIT",
    "SHOW statement_timeout",
    "SET statement_timeout = '3s'; SELECT 1/0",
    "SHOW statement_timeout",
    "BEGIN",
    "SET lock_timeout = '5s'",
    "SELECT 1/0",
    "COMMIT",
    "SHOW lock_timeout",
    "SET lock_timeout = '6s'; SET SESSION idle_in_transaction_session_timeout TO 60000",
    "SHOW lock_timeout",
    "SHOW idle_in_transaction_session_timeout",
    "RESET work_mem",
    "SHOW work_mem",
    "SET work_mem = '7MB'",
    "SET work_mem TO DEFAULT",
    "SHOW work_mem",
    "SET work_mem = '8MB'",
    "RESET ALL",
    "SHOW work_mem",
    "SHOW lock_timeout",
    "SHOW search_path",
    "SET default_transaction_read_only = on",
    "CREATE TABLE follow_never (x int)",
    "SET default_transaction_read_only = off",
    "SET search_path TO follow_a, \"Follow B\"",
    "SHOW search_path",
];

/// What B checks between A's statements: every setting A touches.
const PROBE: &str = "SELECT current_setting('work_mem') || '|' || current_setting('search_path') \
     || '|' || current_setting('statement_timeout') || '|' || current_setting('lock_timeout') \
     || '|' || current_setting('idle_in_transaction_session_timeout') \
     || '|' || current_setting('default_transaction_read_only')";

fn login(ep: &Endpoint) -> RawConn {
    common::scram_login(ep)
}

/// What a client can see of one Query's result.
fn seen(r: &QueryResult) -> String {
    match &r.error {
        Some(e) => format!("ERROR {}", e.code),
        None => format!("{:?} {:?}", r.rows, r.tags),
    }
}

/// Runs [`SCRIPT`] as A; with `other`, B runs [`PROBE`] after each of A's
/// transactions and must always see `default`.
fn run(ep: &Endpoint, other: Option<(&Endpoint, &str)>) -> Vec<String> {
    let mut a = login(ep);
    let mut b = other.map(|(ep, _)| login(ep));
    let mut out = Vec::new();
    for sql in SCRIPT {
        let r = a.query(sql);
        out.push(format!("{sql} => {}", seen(&r)));
        // Inside A's transaction the backend is A's: B looks between them.
        if r.status != b'I' {
            continue;
        }
        if let (Some(b), Some((_, default))) = (b.as_mut(), other) {
            let r = b.query(PROBE);
            assert_eq!(
                r.scalar().as_deref(),
                Some(default),
                "B after A's {sql:?}: {:?}",
                r.error
            );
        }
    }
    a.terminate();
    out
}

#[test]
fn followed_sets_behave_as_on_a_direct_connection_and_never_reach_another_client() {
    let pg = PgCluster::shared();
    let direct_ep = pg.endpoint(Transport::Unix);
    let direct = run(&direct_ep, None);
    let default = login(&direct_ep)
        .query(PROBE)
        .scalar()
        .expect("the defaults");
    for size in [1, 2] {
        let p = Pooler::start(pg, PoolerOpts::transaction(size));
        let ep = p.endpoint(Transport::Unix);
        let through = run(&ep, Some((&ep, &default)));
        let diff: Vec<String> = direct
            .iter()
            .zip(&through)
            .filter(|(d, t)| d != t)
            .map(|(d, t)| format!("direct: {d}\npgharbor: {t}"))
            .collect();
        assert!(
            diff.is_empty(),
            "pool of {size}: pgharbor differs from PostgreSQL:\n{}",
            diff.join("\n")
        );
        // After A left, a new client sees only defaults on every backend.
        for _ in 0..size {
            assert_eq!(
                login(&ep).query(PROBE).scalar().as_deref(),
                Some(default.as_str())
            );
        }
    }
}

#[test]
fn a_client_that_only_sets_shares_the_backends() {
    // 6 clients each SET search_path once, then run transactions, over 2
    // backends: none is pinned (each holds a backend only per transaction),
    // and each always finds its own schema first.
    let pg = PgCluster::shared();
    let p = Pooler::start(pg, PoolerOpts::transaction(2));
    let ep = p.endpoint(Transport::Unix);
    let mut clients: Vec<RawConn> = (0..6).map(|_| login(&ep)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.query(&format!("SET search_path = tenant_{i}, public"));
        assert!(r.error.is_none(), "{:?}", r.error);
    }
    for round in 0..3 {
        for (i, c) in clients.iter_mut().enumerate() {
            let r = c.query("SELECT current_setting('search_path')");
            assert_eq!(
                r.scalar(),
                Some(format!("tenant_{i}, public")),
                "client {i}, round {round}"
            );
        }
    }
    // All six hold no backend between transactions: a seventh is served
    // at once even with every one of them still connected.
    let mut seventh = login(&ep);
    assert_eq!(
        seventh.query("SHOW search_path").scalar().as_deref(),
        Some("\"$user\", public")
    );
}
