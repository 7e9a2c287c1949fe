//! Malformed and unusual start-up traffic, sent byte for byte to the pooler
//! and, where PostgreSQL's behaviour is the contract, to PostgreSQL too, in
//! the manner of PgCat's protocol_spec: the replies must match. After each
//! case the pooler must still be running and serve the next client.

mod common;

use std::time::{Duration, Instant};

use common::wire::{
    message, request_packet, startup_packet, Failure, CANCEL_REQUEST_CODE, GSSENC_REQUEST_CODE,
    PROTOCOL_3_0, SSL_REQUEST_CODE,
};
use common::{
    Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, SCRAM_USER, TEST_DB,
    TRUST_USER,
};

/// Sends `bytes` on a fresh connection and describes every reply up to the
/// close (or "Timeout" after `wait`).
fn outcome(ep: &Endpoint, bytes: &[u8], wait: Duration) -> Vec<String> {
    let mut c = RawConn::connect(ep);
    let _ = c.send(bytes);
    c.read_until_close(wait)
        .iter()
        .map(Reply::summary)
        .collect()
}

/// The pooler is alive and logs a client in over both transports.
fn assert_serves(pooler: &mut Pooler) {
    pooler.assert_alive();
    for t in Transport::ALL {
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        raw.login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap_or_else(|e| panic!("next client over {t:?} could not log in: {e:?}"));
        assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
        raw.terminate();
    }
}

/// Asserts pooler and PostgreSQL reply the same to `bytes` over `t`.
fn same_as_postgres(pg: &PgCluster, pooler: &Pooler, t: Transport, what: &str, bytes: &[u8]) {
    let wait = Duration::from_secs(3);
    let direct = outcome(&pg.endpoint(t), bytes, wait);
    let via = outcome(&pooler.endpoint(t), bytes, wait);
    assert_ne!(
        direct.last().map(String::as_str),
        Some("Timeout"),
        "{what}: PostgreSQL itself did not close (harness problem): {direct:?}"
    );
    assert_eq!(via, direct, "{what} over {t:?}: pooler vs PostgreSQL");
}

#[test]
fn bad_startup_lengths_are_closed_as_postgres_does() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        for len in [0u32, 1, 4, 7, 0xFFFF_FFFF, 0x8000_0000, 10_005, 1_000_000] {
            // Only the length word: a server that waited for the body (or
            // tried to allocate it) would not close.
            same_as_postgres(
                pg,
                &pooler,
                t,
                &format!("startup length {len}"),
                &len.to_be_bytes(),
            );
        }
        // An oversized packet sent in full.
        let mut big = 10_005u32.to_be_bytes().to_vec();
        big.extend_from_slice(&PROTOCOL_3_0.to_be_bytes());
        big.resize(10_005, b'a');
        same_as_postgres(pg, &pooler, t, "10 005-byte startup packet", &big);
    }
    assert_serves(&mut pooler);
}

/// A valid StartupMessage for trust_user of exactly `total` bytes (padded
/// with a long application_name).
fn startup_of_len(total: usize) -> Vec<u8> {
    let base = startup_packet(
        PROTOCOL_3_0,
        &[
            ("user", TRUST_USER),
            ("database", TEST_DB),
            ("application_name", ""),
        ],
    );
    let pad = "p".repeat(total - base.len());
    let pkt = startup_packet(
        PROTOCOL_3_0,
        &[
            ("user", TRUST_USER),
            ("database", TEST_DB),
            ("application_name", &pad),
        ],
    );
    assert_eq!(pkt.len(), total);
    pkt
}

/// "login goes on" (first reply is an authentication request) or the full
/// close outcome.
fn first_step(ep: &Endpoint, bytes: &[u8]) -> String {
    let mut c = RawConn::connect(ep);
    let _ = c.send(bytes);
    match c.read_msg(Duration::from_secs(3)) {
        Reply::Msg(b'R', _) => "authentication request".to_string(),
        other => {
            let mut v = vec![other.summary()];
            if !matches!(other, Reply::Closed | Reply::Timeout) {
                v.extend(
                    c.read_until_close(Duration::from_secs(3))
                        .iter()
                        .map(Reply::summary),
                );
            }
            v.join(", ")
        }
    }
}

