//! The Prometheus endpoint: HTTP behaviour against an in-process server,
//! then a real pgharbor whose `/metrics` counts the logins of a known
//! workload by transport. Every scrape is parsed as Prometheus text.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use prometheus_parse::{Scrape, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use common::tls::{tls_toml, Certs};
use common::util::free_port;
use common::{connect_ok, PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER, TEST_DB};
use pgharbor::admin::metrics;
use pgharbor::config::Config;

/// One request on its own connection: the status line, the headers
/// (lower-cased names) and the body.
async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
) -> (String, Vec<(String, String)>, String) {
    let exchange = async {
        let mut tcp = TcpStream::connect(addr).await.expect("connect to metrics");
        let req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        tcp.write_all(req.as_bytes()).await.expect("send request");
        let mut raw = Vec::new();
        tcp.read_to_end(&mut raw).await.expect("read response");
        String::from_utf8(raw).expect("UTF-8 response")
    };
    let text = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("metrics endpoint answered in 10 s");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Parses `text`, failing if the parser had to skip a line.
fn parse(text: &str) -> Scrape {
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parse");
    let parsed: usize = scrape
        .samples
        .iter()
        .map(|s| match &s.value {
            Value::Histogram(b) => b.len(),
            _ => 1,
        })
        .sum();
    let lines = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    assert_eq!(parsed, lines, "lines the parser skipped in\n{text}");
    scrape
}

/// The value of the sample `name` with exactly `labels`, if there is one.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == name
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
        .map(|s| match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            ref other => panic!("{name} is {other:?}"),
        })
}

#[tokio::test]
async fn endpoint_serves_metrics_only_and_stops_on_cancel() {
    let config = Config::parse(
        "[auth]\nmethod = \"trust\"\n[databases.app]\nconninfo = \"host=/tmp user=alice\"\n",
        Path::new("/tmp/pgharbor.toml"),
    )
    .expect("config");
    let pooler = pgharbor::pooler::Pooler::new(config).await.expect("pooler");
    // A pool exists once asked for; nothing connects until a client needs it.
    pooler.pool_for("app", "bob").expect("pool");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(metrics::serve_on(
        listener,
        pooler.clone(),
        shutdown.clone(),
    ));

    let (status, headers, body) = http(addr, "GET", "/metrics").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(
        header(&headers, "content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let scrape = parse(&body);
    let pool = [("database", "app"), ("user", "alice")];
    assert_eq!(
        value(&scrape, "pgharbor_pool_max_servers", &pool),
        Some(20.0)
    );
    assert_eq!(value(&scrape, "pgharbor_pool_paused", &pool), Some(0.0));
    assert_eq!(
        value(&scrape, "pgharbor_client_logins_all_total", &[]),
        Some(0.0)
    );

    // /health: ok while serving, 503 while every pool is paused.
    let (status, _, body) = http(addr, "GET", "/health").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(body, "ok\n");
    let pool = pooler.pool_for("app", "bob").expect("pool");
    pool.pause().await;
    let (status, _, body) = http(addr, "GET", "/health").await;
    assert!(status.starts_with("HTTP/1.1 503"), "{status}");
    assert_eq!(body, "paused\n");
    pool.resume();
    let (status, _, _) = http(addr, "HEAD", "/health").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");

    let (status, _, _) = http(addr, "GET", "/").await;
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    let (status, headers, _) = http(addr, "POST", "/metrics").await;
    assert!(status.starts_with("HTTP/1.1 405"), "{status}");
    assert_eq!(header(&headers, "allow"), Some("GET, HEAD"));

    // A scraper holding a keep-alive connection does not hold up shutdown.
    let idle = TcpStream::connect(addr).await.unwrap();
    shutdown.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(8), server).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
    drop(idle);
    // The port may already belong to another test's server (ports are
    // picked by binding 0 in parallel test binaries), so "closed" means: no
    // pgharbor metrics are served there any more.
    if let Ok(mut tcp) = TcpStream::connect(addr).await {
        let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        let _ = tcp.write_all(req.as_bytes()).await;
        let mut raw = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), tcp.read_to_end(&mut raw)).await;
        assert!(
            !String::from_utf8_lossy(&raw).contains("pgharbor_"),
            "metrics still served after shutdown"
        );
    }
}

#[tokio::test]
async fn serve_reports_an_address_in_use() {
    let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = Config::parse(
        "[auth]\nmethod = \"trust\"\n",
        Path::new("/tmp/pgharbor.toml"),
    )
    .expect("config");
    let pooler = pgharbor::pooler::Pooler::new(config).await.expect("pooler");
    let err = metrics::serve(
        taken.local_addr().unwrap(),
        pooler,
        CancellationToken::new(),
    )
    .await
    .expect_err("bind must fail");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
}

