//! The SSL negotiation's edges, each compared with PostgreSQL where the
//! behaviour should be the same:
//! - plaintext stuffed behind an SSLRequest (CVE-2021-23214, PgBouncer
//!   CVE-2021-3935) is refused with 08P01 and never executed, whether the
//!   pooler's answer would have been `S` or `N`;
//! - SSLRequest or GSSENCRequest repeated on a plain link, or SSLRequest
//!   inside TLS, ends the connection;
//! - a direct-TLS ClientHello (first byte 0x16) on a pooler without TLS is
//!   closed like PostgreSQL 15 closes it.

mod common;

use std::time::Duration;

use common::tls::{client_hello, tls_toml, Certs};
use common::wire::{
    message, request_packet, startup_packet, ErrorFields, TlsVerify, GSSENC_REQUEST_CODE,
    PROTOCOL_3_0, SSL_REQUEST_CODE,
};
use common::{
    Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, TEST_DB, TRUST_USER,
};

const WAIT: Duration = Duration::from_secs(5);

/// Everything a raw client saw during one negotiation.
#[derive(Debug, Default)]
struct Seen {
    /// The single-byte answer to the first request, if one came.
    answer: Option<u8>,
    /// A single-byte answer to the request sent after the first answer.
    second_answer: Option<u8>,
    /// ErrorResponses, in order.
    errors: Vec<ErrorFields>,
    /// Anything else (authentication requests, other messages).
    other: Vec<String>,
    /// The server closed the connection (rather than going silent).
    closed: bool,
}

/// Connects to `ep`, sends `first`, reads the answer; after `S` runs a TLS
/// handshake (no certificate check). Then sends `after` (inside TLS when
/// the answer was `S`) and reads everything up to the close.
fn drive(ep: &Endpoint, first: &[u8], after: Option<&[u8]>) -> Seen {
    let mut c = RawConn::connect(ep);
    c.send(first).expect("send");
    let mut seen = Seen::default();
    let mut reply = c.read_request_answer(WAIT);
    if let Reply::Byte(b) = reply {
        seen.answer = Some(b);
        if b == b'S' {
            c.start_tls(&TlsVerify::None)
                .unwrap_or_else(|e| panic!("{ep:?}: {e}"));
        }
        match after {
            Some(bytes) => {
                // The peer may already be gone; what it said is what counts.
                let _ = c.send(bytes);
                reply = c.read_request_answer(WAIT);
                if let Reply::Byte(b) = reply {
                    seen.second_answer = Some(b);
                    reply = c.read_msg(WAIT);
                }
            }
            None => reply = c.read_msg(WAIT),
        }
    }
    loop {
        match reply {
            Reply::Msg(b'E', body) => seen.errors.push(ErrorFields::parse(&body)),
            Reply::Closed => {
                seen.closed = true;
                return seen;
            }
            Reply::Timeout => return seen,
            other => seen.other.push(other.summary()),
        }
        reply = c.read_msg(WAIT);
    }
}

/// SSLRequest (or GSSENCRequest), StartupMessage for the trust user and a
/// Query, in one write: what a man in the middle injects before the
/// handshake.
fn stuffed(code: u32, table: &str) -> Vec<u8> {
    let mut bytes = request_packet(code);
    bytes.extend(startup_packet(
        PROTOCOL_3_0,
        &[("user", TRUST_USER), ("database", TEST_DB)],
    ));
    bytes.extend(message(
        b'Q',
        format!("CREATE TABLE {table}()\0").as_bytes(),
    ));
    bytes
}

fn table_exists(pg: &PgCluster, table: &str) -> bool {
    pg.psql_ok(
        TEST_DB,
        &format!("SELECT count(*) FROM pg_class WHERE relname = '{table}'"),
    ) == "1"
}

