//! Failures are loud (issue 14 item 5): a failed client login (wrong
//! password, unknown user, no such database, TLS required), a failed TLS
//! handshake from a client (garbage, a protocol version below the minimum)
//! and a backend that cannot be opened (PostgreSQL down, its login refused)
//! each put exactly one WARN line in the pooler's log file, with the reason
//! and the peer, and never a password.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode, SslVersion};

use common::tls::{tls_toml, Certs};
use common::util::free_port;
use common::wait::{wait_until, WAIT};
use common::wire::request_packet;
use common::{
    Backend, DbEntry, Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Transport, SCRAM_USER,
    TEST_DB,
};

/// SSLRequest's code.
const SSL_REQUEST: u32 = 80_877_103;
/// A password no WARN line may contain.
const WRONG: &str = "not-the-password-4711";

fn warn_lines(pooler: &Pooler) -> Vec<String> {
    let log = std::fs::read_to_string(pooler.dir().join("pgharbor.log")).unwrap_or_default();
    log.lines()
        .filter(|l| l.contains(" WARN "))
        .map(str::to_string)
        .collect()
}

/// Runs `provoke`, then waits for exactly one new WARN line, which must
/// contain every word of `words`; returns it.
fn one_warning(pooler: &Pooler, what: &str, words: &[&str], provoke: impl FnOnce()) -> String {
    let before = warn_lines(pooler).len();
    provoke();
    let logged = wait_until(WAIT, || warn_lines(pooler).len() > before);
    let lines = warn_lines(pooler);
    assert!(logged, "{what}: no WARN line\n{}", pooler.log_text());
    let new = &lines[before..];
    assert_eq!(new.len(), 1, "{what}: not exactly one WARN line: {new:#?}");
    let line = &new[0];
    for word in words {
        assert!(line.contains(word), "{what}: {word:?} missing from {line}");
    }
    assert!(
        !line.contains(WRONG),
        "{what}: a password in the log: {line}"
    );
    assert!(
        !line.contains(SCRAM_USER.1),
        "{what}: a password in the log: {line}"
    );
    line.clone()
}

fn login(ep: &Endpoint, user: &str, database: &str, password: &str) {
    let mut c = RawConn::connect(ep);
    let r = c.login(&[("user", user), ("database", database)], Some(password));
    assert!(r.is_err(), "{user}@{database} logged in");
}

#[test]
fn failed_client_logins_are_warned_about_once() {
    let certs = Certs::generate("loud-login");
    let opts = PoolerOpts::default().tls(&tls_toml(Some(&certs), &[("sslmode", "require")]));
    let pooler = Pooler::start(PgCluster::shared(), opts);
    let unix = pooler.endpoint(Transport::Unix);
    let line = one_warning(
        &pooler,
        "wrong password",
        &[
            "client login failed",
            "28P01",
            "wrong password",
            SCRAM_USER.0,
            "transport=unix",
        ],
        || login(&unix, SCRAM_USER.0, TEST_DB, WRONG),
    );
    assert!(line.contains("peer="), "no peer: {line}");
    one_warning(
        &pooler,
        "unknown user",
        &[
            "client login failed",
            "28P01",
            "no such user in auth.auth_file",
            "nobody_here",
        ],
        || login(&unix, "nobody_here", TEST_DB, WRONG),
    );
    one_warning(
        &pooler,
        "no such database",
        &["client login failed", "3D000", "no_such_db"],
        || login(&unix, SCRAM_USER.0, "no_such_db", SCRAM_USER.1),
    );
    // TCP clients must use TLS here: a plain one is refused.
    let line = one_warning(
        &pooler,
        "TLS required",
        &["client login failed", "28000", "transport=tcp"],
        || {
            login(
                &pooler.endpoint(Transport::Tcp),
                SCRAM_USER.0,
                TEST_DB,
                SCRAM_USER.1,
            )
        },
    );
    assert!(line.contains("peer=127.0.0.1:"), "no peer address: {line}");
}

/// Sends SSLRequest on TCP and waits for `S`.
fn ssl_requested(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(&request_packet(SSL_REQUEST)).unwrap();
    let mut answer = [0u8; 1];
    s.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"S");
    s
}

#[test]
fn failed_tls_handshakes_are_warned_about_once() {
    let certs = Certs::generate("loud-tls");
    let tls = tls_toml(
        Some(&certs),
        &[("sslmode", "prefer"), ("min_protocol_version", "TLSv1.3")],
    );
    let pooler = Pooler::start(PgCluster::shared(), PoolerOpts::default().tls(&tls));
    one_warning(
        &pooler,
        "garbage instead of a ClientHello",
        &[
            "client login failed",
            "TLS handshake failed: http request",
            "peer=127.0.0.1:",
        ],
        || {
            // A probe that leaves after `S` without a ClientHello tried
            // nothing: no WARN of its own.
            drop(ssl_requested(pooler.port()));
            let mut s = ssl_requested(pooler.port());
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let _ = s.read(&mut [0u8; 64]);
        },
    );
    one_warning(
        &pooler,
        "TLS 1.2 against a TLS 1.3 minimum",
        &[
            "client login failed",
            "TLS handshake failed: unsupported protocol",
        ],
        || {
            let s = ssl_requested(pooler.port());
            let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
            b.set_verify(SslVerifyMode::NONE);
            b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
            let refused = b.build().connect("localhost", s);
            assert!(refused.is_err(), "a TLS 1.2 handshake succeeded");
        },
    );
}

#[test]
fn backends_that_cannot_be_opened_are_warned_about_once_per_attempt() {
    let pg = PgCluster::shared();
    let dead_port = free_port();
    let down = DbEntry::new("down", Backend::Tcp).conninfo_extra(&format!("port={dead_port}"));
    let refused = DbEntry::new("refused", Backend::Tcp).user(SCRAM_USER.0, Some(WRONG));
    let opts = PoolerOpts::default().databases(vec![down, refused]);
    let pooler = Pooler::start(pg, opts);
    let unix = pooler.endpoint(Transport::Unix);
    one_warning(
        &pooler,
        "PostgreSQL down",
        &[
            "backend connect failed",
            "database=down",
            &format!("127.0.0.1:{dead_port}"),
            "refused",
        ],
        || login(&unix, SCRAM_USER.0, "down", SCRAM_USER.1),
    );
    one_warning(
        &pooler,
        "backend login refused",
        &[
            "backend connect failed",
            "database=refused",
            "password authentication failed",
        ],
        || login(&unix, SCRAM_USER.0, "refused", SCRAM_USER.1),
    );
}