/// Scrapes until `done` holds (stats are merged just after a login's
/// ReadyForQuery is sent), returning the last scrape.
async fn scrape_until(addr: SocketAddr, done: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, body) = http(addr, "GET", "/metrics").await;
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let scrape = parse(&body);
        if done(&scrape) || Instant::now() > deadline {
            return scrape;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn login_counters_split_by_transport() {
    let pg = PgCluster::shared();
    let metrics_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default().metrics_listen(&metrics_addr.to_string()),
    );
    let logins = [(Transport::Unix, 3), (Transport::Tcp, 2)];
    for (transport, n) in logins {
        for _ in 0..n {
            let conninfo = pooler.conninfo(transport, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
            let client = connect_ok(&conninfo).await;
            client.simple_query("SELECT 1").await.expect("query");
        }
    }
    let scram = ("auth", "scram-sha-256");
    let unix = [("transport", "unix"), ("tls", "false"), scram];
    let tcp = [("transport", "tcp-loopback"), ("tls", "false"), scram];
    // Server series carry no client method (an empty label).
    let server = [("transport", "unix"), ("tls", "false"), ("auth", "")];
    let logins_of = |s: &Scrape, class: &[(&str, &str)]| {
        value(s, "pgharbor_client_logins_total", class).unwrap_or(0.0)
    };
    let s = scrape_until(metrics_addr, |s| {
        logins_of(s, &unix) >= 3.0 && logins_of(s, &tcp) >= 2.0
    })
    .await;
    assert_eq!(logins_of(&s, &unix), 3.0);
    assert_eq!(logins_of(&s, &tcp), 2.0);
    assert_eq!(
        value(&s, "pgharbor_client_logins_all_total", &[]),
        Some(5.0)
    );
    // The database reaches PostgreSQL over its Unix socket.
    let connects = value(&s, "pgharbor_server_connects_total", &server).expect("connects");
    assert!((1.0..=5.0).contains(&connects), "{connects}");
    let avoided = value(&s, "pgharbor_backend_handshakes_avoided_total", &[]);
    assert_eq!(avoided, Some(5.0 - connects));
    let phase = |p| [unix[0], unix[1], unix[2], ("phase", p)];
    let tls_time = value(
        &s,
        "pgharbor_client_login_phase_seconds_sum",
        &phase("tls_handshake"),
    );
    assert_eq!(tls_time, Some(0.0));
    let total = value(
        &s,
        "pgharbor_client_login_phase_seconds_count",
        &phase("total"),
    );
    assert_eq!(total, Some(3.0));
    let pool = [("database", TEST_DB), ("user", SCRAM_USER.0)];
    assert_eq!(value(&s, "pgharbor_pool_max_servers", &pool), Some(20.0));
}

/// A certificate's notAfter as Unix time, read with OpenSSL.
fn not_after(pem_path: &Path) -> f64 {
    let pem = std::fs::read(pem_path).expect("read certificate");
    let cert = openssl::x509::X509::from_pem(&pem).expect("PEM certificate");
    let epoch = openssl::asn1::Asn1Time::from_unix(0).unwrap();
    let d = epoch.diff(cert.not_after()).unwrap();
    f64::from(d.days) * 86_400.0 + f64::from(d.secs)
}

#[tokio::test(flavor = "multi_thread")]
async fn waits_counts_process_and_health_through_a_drain() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("metrics");
    let metrics_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let pooler = Pooler::start(
        pg,
        PoolerOpts::transaction(1)
            .tls(&tls_toml(Some(&certs), &[("sslmode", "prefer")]))
            .shutdown_timeout("20s")
            .metrics_listen(&metrics_addr.to_string()),
    );
    let conninfo = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let holder = connect_ok(&conninfo).await;
    let waiter = connect_ok(&conninfo).await;
    holder.simple_query("BEGIN").await.expect("BEGIN");
    let query = tokio::spawn(async move {
        let r = waiter.simple_query("SELECT 1").await;
        (waiter, r)
    });
    let pool = [("database", TEST_DB), ("user", SCRAM_USER.0)];
    let maxwait = |s: &Scrape| value(s, "pgharbor_pool_maxwait_seconds", &pool).unwrap_or(0.0);
    let s = scrape_until(metrics_addr, |s| maxwait(s) >= 0.5).await;
    assert!((0.5..30.0).contains(&maxwait(&s)), "{}", maxwait(&s));
    holder.simple_query("COMMIT").await.expect("COMMIT");
    let (waiter, r) = query.await.unwrap();
    r.expect("the waiter's query");
    drop(waiter);

    // holder: BEGIN, COMMIT; waiter: SELECT 1 = 2 transactions, 3 queries,
    // handed over when the sessions end.
    drop(holder);
    let db = [("database", TEST_DB)];
    let queries = |s: &Scrape| value(s, "pgharbor_database_queries_total", &db).unwrap_or(0.0);
    let s = scrape_until(metrics_addr, |s| queries(s) >= 3.0).await;
    assert_eq!(queries(&s), 3.0);
    assert_eq!(
        value(&s, "pgharbor_database_transactions_total", &db),
        Some(2.0)
    );
    let waited = value(&s, "pgharbor_database_wait_seconds_total", &db).unwrap_or(0.0);
    assert!(waited >= 0.5, "wait seconds {waited}");
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(value(&s, "pgharbor_build_info", &version), Some(1.0));
    let expiry = value(&s, "pgharbor_tls_certificate_expiry_seconds", &[]);
    assert_eq!(expiry, Some(not_after(&certs.cert)));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(expiry.unwrap_or(0.0) > now, "an expired test certificate?");
    let rss = value(&s, "process_resident_memory_bytes", &[]).unwrap_or(0.0);
    assert!((1e6..1e10).contains(&rss), "rss {rss}");
    let fds = value(&s, "process_open_fds", &[]).unwrap_or(0.0);
    assert!((4.0..10_000.0).contains(&fds), "fds {fds}");
    let cpu = value(&s, "process_cpu_seconds_total", &[]).unwrap_or(-1.0);
    assert!((0.0..3600.0).contains(&cpu), "cpu {cpu}");

    // /health: 200 while serving, 503 from the moment SIGTERM starts the
    // drain (a client still connected keeps it draining).
    let (status, _, body) = http(metrics_addr, "GET", "/health").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(body, "ok\n");
    let _draining = connect_ok(&conninfo).await;
    pooler.signal(libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    let (status, body) = loop {
        let (status, _, body) = http(metrics_addr, "GET", "/health").await;
        if status.starts_with("HTTP/1.1 503") || Instant::now() > deadline {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.starts_with("HTTP/1.1 503"), "{status}");
    assert_eq!(body, "shutting down\n");
}
