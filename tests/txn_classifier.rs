//! Transaction pooling reads SQL as PostgreSQL reads it for each client:
//! a session-level SET hidden from a careless lexer (a comment ended by
//! `\r`, a backslash under `standard_conforming_strings = off`, a query too
//! large to read whole) must pin its client, so the backend is reset before
//! anyone else gets it. Each test has one client leave such a SET behind
//! over a pool of one backend, and a second client look.

mod common;

use common::q_ok;

use common::wire::message;
use common::{PgCluster, Pooler, PoolerOpts, RawConn, Transport};

const DEFAULT_PATH: &str = "\"$user\", public";

fn login(p: &Pooler) -> RawConn {
    common::scram_login(&p.endpoint(Transport::Unix))
}

fn search_path(c: &mut RawConn) -> String {
    q_ok(c, "SHOW search_path").scalar().unwrap_or_default()
}

/// Client A runs `setup` then `sneaky` (each a simple Query, `sneaky` sent
/// right behind `setup` when `pipelined`), checks PostgreSQL did run the
/// hidden SET, and leaves; client B, on the same single backend, must see
/// the default search_path.
fn hidden_set_does_not_reach_the_next_client(setup: &[&str], sneaky: &str, pipelined: bool) {
    let p = Pooler::start(PgCluster::shared(), PoolerOpts::transaction(1));
    let mut a = login(&p);
    if pipelined {
        let mut bytes = Vec::new();
        for sql in setup.iter().chain([&sneaky]) {
            bytes.extend(message(b'Q', format!("{sql}\0").as_bytes()));
        }
        a.send(&bytes).expect("send pipelined queries");
        for sql in setup.iter().chain([&sneaky]) {
            let r = a.read_query_result(std::time::Duration::from_secs(20));
            assert!(r.error.is_none(), "{sql}: {:?}", r.error);
        }
    } else {
        for sql in setup {
            q_ok(&mut a, sql);
        }
        q_ok(&mut a, sneaky);
    }
    assert_eq!(
        search_path(&mut a),
        "leak_schema",
        "PostgreSQL runs the SET the text hides: {sneaky:?}"
    );
    a.terminate();
    let mut b = login(&p);
    assert_eq!(
        search_path(&mut b),
        DEFAULT_PATH,
        "the next client got the first one's search_path: {sneaky:?}"
    );
}

#[test]
fn a_line_comment_ended_by_a_carriage_return_hides_nothing() {
    hidden_set_does_not_reach_the_next_client(
        &[],
        "SELECT 1 -- note\r; SET search_path = leak_schema",
        false,
    );
}

#[test]
fn a_backslash_escapes_when_the_client_turned_standard_strings_off() {
    hidden_set_does_not_reach_the_next_client(
        &["SET standard_conforming_strings = off"],
        r"SELECT 'x\''; SET search_path = leak_schema; --'",
        false,
    );
}

#[test]
fn sql_sent_before_standard_strings_changed_is_read_both_ways() {
    hidden_set_does_not_reach_the_next_client(
        &["SET standard_conforming_strings = off"],
        r"SELECT 'x\''; SET search_path = leak_schema; --'",
        true,
    );
}

#[test]
fn a_query_too_large_to_read_whole_pins() {
    let padding = "x".repeat(1_100_000);
    hidden_set_does_not_reach_the_next_client(
        &[],
        &format!("SELECT '{padding}'; SET search_path = leak_schema"),
        false,
    );
}
