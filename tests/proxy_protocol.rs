//! PROXY protocol v1 and v2 on the TCP listener (issue 17, item 2) against
//! a real pgharbor: the client a header names is the one SHOW CLIENTS
//! lists, the hba rules match and `loopbacksslmode` classifies; a header
//! from an untrusted address, a trusted source without a header and every
//! kind of malformed header are closed and logged; and Debian's HAProxy
//! with `send-proxy-v2` in front of two poolers, plain and with TLS passed
//! through to pgharbor; and a RELOAD that moves the trust.
//!
//! Everything runs on loopback: the "load balancer" connects from
//! 127.0.0.3 (the one trusted address), clients of the real HAProxy from
//! 127.0.0.2, untrusted clients from 127.0.0.1.

mod common;

use std::time::{Duration, Instant};

use common::haproxy::{self, Haproxy};
use common::proxy::{
    assert_closed, clients, connect_from, login, opts, relayed, row, scram_login, show_clients_now,
    v1, v2, v2_local, v2_raw, CLIENT, LB,
};
use common::skip::skip_or_fail;
use common::tls::{client_hello, tls_toml, Certs};
use common::util::TempDir;
use common::wait::wait_for_async;
use common::wire::{request_packet, TlsVerify, SSL_REQUEST_CODE};
use common::{PgCluster, Pooler, RawConn, Reply, SCRAM_USER, TEST_DB, TRUST_USER};

const STEP: Duration = Duration::from_secs(20);

#[test]
fn show_clients_lists_the_client_each_header_names() {
    let pg = PgCluster::shared();
    let p = Pooler::start(pg, opts());
    let mut open = Vec::new();
    for header in [v1("192.0.2.10:40001"), v2("[2001:db8::5]:40003")] {
        let mut raw = relayed(&p, &header);
        scram_login(&mut raw);
        open.push(raw);
    }
    // A header that arrives one byte per segment is waited for, not refused.
    let mut split = RawConn::from_tcp(connect_from(LB, p.port()));
    split.split_writes = true;
    split.send(&v2("198.51.100.20:40002")).expect("send header");
    split.split_writes = false;
    scram_login(&mut split);
    open.push(split);
    // LOCAL (a health check) and UNKNOWN keep the socket's own address, as
    // does an untrusted client that sends no header at all.
    let mut own = Vec::new();
    for (src, header) in [(LB, v2_local()), (LB, b"PROXY UNKNOWN\r\n".to_vec())] {
        let sock = connect_from(src, p.port());
        own.push(sock.local_addr().expect("local addr").port());
        let mut raw = RawConn::from_tcp(sock);
        raw.send(&header).expect("send header");
        scram_login(&mut raw);
        open.push(raw);
    }
    let direct = connect_from("127.0.0.1", p.port());
    let direct_port = direct.local_addr().expect("local addr").port();
    let mut raw = RawConn::from_tcp(direct);
    scram_login(&mut raw);
    open.push(raw);

    let mut want = vec![
        row("192.0.2.10", 40001, false),
        row("198.51.100.20", 40002, false),
        row("2001:db8::5", 40003, false),
        row(LB, own[0], false),
        row(LB, own[1], false),
        row("127.0.0.1", direct_port, false),
    ];
    want.sort();
    assert_eq!(clients(&p, want.len()), want);
    // The connection's log lines name the client, and the balancer as `via`.
    assert!(
        p.wait_for_log("peer=192.0.2.10:40001 via=127.0.0.3:", 1, STEP),
        "{}",
        p.log_text()
    );
}

