//! Tests of [`super`]: a known workload's snapshot, encoded and parsed back.

use super::*;
use crate::listener::Transport;
use crate::stats::{AuthKind, BackendConnect, ClientLogin, SessionTransfer, Stats, BULK_BYTES};
use prometheus_parse::{Sample, Scrape, Value};
use std::time::Duration;

/// A workload: 3 plain socket logins (2 on reused backends), 1 TLS
/// loopback login, failures on both sides, 2 backend connects, traffic.
fn snapshot() -> Snapshot {
    let stats = Stats::new();
    let unix = Class::client(Transport::Unix, false, Some(AuthKind::Peer));
    let tls = Class::client(Transport::LoopbackTcp, true, Some(AuthKind::Scram));
    let server = Class::backend(Transport::Unix, false);
    let plain = ClientLogin {
        phases_us: [30, 0, 120, 2_000, 80, 2_300],
    };
    for i in 0..3 {
        stats.client_login(unix, &plain, i > 0);
    }
    let login = ClientLogin {
        phases_us: [40, 700, 300, 50, 60, 5_000],
    };
    stats.client_login(tls, &login, false);
    stats.client_failed(tls);
    let connect = BackendConnect {
        phases_us: [100, 0, 900, 1_000, 2_000],
    };
    stats.backend_connect(server, &connect);
    stats.backend_connect(server, &connect);
    stats.backend_failed(Class::backend(Transport::RemoteTcp, true));
    stats.backend_closed(server, 3);
    let mut t = SessionTransfer {
        bytes_in: 10,
        ..Default::default()
    };
    t.exchange(100, Duration::from_micros(50));
    t.exchange(3 * BULK_BYTES, Duration::from_millis(30));
    t.bytes_out = 100 + 3 * BULK_BYTES;
    (t.queries, t.xacts) = (2, 1);
    t.xact_time(Duration::from_millis(40));
    t.assigned(Duration::from_millis(5));
    stats.transfer(unix, &t);
    stats.transfer(server, &t);
    Snapshot {
        classes: stats.snapshot(),
        logins: stats.logins.load(Ordering::Relaxed),
        reused_logins: stats.reused_logins.load(Ordering::Relaxed),
        pools: vec![PoolRow {
            database: "app".into(),
            user: "alice".into(),
            servers: [1, 2, 0],
            max: 20,
            waiting: 3,
            paused: true,
            max_wait_s: 1.5,
        }],
        clients: [0, 0, 1, 2, 0, 0],
        databases: [
            ("app".to_string(), t),
            ("quiet".to_string(), Default::default()),
        ]
        .into_iter()
        .collect(),
        cert_not_after: Some(1_900_000_000),
        process: Process {
            resident_bytes: Some(50 << 20),
            open_fds: Some(12),
            cpu_seconds: Some(1.25),
        },
    }
}

fn encode(s: Snapshot) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(s));
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry).unwrap();
    text
}

fn parse(text: &str) -> Scrape {
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    // The parser skips lines it cannot read: make sure it skipped none.
    let parsed: usize = scrape
        .samples
        .iter()
        .map(|s| match &s.value {
            Value::Histogram(b) => b.len(),
            _ => 1,
        })
        .sum();
    let lines = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(parsed, lines, "unparsed lines in\n{text}");
    scrape
}

fn find<'s>(scrape: &'s Scrape, name: &str, labels: &[(&str, &str)]) -> &'s Sample {
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == name
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
        .unwrap_or_else(|| panic!("no {name}{labels:?}"))
}

fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    match find(scrape, name, labels).value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{name} is {other:?}"),
    }
}

fn class(
    transport: &'static str,
    tls: &'static str,
    auth: &'static str,
) -> Vec<(&'static str, &'static str)> {
    vec![("transport", transport), ("tls", tls), ("auth", auth)]
}

