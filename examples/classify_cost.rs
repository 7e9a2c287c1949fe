//! Runs the transaction-pooling classifier over pgbench's TPC-B-like
//! statements, for instruction counts under callgrind:
//! `valgrind --tool=callgrind target/release/examples/classify_cost 10000`.

use pgharbor::protocol::sql::{classify, Strings};

const TPCB: [&str; 7] = [
    "BEGIN;",
    "UPDATE pgbench_accounts SET abalance = abalance + -2990 WHERE aid = 612345;",
    "SELECT abalance FROM pgbench_accounts WHERE aid = 612345;",
    "UPDATE pgbench_tellers SET tbalance = tbalance + -2990 WHERE tid = 5;",
    "UPDATE pgbench_branches SET bbalance = bbalance + -2990 WHERE bid = 1;",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (5, 1, 612345, -2990, CURRENT_TIMESTAMP);",
    "END;",
];

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let tracked = |name: &str| name.eq_ignore_ascii_case("search_path");
    let mut pins = 0usize;
    for _ in 0..rounds {
        for q in TPCB {
            let fx = classify(
                std::hint::black_box(q.as_bytes()),
                Strings::Standard,
                &tracked,
            );
            pins += usize::from(fx.pin.is_some());
        }
    }
    println!("{rounds} transactions classified, {pins} pins");
}
