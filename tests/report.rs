//! `pgharbor report`: the overhead report of a running pooler, read through
//! its admin console, as a table and as JSON.

mod common;

use std::process::Command;

use common::{connect_ok, PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER, TEST_DB};

fn report(pooler: &Pooler, json: bool) -> String {
    let conninfo = pooler.conninfo(
        Transport::Unix,
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        "pgharbor",
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pgharbor"));
    cmd.args(["report", "--admin", &conninfo]);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("run pgharbor report");
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 report")
}

#[tokio::test(flavor = "multi_thread")]
async fn report_prints_the_classes_a_workload_used() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default().admin_users(&[SCRAM_USER.0]));
    for t in [Transport::Unix, Transport::Unix, Transport::Tcp] {
        let client =
            connect_ok(&pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)).await;
        client.simple_query("SELECT 1").await.unwrap();
    }

    let json: serde_json::Value = serde_json::from_str(&report(&pooler, true)).expect("JSON");
    let rows = json.as_array().expect("an array of rows");
    let client_row = |transport: &str| {
        rows.iter()
            .find(|r| r["side"] == "client" && r["transport"] == transport)
            .unwrap_or_else(|| panic!("no client row for {transport}: {json:#}"))
    };
    // Console logins are not pooled sessions and are not counted.
    assert_eq!(client_row("unix")["established"], 2);
    assert_eq!(client_row("tcp-loopback")["established"], 1);
    let total = rows
        .iter()
        .find(|r| r["side"] == "total")
        .expect("a total row");
    let logins = total["logins"].as_i64().unwrap();
    let connects = total["backend_connects"].as_i64().unwrap();
    assert_eq!(
        total["handshakes_avoided"].as_i64().unwrap(),
        logins - connects
    );

    let table = report(&pooler, false);
    assert!(table.contains("tcp-loopback"), "{table}");
    assert!(table.contains("backend handshakes avoided"), "{table}");
}

#[test]
fn report_says_why_when_it_cannot_connect() {
    let out = Command::new(env!("CARGO_BIN_EXE_pgharbor"))
        .args([
            "report",
            "--admin",
            "host=/nonexistent port=1 dbname=pgharbor user=x",
        ])
        .output()
        .expect("run pgharbor report");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read SHOW OVERHEAD"), "{err}");
}
