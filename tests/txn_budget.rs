//! Prepared statements have a memory budget: one client flooding named
//! Parse messages gets `53200` once its budget is spent, the pooler's
//! memory stays bounded, other clients are unaffected, and what the client
//! held is freed when it leaves.

mod common;

use std::time::Duration;

use common::ext::{bind, execute, parse, read_batch, sync};
use common::wait::wait_clients;
use common::{PgCluster, Pooler, PoolerOpts, RawConn, Transport, SCRAM_USER};

const WAIT: Duration = Duration::from_secs(30);

fn login(p: &Pooler) -> RawConn {
    common::scram_login(&p.endpoint(Transport::Unix))
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Sends `n` named Parses of distinct ~`size`-byte statements, each with
/// its own Sync, pipelined 200 at a time; returns the SQLSTATEs of the
/// errors seen.
fn flood(c: &mut RawConn, from: usize, n: usize, size: usize) -> Vec<String> {
    let pad = "x".repeat(size);
    let mut codes = Vec::new();
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(200) {
        let mut msgs = Vec::new();
        for i in chunk {
            msgs.push(parse(
                &format!("flood_{i}"),
                &format!("SELECT '{pad}' AS c{i}"),
            ));
            msgs.push(sync());
        }
        c.send(&msgs.concat()).expect("send");
        for _ in chunk {
            let b = read_batch(c, WAIT);
            assert!(b.ended.is_none(), "the session ended: {b:?}");
            codes.extend(b.codes());
        }
    }
    codes
}

#[test]
fn a_client_flooding_named_statements_gets_53200_and_others_go_on() {
    let opts = PoolerOpts::transaction(2)
        .admin_users(&[SCRAM_USER.0])
        .pool_toml(
            "prepared_statement_bytes = \"64MiB\"\nprepared_statement_bytes_per_client = \"1MiB\"",
        );
    let p = Pooler::start(PgCluster::shared(), opts);
    let pid = p.pid();
    let mut other = login(&p);
    let mut flooder = login(&p);
    let before = rss_kib(pid);
    // 20 000 statements of ~1 KiB: 20 MiB asked for, 1 MiB allowed.
    let codes = flood(&mut flooder, 0, 20_000, 1000);
    let refused = codes.iter().filter(|c| *c == "53200").count();
    assert!(
        refused > 15_000 && codes.iter().all(|c| c == "53200"),
        "expected 53200 past the budget, got {} errors: {:?}",
        codes.len(),
        &codes[..codes.len().min(5)]
    );
    let grown = rss_kib(pid).saturating_sub(before);
    assert!(grown < 16 * 1024, "the pooler grew by {grown} KiB");
    // The flooder's statements within its budget still work.
    let msgs = [bind("", "flood_0", &[]), execute(""), sync()].concat();
    flooder.send(&msgs).expect("send");
    let b = read_batch(&mut flooder, WAIT);
    assert!(b.errors.is_empty(), "{b:?}");
    // Another client is unaffected.
    let r = other.query("SELECT 1");
    assert!(r.error.is_none(), "{:?}", r.error);
    let codes = flood(&mut other, 0, 50, 100);
    assert!(codes.is_empty(), "the other client was refused: {codes:?}");
    // What the flooder held is freed when it leaves: the same flood by a
    // new client fits again.
    flooder.terminate();
    wait_clients(&p, 1);
    let mut again = login(&p);
    let codes = flood(&mut again, 100_000, 900, 1000);
    assert!(
        codes.is_empty(),
        "the flooder's budget was not given back: {:?}",
        &codes[..codes.len().min(3)]
    );
}

#[test]
fn the_pooler_wide_budget_holds_across_clients() {
    let opts = PoolerOpts::transaction(2)
        .admin_users(&[SCRAM_USER.0])
        .pool_toml(
            "prepared_statement_bytes = \"512KiB\"\nprepared_statement_bytes_per_client = \"1MiB\"",
        );
    let p = Pooler::start(PgCluster::shared(), opts);
    let mut a = login(&p);
    let mut b = login(&p);
    assert!(flood(&mut a, 0, 400, 1000).is_empty(), "400 KiB fit");
    let codes = flood(&mut b, 1000, 400, 1000);
    assert!(
        !codes.is_empty() && codes.iter().all(|c| c == "53200"),
        "{codes:?}"
    );
    // A statement someone already has costs nothing more.
    assert!(flood(&mut b, 0, 100, 1000).is_empty());
    a.terminate();
    b.terminate();
    wait_clients(&p, 0);
    let mut c = login(&p);
    assert!(
        flood(&mut c, 5000, 400, 1000).is_empty(),
        "freed with their clients"
    );
}