/// The refusal of stuffed bytes: one FATAL 08P01 with PostgreSQL's message,
/// nothing else (no authentication, no query result), then the close.
fn assert_stuffing_refused(what: &str, seen: &Seen) {
    let errors: Vec<(&str, &str, &str)> = seen
        .errors
        .iter()
        .map(|e| (e.severity.as_str(), e.code.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        errors,
        [(
            "FATAL",
            "08P01",
            "received unencrypted data after SSL request"
        )],
        "{what}: {seen:?}"
    );
    assert!(
        seen.other.is_empty() && seen.closed,
        "{what}: expected only the error and a close: {seen:?}"
    );
}

/// A pooler with client auth `trust` (so that a stuffed StartupMessage, if
/// it were processed, would log in and run the stuffed query) and the given
/// TLS keys.
fn trust_pooler(pg: &PgCluster, tls: &str) -> Pooler {
    Pooler::start(pg, PoolerOpts::default().auth("trust").tls(tls))
}

/// The pooler is alive and logs a plain client in over both transports.
fn assert_serves_plain(pooler: &mut Pooler) {
    pooler.assert_alive();
    for t in Transport::ALL {
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        raw.login(&[("user", TRUST_USER), ("database", TEST_DB)], None)
            .unwrap_or_else(|e| panic!("next client over {t:?}: {e:?}"));
        assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
        raw.terminate();
    }
}

#[test]
fn plaintext_stuffed_after_ssl_request_is_refused_and_never_executed() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("stuffing");
    // Answers S on both transports, and N on both.
    let mut answers_s = trust_pooler(
        pg,
        &tls_toml(
            Some(&certs),
            &[("sslmode", "prefer"), ("socketsslmode", "require")],
        ),
    );
    let mut answers_n = trust_pooler(
        pg,
        &tls_toml(
            Some(&certs),
            &[("sslmode", "disable"), ("socketsslmode", "disable")],
        ),
    );
    // Proof that the answers are what the cases below claim.
    for (pooler, want) in [(&answers_s, b'S'), (&answers_n, b'N')] {
        for t in Transport::ALL {
            let mut c = RawConn::connect(&pooler.endpoint(t));
            c.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
            assert_eq!(c.read_byte(WAIT), Reply::Byte(want), "{t:?}");
        }
    }

    let mut tables = Vec::new();
    for (label, pooler) in [("s", &answers_s), ("n", &answers_n)] {
        for t in Transport::ALL {
            for (kind, code) in [("ssl", SSL_REQUEST_CODE), ("gss", GSSENC_REQUEST_CODE)] {
                let table = format!("stuffed_{kind}_{label}_{t:?}").to_lowercase();
                let seen = drive(&pooler.endpoint(t), &stuffed(code, &table), None);
                assert_stuffing_refused(
                    &format!("pooler answering {label} over {t:?}, {kind} request"),
                    &seen,
                );
                tables.push(table);
            }
        }
    }
    // PostgreSQL itself answers first (`S` over TCP, the error then coming
    // inside TLS; `N` on the socket) and then sends the same 08P01; the
    // pooler refuses without answering. Either way the stuffed bytes are
    // never read as protocol.
    for t in Transport::ALL {
        let table = format!("stuffed_postgres_{t:?}").to_lowercase();
        let seen = drive(&pg.endpoint(t), &stuffed(SSL_REQUEST_CODE, &table), None);
        let want = if t == Transport::Tcp { b'S' } else { b'N' };
        assert_eq!(seen.answer, Some(want), "PostgreSQL over {t:?}: {seen:?}");
        assert_stuffing_refused(&format!("PostgreSQL over {t:?}"), &seen);
        tables.push(table);
    }

    // Control: the same StartupMessage and Query without the SSLRequest do
    // create the table, so the checks below can see a stuffed query that ran.
    let control = "stuffed_control";
    let mut plain = RawConn::connect(&answers_n.endpoint(Transport::Tcp));
    plain
        .login(&[("user", TRUST_USER), ("database", TEST_DB)], None)
        .expect("control login");
    assert!(plain
        .query(&format!("CREATE TABLE {control}()"))
        .error
        .is_none());
    plain.terminate();
    assert!(table_exists(pg, control), "control table missing");
    pg.psql_ok(TEST_DB, &format!("DROP TABLE {control}"));

    let ran: Vec<&String> = tables.iter().filter(|t| table_exists(pg, t)).collect();
    assert!(ran.is_empty(), "stuffed queries were executed: {ran:?}");
    assert_serves_plain(&mut answers_n);
    answers_s.assert_alive();
}

/// Sends the requests in `codes` one by one on a plain link, reading the
/// single-byte answer to each but the last; returns those answers and what
/// followed the last request (summaries, up to the close).
fn repeat(ep: &Endpoint, codes: &[u32]) -> (Vec<Reply>, Vec<String>) {
    let mut c = RawConn::connect(ep);
    let (last, before) = codes.split_last().expect("at least one request");
    let mut answers = Vec::new();
    for code in before {
        c.send(&request_packet(*code)).unwrap();
        answers.push(c.read_byte(WAIT));
    }
    let _ = c.send(&request_packet(*last));
    let mut after = vec![c.read_request_answer(WAIT)];
    if !matches!(after[0], Reply::Closed | Reply::Timeout) {
        after.extend(c.read_until_close(WAIT));
    }
    (answers, after.iter().map(Reply::summary).collect())
}

