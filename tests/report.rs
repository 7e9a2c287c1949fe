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

/// Runs `pgharbor report --admin <conninfo>` expecting failure; its stderr.
fn report_err(conninfo: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pgharbor"))
        .args(["report", "--admin", conninfo])
        .env_remove("PGPASSWORD")
        .output()
        .expect("run pgharbor report");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "report succeeded on {conninfo}: {err}"
    );
    err
}

fn assert_says(err: &str, words: &[&str]) {
    for w in words {
        assert!(err.contains(w), "{w:?} missing from: {err}");
    }
}

#[test]
fn report_says_why_when_it_cannot_connect() {
    let err = report_err("host=/nonexistent port=1 dbname=pgharbor user=x");
    assert_says(
        &err,
        &["cannot log in", "no socket at /nonexistent/.s.PGSQL.1"],
    );
    let port = common::util::free_port();
    let err = report_err(&format!(
        "host=127.0.0.1 port={port} dbname=pgharbor user=x"
    ));
    assert_says(
        &err,
        &[
            "connection refused at 127.0.0.1:",
            &port.to_string(),
            "is pgharbor running",
        ],
    );
}

#[test]
fn report_says_what_is_wrong_with_the_login() {
    let pg = PgCluster::shared();
    let certs = common::tls::Certs::generate("report-tls");
    let tls = common::tls::tls_toml(Some(&certs), &[("sslmode", "require")]);
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default().admin_users(&[SCRAM_USER.0]).tls(&tls),
    );
    let console = |t, pw| pooler.conninfo(t, SCRAM_USER.0, pw, "pgharbor");

    let err = report_err(&console(Transport::Unix, None));
    assert_says(
        &err,
        &[
            "asks user \"scram_user\" for a password",
            "PGPASSWORD",
            "does not prompt",
        ],
    );
    let err = report_err(&console(Transport::Unix, Some("wrong-password")));
    assert_says(&err, &["wrong password for user \"scram_user\"", "28P01"]);
    assert!(
        !err.contains("wrong-password"),
        "the password in the message: {err}"
    );
    // The pooler wants TLS from TCP clients; report does not speak it.
    let err = report_err(&console(Transport::Tcp, Some(SCRAM_USER.1)));
    assert_says(&err, &["requires TLS", "28000", "Unix socket"]);
    let plain = console(Transport::Tcp, Some(SCRAM_USER.1));
    let err = report_err(&plain.replace("sslmode=disable", "sslmode=require"));
    assert_says(&err, &["does not speak TLS", "sslmode=disable"]);
}
