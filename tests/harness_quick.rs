//! The benchmark harness end to end: `pgbench/run` with the quick profile's
//! smallest cell (connect per transaction, Unix socket, one round of 2 s) plus
//! a small idle-client memory measurement, against its own throwaway
//! PostgreSQL, with the pgharbor binary cargo built for this test
//! (`--pgharbor-bin`, so no release build is triggered). Checks that every
//! output exists and parses: raw.csv and medians.csv (header, a row per
//! target), results.json, idle.csv, summary.md's table, the SHOW OVERHEAD
//! report and the plot inputs.
//!
//! The harness runs PostgreSQL and PgBouncer as the `postgres` OS user when it
//! is root, as `scripts/test.sh` does. Its ports come from `tests/common`'s
//! `free_port`, below the kernel's ephemeral range. The harness installs nothing (`--no-install`):
//! scripts/test.sh installs PgBouncer, and without it the test fails (or,
//! with `PGHARBOR_ALLOW_SKIP=1`, runs without the PgBouncer target).

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/skip.rs"]
mod skip;
#[allow(dead_code)]
#[path = "common/util.rs"]
mod util;

/// The harness takes about 15 s here; past this it is stopped (SIGTERM, so
/// its cleanup trap stops the servers it started) and the test fails.
const DEADLINE: Duration = Duration::from_secs(150);
const IDLE_CLIENTS: u32 = 20;

/// Whether the harness will find PgBouncer: an executable file where it looks.
fn have_pgbouncer() -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    executable(Path::new("/usr/sbin/pgbouncer"))
        || std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| executable(&d.join("pgbouncer"))))
            .unwrap_or(false)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The last `max` bytes of a file, for failure messages.
fn tail(path: &Path, max: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// Splits a CSV line as bench.py writes it: fields may be double-quoted
/// (no doubled quotes inside: run's csv_quote turns " into ').
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            _ => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

/// A CSV file as (header, rows of name -> value).
fn read_csv(path: &Path) -> (Vec<String>, Vec<std::collections::HashMap<String, String>>) {
    let text = read(path);
    let mut lines = text.lines();
    let header = csv_fields(
        lines
            .next()
            .unwrap_or_else(|| panic!("{}: empty", path.display())),
    );
    let rows = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let fields = csv_fields(l);
            assert_eq!(
                fields.len(),
                header.len(),
                "{}: row with {} fields under a header of {}: {l}",
                path.display(),
                fields.len(),
                header.len()
            );
            header.iter().cloned().zip(fields).collect()
        })
        .collect();
    (header, rows)
}