#[test]
fn startup_size_limit_is_postgres_limit() {
    // PostgreSQL refuses a startup packet whose length word exceeds
    // 10 000 + 4 (MAX_STARTUP_PACKET_LENGTH counts the body).
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        for total in [10_000, 10_001, 10_004, 10_005] {
            let pkt = startup_of_len(total);
            let direct = first_step(&pg.endpoint(t), &pkt);
            let via = first_step(&pooler.endpoint(t), &pkt);
            assert_eq!(via, direct, "{total}-byte startup packet over {t:?}");
        }
    }
    assert_serves(&mut pooler);
}

#[test]
fn startup_without_user_gets_postgres_error() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    let pkt = startup_packet(PROTOCOL_3_0, &[("database", TEST_DB)]);
    for t in Transport::ALL {
        let via = outcome(&pooler.endpoint(t), &pkt, Duration::from_secs(3));
        assert_eq!(
            via[0],
            "ErrorResponse FATAL 28000 \"no PostgreSQL user name specified in startup packet\""
        );
        same_as_postgres(pg, &pooler, t, "startup packet without user", &pkt);
    }
    assert_serves(&mut pooler);
}

#[test]
fn non_terminated_startup_packets_get_postgres_error() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    let bodies: [&[u8]; 4] = [
        b"user\0trust_user\0",           // no final NUL
        b"user\0trust_user",             // value not terminated
        b"user\0trust_user\0database",   // name not terminated
        b"user\0trust_user\0\0trailing", // bytes after the terminator
    ];
    for t in Transport::ALL {
        for body in bodies {
            let mut pkt = ((8 + body.len()) as u32).to_be_bytes().to_vec();
            pkt.extend_from_slice(&PROTOCOL_3_0.to_be_bytes());
            pkt.extend_from_slice(body);
            same_as_postgres(
                pg,
                &pooler,
                t,
                &format!("startup body {:?}", String::from_utf8_lossy(body)),
                &pkt,
            );
        }
    }
    assert_serves(&mut pooler);
}

/// Sends a startup packet of protocol `major.minor` to PostgreSQL and the
/// pooler and returns both outcomes.
fn old_or_future_protocol(
    pg: &PgCluster,
    pooler: &Pooler,
    t: Transport,
    major: u32,
    minor: u32,
) -> (Vec<String>, Vec<String>) {
    let pkt = startup_packet(
        (major << 16) | minor,
        &[("user", TRUST_USER), ("database", TEST_DB)],
    );
    let direct = outcome(&pg.endpoint(t), &pkt, Duration::from_secs(3));
    let via = outcome(&pooler.endpoint(t), &pkt, Duration::from_secs(3));
    (direct, via)
}

#[test]
fn protocol_4_gets_postgres_fatal() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        let (direct, via) = old_or_future_protocol(pg, &pooler, t, 4, 0);
        assert_eq!(
            direct[0],
            "ErrorResponse FATAL 0A000 \"unsupported frontend protocol 4.0: server supports 3.0 to 3.0\""
        );
        assert_eq!(via, direct, "protocol 4.0 over {t:?}");
    }
    assert_serves(&mut pooler);
}

#[test]
fn protocol_2_gets_postgres_fatal_in_the_format_a_v2_client_reads() {
    // PostgreSQL (which dropped v2 in 14) still words this one error in the
    // v2 format ('E', text, NUL; no length word), so that an old client can
    // show it. A v3-framed ErrorResponse reads as an empty message to such a
    // client: the first length byte is a NUL.
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        for (major, minor) in [(2, 0), (1, 0)] {
            let (direct, via) = old_or_future_protocol(pg, &pooler, t, major, minor);
            assert!(
                direct[0].contains("FATAL:  unsupported frontend protocol"),
                "{direct:?}"
            );
            assert_eq!(via, direct, "protocol {major}.{minor} over {t:?}");
        }
    }
    assert_serves(&mut pooler);
}

