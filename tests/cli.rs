//! The command line: `pgharbor check` accepts good configs (the harness's
//! and the shipped reference ones) and names the bad key otherwise;
//! `--version` and `--help` work.

mod common;

use std::process::Command;
use std::time::Duration;

use common::util::unique_temp_dir;
use common::{PgCluster, Pooler, PoolerOpts, RawConn, Transport, SCRAM_USER, TEST_DB};

#[test]
fn check_accepts_the_harness_config() {
    let pg = PgCluster::shared();
    let text = Pooler::sample_config(pg, &PoolerOpts::default());
    let (code, output) = Pooler::run_check(&text);
    assert_eq!(code, 0, "check refused:\n{text}\n{output}");
}

#[test]
fn check_names_the_bad_key() {
    let pg = PgCluster::shared();
    let good = Pooler::sample_config(pg, &PoolerOpts::default());
    let port_line = good.lines().find(|l| l.starts_with("port = ")).unwrap();
    // (what, from, to, a word the message must contain)
    let cases = [
        (
            "unknown key",
            "[pool]\n",
            "[pool]\nbogus_key = 1\n",
            "bogus_key",
        ),
        (
            "wrong type",
            "default_pool_size = 20",
            "default_pool_size = \"twenty\"",
            "default_pool_size",
        ),
        (
            "unknown auth method",
            "method = \"scram-sha-256\"",
            "method = \"kerberos\"",
            "method",
        ),
        (
            "unparsable duration",
            "query_wait_timeout = \"120s\"",
            "query_wait_timeout = \"soon\"",
            "query_wait_timeout",
        ),
        ("port out of range", port_line, "port = 70000", "port"),
        (
            "socket mode not octal",
            "unix_socket_mode = \"0777\"",
            "unix_socket_mode = \"0999\"",
            "unix_socket_mode",
        ),
        (
            "unknown top-level table",
            "[admin]",
            "[bogus_table]\nx = 1\n\n[admin]",
            "bogus_table",
        ),
    ];
    for (what, from, to, word) in cases {
        assert!(good.contains(from), "{what}: sample lacks {from:?}");
        let bad = good.replacen(from, to, 1);
        let (code, output) = Pooler::run_check(&bad);
        assert_ne!(code, 0, "{what}: check accepted\n{bad}");
        assert!(
            output.contains(word),
            "{what}: message does not name {word:?}: {output}"
        );
    }
}

#[test]
fn check_refuses_a_conninfo_keyword_libpq_does_not_know() {
    // libpq refuses `invalid connection option "sslmdoe"`; passing it on as
    // a startup parameter would drop the intended sslmode without a word at
    // check time and fail every backend login later.
    let pg = PgCluster::shared();
    let good = Pooler::sample_config(pg, &PoolerOpts::default());
    let bad = good.replacen(
        "conninfo = \"host=",
        "conninfo = \"sslmdoe=require host=",
        1,
    );
    assert_ne!(bad, good);
    let (code, output) = Pooler::run_check(&bad);
    assert_ne!(
        code, 0,
        "check accepted a misspelt sslmode in conninfo:\n{bad}"
    );
    assert!(
        output.contains("sslmdoe"),
        "message does not name the keyword: {output}"
    );
}

#[test]
fn shipped_reference_configs_validate() {
    let pg = PgCluster::shared();
    let conf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conf");
    let certs = pg.ca_cert().parent().unwrap();
    for name in ["pgharbor.toml", "pgharbor-minimal.toml"] {
        let dir = unique_temp_dir("conf");
        std::fs::copy(conf.join(name), dir.join(name))
            .unwrap_or_else(|e| panic!("conf/{name}: {e}"));
        let example = conf.join("userlist.txt.example");
        let userlist = std::fs::read_to_string(example).unwrap_or_default();
        std::fs::write(dir.join("userlist.txt"), userlist).unwrap();
        for f in ["server.crt", "server.key"] {
            std::fs::copy(certs.join(f), dir.join(f)).unwrap();
        }
        let out = Command::new(Pooler::binary())
            .arg("check")
            .arg("--config")
            .arg(dir.join(name))
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "conf/{name} (with a userlist and certificate beside it) fails check: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn version_and_help() {
    let out = Command::new(Pooler::binary())
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
    let out = Command::new(Pooler::binary())
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("check") && help.contains("--config"),
        "{help}"
    );
}

