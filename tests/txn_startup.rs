//! A client's startup options hold for its whole life: applied as
//! PostgreSQL applies a startup packet (a list stays a list), in session
//! and transaction pooling, and never lost to another client's RESET,
//! RESET ALL, DISCARD ALL or SET ... TO DEFAULT on a shared backend.

mod common;

use common::q_ok;

use common::{Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Transport, SCRAM_USER, TEST_DB};

const OPTIONS: &str = "-c search_path=acc_sp,public -c statement_timeout=5s";

fn login(ep: &Endpoint, options: Option<&str>) -> RawConn {
    let mut c = RawConn::connect(ep);
    let mut params = vec![("user", SCRAM_USER.0), ("database", TEST_DB)];
    if let Some(o) = options {
        params.push(("options", o));
    }
    c.login(&params, Some(SCRAM_USER.1))
        .unwrap_or_else(|e| panic!("login with {options:?}: {e:?}"));
    c
}

fn show(c: &mut RawConn, name: &str) -> String {
    q_ok(c, &format!("SHOW {name}"))
        .scalar()
        .unwrap_or_default()
}

/// A schema only the options' search_path finds, with a table in it
/// (made once: the tests run in parallel).
fn schema(pg: &PgCluster) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| make_schema(pg));
}

fn make_schema(pg: &PgCluster) {
    let mut c = RawConn::connect(&pg.endpoint(Transport::Unix));
    c.login(&[("user", "postgres"), ("database", TEST_DB)], None)
        .unwrap_or_else(|e| panic!("admin login: {e:?}"));
    q_ok(
        &mut c,
        &format!(
            "CREATE SCHEMA IF NOT EXISTS acc_sp; \
             CREATE TABLE IF NOT EXISTS acc_sp.only_here (v int); \
             GRANT USAGE ON SCHEMA acc_sp TO {0}; GRANT SELECT ON acc_sp.only_here TO {0}",
            SCRAM_USER.0
        ),
    );
}

/// What a session started with [`OPTIONS`] shows, and whether it finds
/// the schema's table unqualified.
fn startup_view(ep: &Endpoint) -> (String, String, bool) {
    let mut c = login(ep, Some(OPTIONS));
    let finds = c.query("SELECT count(*) FROM only_here").error.is_none();
    let view = (
        show(&mut c, "search_path"),
        show(&mut c, "statement_timeout"),
        finds,
    );
    c.terminate();
    view
}

#[test]
fn a_list_valued_startup_option_stays_a_list_in_every_mode() {
    let pg = PgCluster::shared();
    schema(pg);
    let direct = startup_view(&pg.endpoint(Transport::Unix));
    assert_eq!(direct, ("acc_sp,public".into(), "5s".into(), true));
    for opts in [
        PoolerOpts::default().pool_size(2),
        PoolerOpts::transaction(1),
    ] {
        let p = Pooler::start(pg, opts);
        assert_eq!(startup_view(&p.endpoint(Transport::Unix)), direct);
    }
}

/// Client B, with the same options as A, runs `undo` on the one backend;
/// A's next transaction must still run with its options, and so must B's.
fn options_survive(undo: &str) {
    let pg = PgCluster::shared();
    schema(pg);
    let p = Pooler::start(pg, PoolerOpts::transaction(1));
    let ep = p.endpoint(Transport::Unix);
    let mut a = login(&ep, Some(OPTIONS));
    let mut b = login(&ep, Some(OPTIONS));
    assert_eq!(show(&mut a, "statement_timeout"), "5s");
    assert_eq!(show(&mut b, "statement_timeout"), "5s");
    q_ok(&mut b, undo);
    for (who, c) in [("the other client", &mut a), ("the client itself", &mut b)] {
        assert_eq!(show(c, "statement_timeout"), "5s", "{who} after {undo}");
        assert_eq!(
            show(c, "search_path"),
            "acc_sp,public",
            "{who} after {undo}"
        );
        assert!(
            c.query("SELECT count(*) FROM only_here").error.is_none(),
            "{who} lost its search_path after {undo}"
        );
    }
    a.terminate();
    b.terminate();
}

#[test]
fn another_clients_reset_leaves_startup_options_in_place() {
    options_survive("RESET statement_timeout; RESET search_path");
}

#[test]
fn another_clients_reset_all_leaves_startup_options_in_place() {
    options_survive("RESET ALL");
}

#[test]
fn another_clients_discard_all_leaves_startup_options_in_place() {
    options_survive("DISCARD ALL");
}

#[test]
fn another_clients_set_to_default_leaves_startup_options_in_place() {
    options_survive("SET statement_timeout TO DEFAULT; SET search_path TO DEFAULT");
}