#[test]
fn newer_minor_version_and_pq_options_negotiate_then_continue() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    let cases: [(u32, &[(&str, &str)]); 4] = [
        (1, &[]),
        (0, &[("_pq_.harbor_opt", "1")]),
        (5, &[("_pq_.harbor_opt", "1"), ("_pq_.other", "x")]),
        (2, &[("_pq_.harbor_opt", "1")]),
    ];
    for t in Transport::ALL {
        for (minor, extra) in cases {
            let version = (3 << 16) | minor;
            let direct_params: Vec<(&str, &str)> =
                [&[("user", TRUST_USER), ("database", TEST_DB)][..], extra].concat();
            let pooled_params: Vec<(&str, &str)> =
                [&[("user", SCRAM_USER.0), ("database", TEST_DB)][..], extra].concat();

            let mut direct = RawConn::connect(&pg.endpoint(t));
            direct
                .send(&startup_packet(version, &direct_params))
                .unwrap();
            let d = direct
                .finish_login(&direct_params, None)
                .unwrap_or_else(|e| panic!("PostgreSQL: {e:?}"));

            let mut via = RawConn::connect(&pooler.endpoint(t));
            via.send(&startup_packet(version, &pooled_params)).unwrap();
            let p = via
                .finish_login(&pooled_params, Some(SCRAM_USER.1))
                .unwrap_or_else(|e: Failure| {
                    panic!("3.{minor} with {extra:?} over {t:?}: login failed: {e:?}")
                });
            assert_eq!(
                p.negotiate, d.negotiate,
                "NegotiateProtocolVersion for 3.{minor} with {extra:?} over {t:?}"
            );
            assert!(p.negotiate.is_some());
            assert_eq!(via.query("SELECT 7").scalar().as_deref(), Some("7"));
            via.terminate();
            direct.terminate();
        }
    }
    assert_serves(&mut pooler);
}

#[test]
fn ssl_and_gssenc_requests_are_refused_with_n_then_login_works() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        for codes in [
            &[SSL_REQUEST_CODE][..],
            &[GSSENC_REQUEST_CODE][..],
            &[GSSENC_REQUEST_CODE, SSL_REQUEST_CODE][..],
        ] {
            let mut raw = RawConn::connect(&pooler.endpoint(t));
            for code in codes {
                raw.send(&request_packet(*code)).unwrap();
                assert_eq!(
                    raw.read_byte(Duration::from_secs(3)),
                    Reply::Byte(b'N'),
                    "request {code} over {t:?}"
                );
            }
            raw.login(
                &[("user", SCRAM_USER.0), ("database", TEST_DB)],
                Some(SCRAM_USER.1),
            )
            .unwrap_or_else(|e| panic!("login after {codes:?} over {t:?}: {e:?}"));
            assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
        }
    }
    // On the socket PostgreSQL also says N to SSLRequest; the bytes match.
    let mut direct = RawConn::connect(&pg.endpoint(Transport::Unix));
    direct.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
    assert_eq!(direct.read_byte(Duration::from_secs(3)), Reply::Byte(b'N'));
    assert_serves(&mut pooler);
}

#[test]
fn malformed_cancel_requests_are_closed_as_postgres_does() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        // Unknown key: closed without a reply.
        same_as_postgres(
            pg,
            &pooler,
            t,
            "CancelRequest with an unknown key",
            &common::wire::cancel_packet(12345, 678),
        );
        // Too short to hold pid and key.
        let mut short = 12u32.to_be_bytes().to_vec();
        short.extend_from_slice(&CANCEL_REQUEST_CODE.to_be_bytes());
        short.extend_from_slice(&1i32.to_be_bytes());
        let via = outcome(&pooler.endpoint(t), &short, Duration::from_secs(3));
        assert_eq!(via.last().map(String::as_str), Some("Closed"), "{via:?}");
    }
    assert_serves(&mut pooler);
}