#[test]
fn hba_rules_match_the_address_in_the_header() {
    let pg = PgCluster::shared();
    let dir = TempDir::new("proxy-hba");
    let hba = dir.path().join("pg_hba.conf");
    std::fs::write(
        &hba,
        "local all all trust\n\
         host all all 192.0.2.0/24 trust\n\
         host all all 198.51.100.0/24 reject\n",
    )
    .expect("write pg_hba.conf");
    let p = Pooler::start(
        pg,
        opts().auth_toml(&format!("hba_file = \"{}\"", hba.display())),
    );
    let mut allowed = relayed(&p, &v2("192.0.2.10:40001"));
    assert_eq!(login(&mut allowed, TRUST_USER, "x"), Ok(()));
    assert_eq!(allowed.auth_codes, [0], "trust: AuthenticationOk only");
    let refusal = |raw: &mut RawConn| {
        let e = login(raw, TRUST_USER, "x").expect_err("refused");
        assert_eq!(e.code, "28000", "{e:?}");
        e.message
    };
    let message = refusal(&mut relayed(&p, &v1("198.51.100.7:40002")));
    assert!(
        message.starts_with("pg_hba.conf rejects connection for host \"198.51.100.7\""),
        "{message}"
    );
    // Without an address in the header, the balancer's own address is
    // matched, and no rule lets it in.
    let message = refusal(&mut relayed(&p, &v2_local()));
    assert!(message.contains("host \"127.0.0.3\""), "{message}");
    let message = refusal(&mut RawConn::from_tcp(connect_from("127.0.0.1", p.port())));
    assert!(message.contains("host \"127.0.0.1\""), "{message}");
}

#[test]
fn loopbacksslmode_is_decided_by_the_address_in_the_header() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("proxy");
    let keys = [("sslmode", "require"), ("loopbacksslmode", "disable")];
    let p = Pooler::start(pg, opts().tls(&tls_toml(Some(&certs), &keys)));
    // A loopback client behind the (loopback) balancer gets loopbacksslmode ...
    let mut plain = relayed(&p, &v2("127.0.0.9:40001"));
    scram_login(&mut plain);
    drop(plain);
    let mut asks = relayed(&p, &v1("127.0.0.9:40002"));
    asks.send(&request_packet(SSL_REQUEST_CODE))
        .expect("SSLRequest");
    assert_eq!(asks.read_request_answer(STEP), Reply::Byte(b'N'));
    drop(asks);
    // ... a remote one sslmode: plain is refused, TLS after the header works.
    let e = login(
        &mut relayed(&p, &v2("192.0.2.10:40003")),
        SCRAM_USER.0,
        SCRAM_USER.1,
    )
    .expect_err("plain remote client refused");
    assert_eq!(
        (e.code.as_str(), e.message.as_str()),
        ("28000", "SSL required")
    );
    let mut tls = relayed(&p, &v1("192.0.2.10:40004"));
    tls.send(&request_packet(SSL_REQUEST_CODE))
        .expect("SSLRequest");
    assert_eq!(tls.read_request_answer(STEP), Reply::Byte(b'S'));
    tls.start_tls(&TlsVerify::None).expect("TLS handshake");
    scram_login(&mut tls);
    // Direct TLS: the ClientHello right behind the header is answered with
    // a handshake record, so the header reader left it on the socket.
    let mut header = v2("192.0.2.10:40005");
    header.extend_from_slice(&client_hello());
    let mut direct = relayed(&p, &header);
    assert_eq!(direct.read_byte(STEP), Reply::Byte(0x16));
    assert_eq!(clients(&p, 1), [row("192.0.2.10", 40004, true)]);
}