#[test]
fn every_documented_family_is_exposed_and_nothing_else() {
    let text = encode(snapshot());
    let exposed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let documented: Vec<&str> = include_str!("mod.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    assert_eq!(exposed, documented);
}

#[test]
fn counters_and_gauges_carry_the_workload() {
    let s = parse(&encode(snapshot()));
    let unix = class("unix", "false", "peer");
    let server = class("unix", "false", "");
    let tls = class("tcp-loopback", "true", "scram-sha-256");
    assert_eq!(value(&s, "pgharbor_client_logins_total", &unix), 3.0);
    assert_eq!(value(&s, "pgharbor_client_logins_total", &tls), 1.0);
    assert_eq!(value(&s, "pgharbor_client_login_failures_total", &tls), 1.0);
    assert_eq!(value(&s, "pgharbor_server_connects_total", &server), 2.0);
    let remote = class("tcp", "true", "");
    assert_eq!(
        value(&s, "pgharbor_server_connect_failures_total", &remote),
        1.0
    );
    assert_eq!(value(&s, "pgharbor_client_logins_all_total", &[]), 4.0);
    assert_eq!(
        value(&s, "pgharbor_backend_handshakes_avoided_total", &[]),
        2.0
    );
    let saved = value(&s, "pgharbor_backend_handshake_time_saved_seconds", &[]);
    assert!((saved - 0.004).abs() < 0.0001, "{saved}");

    for (side, c) in [("client", &unix), ("server", &server)] {
        let l = |k, v| [("side", side), c[0], c[1], c[2], (k, v)];
        let bulk = 3.0 * BULK_BYTES as f64;
        assert_eq!(
            value(&s, "pgharbor_transfer_bytes_total", &l("direction", "in")),
            10.0
        );
        assert_eq!(
            value(&s, "pgharbor_transfer_bytes_total", &l("direction", "out")),
            bulk + 100.0
        );
        let by_kind = "pgharbor_transfer_bytes_by_kind_total";
        assert_eq!(value(&s, by_kind, &l("kind", "bulk")), bulk);
        assert_eq!(value(&s, by_kind, &l("kind", "chatty")), 100.0);
        let ex = "pgharbor_transfer_exchanges_total";
        assert_eq!(value(&s, ex, &l("kind", "chatty")), 1.0);
        let busy = value(
            &s,
            "pgharbor_transfer_busy_seconds_total",
            &l("kind", "bulk"),
        );
        assert!((busy - 0.03).abs() < 1e-9, "{busy}");
    }

    let pool = |extra: Option<(&'static str, &'static str)>| {
        let mut l = vec![("database", "app"), ("user", "alice")];
        l.extend(extra);
        l
    };
    assert_eq!(
        value(&s, "pgharbor_pool_servers", &pool(Some(("state", "idle")))),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "pgharbor_pool_servers",
            &pool(Some(("state", "active")))
        ),
        1.0
    );
    assert_eq!(value(&s, "pgharbor_pool_max_servers", &pool(None)), 20.0);
    assert_eq!(value(&s, "pgharbor_pool_clients_waiting", &pool(None)), 3.0);
    assert_eq!(value(&s, "pgharbor_pool_paused", &pool(None)), 1.0);
    assert_eq!(value(&s, "pgharbor_clients", &[("state", "active")]), 2.0);
    assert_eq!(
        value(&s, "pgharbor_clients", &[("state", "negotiating")]),
        0.0
    );
    assert_eq!(value(&s, "pgharbor_pool_maxwait_seconds", &pool(None)), 1.5);
}

#[test]
fn databases_build_certificate_and_process() {
    let s = parse(&encode(snapshot()));
    let app = [("database", "app")];
    assert_eq!(value(&s, "pgharbor_database_queries_total", &app), 2.0);
    assert_eq!(value(&s, "pgharbor_database_transactions_total", &app), 1.0);
    let quiet = [("database", "quiet")];
    assert_eq!(value(&s, "pgharbor_database_queries_total", &quiet), 0.0);
    let xact = value(&s, "pgharbor_database_transaction_seconds_total", &app);
    assert!((xact - 0.04).abs() < 1e-9, "{xact}");
    let wait = value(&s, "pgharbor_database_wait_seconds_total", &app);
    assert!((wait - 0.005).abs() < 1e-9, "{wait}");
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(value(&s, "pgharbor_build_info", &version), 1.0);
    let expiry = value(&s, "pgharbor_tls_certificate_expiry_seconds", &[]);
    assert_eq!(expiry, 1_900_000_000.0);
    assert_eq!(value(&s, "process_open_fds", &[]), 12.0);
    assert_eq!(value(&s, "process_cpu_seconds_total", &[]), 1.25);
    let rss = value(&s, "process_resident_memory_bytes", &[]);
    assert_eq!(rss, (50u64 << 20) as f64);
}

#[test]
fn histograms_are_cumulative_and_end_at_their_count() {
    let s = parse(&encode(snapshot()));
    let mut seen = 0;
    for sample in &s.samples {
        let Value::Histogram(buckets) = &sample.value else {
            continue;
        };
        seen += 1;
        let labels: Vec<(&str, &str)> = sample
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let count = value(&s, &format!("{}_count", sample.metric), &labels);
        assert!(buckets.windows(2).all(|w| w[0].less_than < w[1].less_than));
        assert!(buckets.windows(2).all(|w| w[0].count <= w[1].count));
        let last = buckets.last().unwrap();
        assert_eq!((last.less_than, last.count), (f64::INFINITY, count));
    }
    // 6 phases × 2 client classes; 5 phases and logins served × 2 server
    // classes (one seen only failing: empty histograms).
    assert_eq!(seen, 6 * 2 + (5 + 1) * 2);

    let tls = find(
        &s,
        "pgharbor_client_login_phase_seconds",
        &[
            ("transport", "tcp-loopback"),
            ("tls", "true"),
            ("auth", "scram-sha-256"),
            ("phase", "tls_handshake"),
        ],
    );
    let Value::Histogram(b) = &tls.value else {
        unreachable!()
    };
    let at = |le: f64| b.iter().find(|h| h.less_than == le).unwrap().count;
    assert_eq!((at(0.0005), at(0.001)), (0.0, 1.0));
    let plain = [
        ("transport", "unix"),
        ("tls", "false"),
        ("auth", "peer"),
        ("phase", "auth"),
    ];
    let sum = value(&s, "pgharbor_client_login_phase_seconds_sum", &plain);
    assert!((sum - 3.0 * 120e-6).abs() < 1e-9, "{sum}");
}