#[test]
fn repeated_encryption_requests_on_a_plain_link_close_the_connection() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("repeat");
    let mut pooler = trust_pooler(
        pg,
        &tls_toml(
            Some(&certs),
            &[("sslmode", "disable"), ("socketsslmode", "disable")],
        ),
    );
    let cases: [(&str, &[u32]); 4] = [
        ("SSLRequest twice", &[SSL_REQUEST_CODE, SSL_REQUEST_CODE]),
        (
            "GSSENCRequest twice",
            &[GSSENC_REQUEST_CODE, GSSENC_REQUEST_CODE],
        ),
        (
            "GSSENCRequest, SSLRequest, SSLRequest",
            &[GSSENC_REQUEST_CODE, SSL_REQUEST_CODE, SSL_REQUEST_CODE],
        ),
        (
            "SSLRequest, GSSENCRequest, GSSENCRequest",
            &[SSL_REQUEST_CODE, GSSENC_REQUEST_CODE, GSSENC_REQUEST_CODE],
        ),
    ];
    // The pooler over both transports, and PostgreSQL on its socket (where
    // it answers N too; it ends the connection with FATAL 0A000
    // "unsupported frontend protocol 1234.5679", the pooler with 08P01: the
    // texts differ, the outcome does not).
    let mut targets: Vec<(String, Endpoint)> = Transport::ALL
        .iter()
        .map(|t| (format!("pooler over {t:?}"), pooler.endpoint(*t)))
        .collect();
    targets.push((
        "PostgreSQL over its socket".into(),
        pg.endpoint(Transport::Unix),
    ));
    for (what, codes) in cases {
        for (target, ep) in &targets {
            let (answers, after) = repeat(ep, codes);
            assert!(
                answers.iter().all(|a| *a == Reply::Byte(b'N')),
                "{target}, {what}: {answers:?}"
            );
            let only_errors = after[..after.len() - 1]
                .iter()
                .all(|r| r.starts_with("ErrorResponse FATAL"));
            assert!(
                only_errors && after.last().map(String::as_str) == Some("Closed"),
                "{target}, {what}: the repeated request must end the connection \
                 (at most a FATAL, no answer byte, no authentication): {after:?}"
            );
        }
    }
    assert_serves_plain(&mut pooler);
}

#[test]
fn ssl_request_inside_tls_closes_the_connection() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("inside");
    let mut pooler = trust_pooler(
        pg,
        &tls_toml(
            Some(&certs),
            &[("sslmode", "require"), ("socketsslmode", "require")],
        ),
    );
    let ssl = request_packet(SSL_REQUEST_CODE);
    let mut targets = vec![
        (
            "pooler over TCP".to_string(),
            pooler.endpoint(Transport::Tcp),
        ),
        (
            "pooler over the socket".to_string(),
            pooler.endpoint(Transport::Unix),
        ),
    ];
    // PostgreSQL answers S over TCP only.
    targets.push((
        "PostgreSQL over TCP".to_string(),
        pg.endpoint(Transport::Tcp),
    ));
    for (what, ep) in targets {
        let seen = drive(&ep, &ssl, Some(&ssl));
        assert_eq!(seen.answer, Some(b'S'), "{what}: {seen:?}");
        assert!(
            seen.second_answer.is_none() && seen.other.is_empty() && seen.closed,
            "{what}: SSLRequest inside TLS did not end the connection: {seen:?}"
        );
    }
    pooler.assert_alive();
    // The pooler still completes a TLS login afterwards.
    let mut raw = RawConn::connect(&pooler.endpoint(Transport::Tcp));
    raw.send(&ssl).unwrap();
    assert_eq!(raw.read_byte(WAIT), Reply::Byte(b'S'));
    raw.start_tls(&TlsVerify::Full {
        ca: certs.ca.clone(),
        host: "localhost".into(),
    })
    .unwrap();
    raw.login(&[("user", TRUST_USER), ("database", TEST_DB)], None)
        .unwrap_or_else(|e| panic!("TLS login after the probes: {e:?}"));
    assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
}

#[test]
fn direct_tls_client_hello_without_tls_is_closed_as_postgres_does() {
    let pg = PgCluster::shared();
    // No [tls] keys at all: TLS is off.
    let mut pooler = trust_pooler(pg, "");
    let hello = client_hello();
    for t in Transport::ALL {
        let describe = |ep: &Endpoint| {
            let mut c = RawConn::connect(ep);
            let _ = c.send(&hello);
            c.read_until_close(WAIT)
                .iter()
                .map(Reply::summary)
                .collect::<Vec<_>>()
        };
        let direct = describe(&pg.endpoint(t));
        let via = describe(&pooler.endpoint(t));
        assert_eq!(direct, ["Closed"], "PostgreSQL over {t:?}");
        assert_eq!(via, direct, "pooler vs PostgreSQL over {t:?}");
    }
    assert_serves_plain(&mut pooler);
}