/// Starts a pooler with `args`, has one client log in and one fail to, stops
/// it with SIGTERM and returns its whole stderr/stdout log.
fn log_of_a_short_run(args: &[&str]) -> String {
    let mut pooler = Pooler::start(PgCluster::shared(), PoolerOpts::default().args(args));
    let mut ok = common::scram_login(&pooler.endpoint(Transport::Unix));
    assert!(ok.query("SELECT 1").error.is_none());
    ok.terminate();
    let mut bad = RawConn::connect(&pooler.endpoint(Transport::Tcp));
    let refused = bad.login(
        &[("user", SCRAM_USER.0), ("database", TEST_DB)],
        Some("wrong password"),
    );
    assert!(refused.is_err(), "a wrong password logged in");
    pooler.signal(libc::SIGTERM);
    assert!(
        pooler.wait_exit(Duration::from_secs(10)).is_some(),
        "pgharbor did not exit on SIGTERM"
    );
    std::fs::read_to_string(pooler.dir().join("pgharbor.log")).expect("read pgharbor.log")
}

#[test]
fn a_log_file_has_no_colour_codes() {
    // The harness redirects stderr to a file and leaves NO_COLOR unset, as a
    // service manager would: the pooler must notice it is not a terminal.
    let log = log_of_a_short_run(&[]);
    assert!(log.contains("pgharbor started"), "{log}");
    assert!(
        !log.contains('\x1b'),
        "escape sequences in a log that is not a terminal:\n{log:?}"
    );
}

#[test]
fn log_format_json_writes_one_object_per_line() {
    let log = log_of_a_short_run(&["--log-format", "json"]);
    let mut messages = Vec::new();
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert!(v["level"].is_string(), "no level: {line}");
        assert!(v["timestamp"].is_string(), "no timestamp: {line}");
        let message = v["fields"]["message"].as_str();
        messages.push(
            message
                .unwrap_or_else(|| panic!("no fields.message: {line}"))
                .to_string(),
        );
    }
    for want in ["pgharbor started", "pgharbor stopped"] {
        assert!(
            messages.iter().any(|m| m == want),
            "no {want:?} in {messages:?}"
        );
    }
    // Structured fields stay fields, and a client's lines carry its
    // connection span (who, over what), once.
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        lines.iter().any(|v| v["fields"]["version"].is_string()),
        "the start-up line lost its version field:\n{log}"
    );
    let login = lines
        .iter()
        .find(|v| v["fields"]["message"] == "client logged in")
        .unwrap_or_else(|| panic!("no login line:\n{log}"));
    assert_eq!(login["span"]["transport"], "unix", "{login}");
    assert!(
        login.get("spans").is_none(),
        "span list repeats the span: {login}"
    );
}

#[test]
fn threads_auto_is_one_per_core_and_a_bad_count_is_refused() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (arg, want) in [("auto", cores), ("2", 2), ("1", 1)] {
        let log = log_of_a_short_run(&["--threads", arg]);
        let line = log
            .lines()
            .find(|l| l.contains("runtime threads"))
            .unwrap_or_else(|| panic!("--threads {arg}: no runtime line in\n{log}"));
        assert!(
            line.ends_with(&format!("threads={want}")),
            "--threads {arg} should run {want} threads: {line}"
        );
    }
    let out = Command::new(Pooler::binary())
        .args(["--threads", "lots", "--config", "/nonexistent.toml"])
        .output()
        .expect("run pgharbor");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("expected a number of threads or \"auto\""),
        "{err}"
    );
}