#[test]
fn refused_sources_and_malformed_headers_are_closed_and_logged() {
    let pg = PgCluster::shared();
    let p = Pooler::start(pg, opts().client_login_timeout("2s"));
    let startup =
        common::wire::startup_packet(3 << 16, &[("user", SCRAM_USER.0), ("database", TEST_DB)]);
    // A header from an address not in proxy_protocol_from: refused.
    for header in [v1("192.0.2.10:40001"), v2("192.0.2.10:40002")] {
        let mut raw = RawConn::from_tcp(connect_from("127.0.0.1", p.port()));
        raw.send(&[header, startup.clone()].concat()).expect("send");
        assert_closed(raw, "untrusted header");
    }
    let untrusted = "PROXY protocol header from an address not in listen.proxy_protocol_from";
    assert!(p.wait_for_log(untrusted, 2, STEP), "{}", p.log_text());
    let line = p.log_text();
    let line = line.lines().find(|l| l.contains(untrusted)).unwrap_or("");
    assert!(
        line.contains("peer=127.0.0.1:"),
        "the log names the address: {line}"
    );

    // The trusted source must send one.
    for first in [startup.clone(), request_packet(SSL_REQUEST_CODE)] {
        let mut raw = RawConn::from_tcp(connect_from(LB, p.port()));
        raw.send(&first).expect("send");
        assert_closed(raw, "trusted source without a header");
    }
    assert!(
        p.wait_for_log("no PROXY protocol header", 2, STEP),
        "{}",
        p.log_text()
    );

    let mut endless = b"PROXY TCP4 ".to_vec();
    endless.resize(120, b'1');
    let mut oversize = v2_raw(0x1, 0x11, &[]);
    oversize[14..16].copy_from_slice(&0xffffu16.to_be_bytes());
    let malformed: Vec<(&str, Vec<u8>)> = vec![
        (
            "v1 bad port",
            b"PROXY TCP4 192.0.2.1 10.0.0.1 65536 6432\r\n".to_vec(),
        ),
        (
            "v1 bad address",
            b"PROXY TCP4 192.0.2.256 10.0.0.1 1 6432\r\n".to_vec(),
        ),
        (
            "v1 lone LF",
            b"PROXY TCP4 192.0.2.1 10.0.0.1 1 6432\n".to_vec(),
        ),
        ("v1 without CRLF", endless),
        ("v2 version 1", {
            let mut h = v2("192.0.2.1:1");
            h[12] = 0x11;
            h
        }),
        ("v2 command 2", v2_raw(0x2, 0x11, &[0; 12])),
        ("v2 UDP", v2_raw(0x1, 0x12, &[0; 12])),
        ("v2 too short for TCP4", v2_raw(0x1, 0x11, &[0; 4])),
        ("v2 oversize", oversize),
    ];
    for (what, header) in &malformed {
        let mut raw = RawConn::from_tcp(connect_from(LB, p.port()));
        raw.send(&[header.clone(), startup.clone()].concat())
            .expect("send");
        assert_closed(raw, what);
    }
    // Half a header, then the client's end closed; then half a header and
    // silence, closed at client_login_timeout.
    let mut raw = RawConn::from_tcp(connect_from(LB, p.port()));
    raw.send(&v2("192.0.2.1:1")[..20]).expect("send");
    raw.shutdown_write();
    assert_closed(raw, "truncated header");
    let started = Instant::now();
    let mut raw = RawConn::from_tcp(connect_from(LB, p.port()));
    raw.send(b"PROXY TCP4 192.0.2.1 ").expect("send");
    assert_closed(raw, "stalled header");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // The header's time counts against the login's: a header finished
    // late leaves only what remains of client_login_timeout (the pause is
    // what is under test).
    let started = Instant::now();
    let mut raw = RawConn::from_tcp(connect_from(LB, p.port()));
    let header = v2("192.0.2.1:1");
    raw.send(&header[..10]).expect("send");
    std::thread::sleep(Duration::from_millis(1500));
    raw.send(&header[10..]).expect("send");
    // Once the header is whole, the client is a client: it gets the login
    // timeout's ErrorResponse.
    let e = raw
        .read_msg(STEP)
        .error()
        .expect("the login timeout's error");
    assert_eq!(e.code, "08P01", "{e:?}");
    assert!(e.message.contains("client_login_timeout"), "{e:?}");
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(3000),
        "closed after {took:?}, not at 2s from accept"
    );
    let refused = "PROXY protocol source refused";
    let count = 2 + malformed.len() + 2;
    assert!(p.wait_for_log(refused, count, STEP), "{}", p.log_text());
    assert!(p.wait_for_log("within 2s", 1, STEP), "{}", p.log_text());

    // And the pooler is still serving.
    let mut raw = relayed(&p, &v1("192.0.2.10:40009"));
    scram_login(&mut raw);
    assert_eq!(clients(&p, 1), [row("192.0.2.10", 40009, false)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_send_proxy_v2_in_front_of_two_poolers() {
    let Some(bin) = haproxy::binary() else {
        return skip_or_fail("haproxy is not installed (Debian: apt-get install haproxy)");
    };
    let pg = PgCluster::shared();
    let certs = Certs::generate("haproxy");
    let tls = tls_toml(Some(&certs), &[("sslmode", "prefer")]);
    let a = Pooler::start(pg, opts().tls(&tls));
    let b = Pooler::start(pg, opts().tls(&tls));
    let lb = Haproxy::start(&bin, &[a.port(), b.port()], LB);
    // Two plain and two TLS clients: round robin puts two on each pooler.
    let mut want = Vec::new();
    let mut open = Vec::new();
    for tls in [false, true, false, true] {
        let (client, port) = haproxy::connect_through(lb.port, CLIENT, tls.then_some(&certs)).await;
        want.push(row(CLIENT, port, tls));
        open.push(client);
    }
    want.sort();
    let seen = wait_for_async(STEP, || async {
        let (in_a, in_b) = (show_clients_now(&a), show_clients_now(&b));
        let mut all = [in_a.clone(), in_b.clone()].concat();
        all.sort();
        (all == want).then_some((in_a, in_b))
    })
    .await;
    let Some((in_a, in_b)) = seen else {
        panic!(
            "SHOW CLIENTS never showed {want:?}: {:?} and {:?}\n{}",
            show_clients_now(&a),
            show_clients_now(&b),
            lb.log_text()
        );
    };
    assert!(
        !in_a.is_empty() && !in_b.is_empty(),
        "both poolers serve: {in_a:?} / {in_b:?}"
    );
    // Equal to `want`, so the balancer's own address (127.0.0.3) is nowhere.
    drop(open);
    // HAProxy's health checks (v2 LOCAL headers) were never refused.
    for p in [&a, &b] {
        let log = p.log_text();
        assert!(!log.contains("PROXY protocol source refused"), "{log}");
        assert!(!log.contains("client refused"), "{log}");
    }
}

#[test]
fn a_reload_changes_who_must_send_a_header_for_new_connections() {
    let pg = PgCluster::shared();
    let p = Pooler::start(pg, opts());
    let mut before = relayed(&p, &v1("192.0.2.10:40001"));
    scram_login(&mut before);
    // Trust moves from 127.0.0.3 to 127.0.0.4.
    let path = p.config_path();
    let text = std::fs::read_to_string(path).expect("read config");
    let edited = text.replace(&format!("[\"{LB}/32\"]"), "[\"127.0.0.4\"]");
    assert_ne!(edited, text, "no proxy_protocol_from line in\n{text}");
    std::fs::write(path, edited).expect("write config");
    p.signal(libc::SIGHUP);
    assert!(
        p.wait_for_log("configuration reloaded", 1, STEP),
        "{}",
        p.log_text()
    );
    // 127.0.0.3 is now an ordinary client: its header is refused, and it
    // is served without one ...
    assert_closed(
        relayed(&p, &v1("192.0.2.10:40002")),
        "header from 127.0.0.3",
    );
    let sock = connect_from(LB, p.port());
    let plain_port = sock.local_addr().expect("local addr").port();
    let mut plain = RawConn::from_tcp(sock);
    scram_login(&mut plain);
    // ... while 127.0.0.4 must send one, and the connection already in
    // keeps the client it was admitted as.
    let mut new_lb = RawConn::from_tcp(connect_from("127.0.0.4", p.port()));
    new_lb
        .send(&v2("198.51.100.20:40003"))
        .expect("send header");
    scram_login(&mut new_lb);
    let mut without = RawConn::from_tcp(connect_from("127.0.0.4", p.port()));
    without
        .send(&request_packet(SSL_REQUEST_CODE))
        .expect("send");
    assert_closed(without, "127.0.0.4 without a header");
    let mut want = vec![
        row("192.0.2.10", 40001, false),
        row("198.51.100.20", 40003, false),
        row(LB, plain_port, false),
    ];
    want.sort();
    assert_eq!(clients(&p, 3), want);
}