#[test]
fn unknown_message_type_after_login_is_fatal_08p01_like_postgres() {
    let pg = PgCluster::shared();
    // One backend: the client that sent garbage must not spoil it for the next.
    let mut pooler = Pooler::start(pg, PoolerOpts::default().pool_size(1));
    for t in Transport::ALL {
        for tag in [b'y', b'z', 0u8, b'a'] {
            let bytes = message(tag, b"");
            let mut direct = RawConn::connect(&pg.endpoint(t));
            direct
                .login(
                    &[("user", SCRAM_USER.0), ("database", TEST_DB)],
                    Some(SCRAM_USER.1),
                )
                .unwrap();
            direct.send(&bytes).unwrap();
            let direct_replies: Vec<String> = direct
                .read_until_close(Duration::from_secs(3))
                .iter()
                .map(Reply::summary)
                .collect();

            let mut via = RawConn::connect(&pooler.endpoint(t));
            via.login(
                &[("user", SCRAM_USER.0), ("database", TEST_DB)],
                Some(SCRAM_USER.1),
            )
            .unwrap();
            via.send(&bytes).unwrap();
            let via_replies: Vec<String> = via
                .read_until_close(Duration::from_secs(3))
                .iter()
                .map(Reply::summary)
                .collect();
            assert!(
                direct_replies[0].starts_with("ErrorResponse FATAL 08P01"),
                "{direct_replies:?}"
            );
            assert_eq!(via_replies, direct_replies, "message type {tag} over {t:?}");
            assert_serves(&mut pooler);
        }
    }
}

#[test]
fn a_session_sent_one_byte_per_write_works() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        raw.split_writes = true;
        raw.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
        assert_eq!(raw.read_byte(Duration::from_secs(3)), Reply::Byte(b'N'));
        raw.login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap_or_else(|e| panic!("split login over {t:?}: {e:?}"));
        let res = raw.query("SELECT 'split', 40 + 2");
        assert_eq!(
            res.rows,
            vec![vec![Some("split".to_string()), Some("42".to_string())]]
        );
        // Extended protocol: Parse, Bind, Execute, Sync, one byte at a time.
        let mut ext = Vec::new();
        ext.extend(message(b'P', b"\0SELECT $1::int * 3\0\0\0"));
        let mut bind = b"\0\0".to_vec(); // portal, statement
        bind.extend_from_slice(&0i16.to_be_bytes()); // param formats
        bind.extend_from_slice(&1i16.to_be_bytes()); // one param
        bind.extend_from_slice(&2i32.to_be_bytes());
        bind.extend_from_slice(b"14");
        bind.extend_from_slice(&0i16.to_be_bytes()); // result formats
        ext.extend(message(b'B', &bind));
        ext.extend(message(b'E', b"\0\0\0\0\0"));
        ext.extend(message(b'S', b""));
        raw.send(&ext).unwrap();
        let res = raw.read_query_result(Duration::from_secs(10));
        assert!(res.error.is_none(), "{res:?}");
        assert_eq!(res.rows, vec![vec![Some("42".to_string())]]);
        raw.terminate();
    }
    assert_serves(&mut pooler);
}

#[test]
fn clients_that_never_finish_logging_in_are_closed_after_client_login_timeout() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default().client_login_timeout("1s"));
    for t in Transport::ALL {
        let sasl_start = startup_packet(
            PROTOCOL_3_0,
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
        );
        let stalls: [(&str, Vec<u8>); 3] = [
            ("sends nothing", vec![]),
            ("half a length word", vec![0, 0]),
            ("startup, then never answers SASL", sasl_start),
        ];
        for (what, bytes) in stalls {
            let started = Instant::now();
            let mut raw = RawConn::connect(&pooler.endpoint(t));
            raw.send(&bytes).unwrap();
            let replies = raw.read_until_close(Duration::from_secs(6));
            let elapsed = started.elapsed();
            assert_eq!(
                replies.last(),
                Some(&Reply::Closed),
                "client that {what} over {t:?} not closed: {replies:?}"
            );
            assert!(
                elapsed >= Duration::from_millis(800) && elapsed < Duration::from_secs(4),
                "client that {what} over {t:?} closed after {elapsed:?}"
            );
            // Anything said before closing must be a well-formed message.
            for r in &replies[..replies.len() - 1] {
                assert!(
                    matches!(r, Reply::Msg(_, _)),
                    "client that {what} over {t:?}: {replies:?}"
                );
            }
        }
        // A client that does log in within the timeout is not affected by it.
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        raw.login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
    }
    assert_serves(&mut pooler);
}