#[test]
fn quick_profile_smallest_cell_end_to_end() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = util::TempDir::new("harness-quick");
    let out = work.path().join("results");
    let (stdout, stderr) = (work.path().join("stdout"), work.path().join("stderr"));
    let ports: Vec<u16> = (0..3).map(|_| util::free_port()).collect();
    let bouncer = have_pgbouncer();
    if !bouncer {
        skip::skip_or_fail("PgBouncer (the harness's third target) is not installed");
    }

    let mut child = Command::new("bash")
        .arg(root.join("pgbench/run"))
        .args(["--quick", "--workloads", "connect", "--transports", "unix"])
        .args([
            "--rounds", "1", "--time", "2", "--warmup", "0", "--scale", "1",
        ])
        .args(["--no-plot", "--no-install", "--idle-clients"])
        .arg(IDLE_CLIENTS.to_string())
        .arg("--pgharbor-bin")
        .arg(env!("CARGO_BIN_EXE_pgharbor"))
        .arg("--out")
        .arg(&out)
        .arg("--pg-port")
        .arg(ports[0].to_string())
        .arg("--pgharbor-port")
        .arg(ports[1].to_string())
        .arg("--pgbouncer-port")
        .arg(ports[2].to_string())
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&stdout).expect("stdout file"))
        .stderr(fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("start pgbench/run");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for pgbench/run") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            // SIGTERM: the harness's trap stops what it started.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = child.wait();
            panic!(
                "pgbench/run still running after {DEADLINE:?}; its stderr:\n{}",
                tail(&stderr, 6000)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        status.success(),
        "pgbench/run failed ({status}); its stderr:\n{}",
        tail(&stderr, 6000)
    );
    eprintln!("pgbench/run took {:.1?}", started.elapsed());

    let mut targets = vec!["direct", "pgharbor"];
    if bouncer {
        targets.push("pgbouncer");
    }

    // raw.csv: one ok row per target, in the connect/unix cell.
    let (header, rows) = read_csv(&out.join("raw.csv"));
    assert_eq!(
        &header[..4],
        ["round", "workload", "transport", "target"],
        "raw.csv header"
    );
    for field in ["tps", "status", "pooler_us_per_tx", "pool_mode"] {
        assert!(header.iter().any(|h| h == field), "raw.csv lacks {field}");
    }
    for target in &targets {
        let row = rows
            .iter()
            .find(|r| r["target"] == *target)
            .unwrap_or_else(|| panic!("raw.csv has no row for {target}: {rows:?}"));
        assert_eq!(
            (row["workload"].as_str(), row["transport"].as_str()),
            ("connect", "unix")
        );
        assert_eq!(row["status"], "ok", "{target}'s run: {row:?}");
        let tps: f64 = row["tps"].parse().expect("tps is a number");
        assert!(tps > 0.0, "{target}: tps {tps}");
    }
    if !bouncer {
        assert!(rows.iter().all(|r| r["target"] != "pgbouncer"));
    }

    // medians.csv: a cell per target.
    let (header, medians) = read_csv(&out.join("medians.csv"));
    assert_eq!(&header[..4], ["workload", "transport", "target", "unit"]);
    for target in &targets {
        assert!(
            medians
                .iter()
                .any(|m| m["target"] == *target && m["median"].parse::<f64>().is_ok()),
            "medians.csv has no median for {target}: {medians:?}"
        );
    }

    // results.json: the runs, the medians, the ratios and the idle clients.
    let json: serde_json::Value =
        serde_json::from_str(&read(&out.join("results.json"))).expect("results.json parses");
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(rows.len()));
    assert_eq!(
        json["medians"].as_array().map(Vec::len),
        Some(medians.len())
    );
    assert!(json["runs"][0]["tps"].is_f64(), "{}", json["runs"][0]);
    let ratios = json["ratios"].as_array().expect("ratios");
    assert!(
        ratios
            .iter()
            .any(|r| r["kind"] == "pgharbor/direct" && r["ratio_of_medians"].is_f64()),
        "no pgharbor/direct ratio: {ratios:?}"
    );

    // idle.csv: each pooler, plain and TLS, every idle client logged in.
    let (_, idle) = read_csv(&out.join("idle.csv"));
    for target in targets.iter().filter(|t| **t != "direct") {
        for transport in ["tcp", "tcp-tls"] {
            let row = idle
                .iter()
                .find(|r| r["target"] == *target && r["transport"] == transport)
                .unwrap_or_else(|| panic!("idle.csv lacks {target}/{transport}: {idle:?}"));
            assert_eq!(row["connected"], IDLE_CLIENTS.to_string(), "{row:?}");
            assert!(row["kib_per_client"].parse::<f64>().is_ok(), "{row:?}");
        }
    }
    assert_eq!(json["idle"].as_array().map(Vec::len), Some(idle.len()));

    // summary.md: the throughput table, the pgharbor row, the idle table.
    let summary = read(&out.join("summary.md"));
    for needle in [
        "| target | Unix socket |",
        "| PostgreSQL direct | ",
        "| pgharbor session | ",
        "| pgharbor / PostgreSQL | ",
        "### Memory per idle client",
    ] {
        assert!(
            summary.contains(needle),
            "summary.md lacks {needle:?}:\n{summary}"
        );
    }
    if bouncer {
        assert!(summary.contains("| PgBouncer session | "), "{summary}");
    } else {
        assert!(summary.contains("- PgBouncer: not run"), "{summary}");
    }
    assert_eq!(
        fs::read_to_string(&stdout).expect("stdout").trim(),
        summary.trim(),
        "stdout is the summary"
    );

    // pgharbor's own report and the plot inputs.
    assert!(
        read(&out.join("overhead.txt")).contains("client logins"),
        "overhead.txt:\n{}",
        read(&out.join("overhead.txt"))
    );
    serde_json::from_str::<serde_json::Value>(&read(&out.join("overhead.json")))
        .expect("overhead.json parses");
    assert!(read(&out.join("plots/connect.dat")).starts_with("transport "));
    assert!(out.join("plots/connect.gp").is_file());
    assert!(out.join("runs/r1-connect-unix-pgharbor.log").is_file());
}
