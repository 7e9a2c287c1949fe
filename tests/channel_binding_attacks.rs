//! Attacks on channel binding toward clients, each met as PostgreSQL 15
//! meets it: a TLS-terminating man in the middle with its own certificate
//! between psql and the server, and hostile SASL messages from a raw client
//! (the downgrade `y`, `p=` with the plain mechanism, an unsupported type,
//! a `c=` without our certificate's hash), sent to both.

mod common;

use std::time::Duration;

use common::tls::{psql_conninfo, tls_toml, Certs};
use common::wire::{cstrings, message, request_packet, ErrorFields, TlsVerify, SSL_REQUEST_CODE};
use common::{Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Reply, SCRAM_USER, TEST_DB};

const WAIT: Duration = Duration::from_secs(10);
/// AuthenticationSASL's request code.
const AUTH_SASL: i32 = 10;
/// AuthenticationSASLContinue's request code.
const AUTH_SASL_CONTINUE: i32 = 11;

fn tls_opts(certs: &Certs) -> PoolerOpts {
    PoolerOpts::default().tls(&tls_toml(Some(certs), &[("sslmode", "prefer")]))
}

/// `host=127.0.0.1 port=.. user=.. dbname=harbor_test` plus `tail`.
fn conninfo(port: u16, user: &str, tail: &str) -> String {
    format!("host=127.0.0.1 port={port} user={user} dbname={TEST_DB} {tail}")
}

/// A man in the middle on 127.0.0.1: it answers SSLRequest `S`, ends the
/// client's TLS with its own certificate (`certs`), opens TLS to the
/// server at `upstream` and relays bytes both ways. Returns its port.
async fn tls_interceptor(certs: &Certs, upstream: u16) -> u16 {
    use openssl::ssl::{Ssl, SslAcceptor, SslConnector, SslFiletype, SslMethod, SslVerifyMode};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut acceptor = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("acceptor");
    acceptor
        .set_certificate_chain_file(&certs.cert)
        .expect("cert");
    acceptor
        .set_private_key_file(&certs.key, SslFiletype::PEM)
        .expect("key");
    let acceptor = acceptor.build();
    let mut connector = SslConnector::builder(SslMethod::tls()).expect("connector");
    connector.set_verify(SslVerifyMode::NONE);
    let connector = connector.build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let (acceptor, connector) = (acceptor.clone(), connector.clone());
            tokio::spawn(async move {
                let mut request = [0u8; 8];
                client.read_exact(&mut request).await?;
                client.write_all(b"S").await?;
                let ssl = Ssl::new(acceptor.context()).map_err(std::io::Error::other)?;
                let mut front =
                    tokio_openssl::SslStream::new(ssl, client).map_err(std::io::Error::other)?;
                std::pin::Pin::new(&mut front)
                    .accept()
                    .await
                    .map_err(std::io::Error::other)?;
                let mut server = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await?;
                server.write_all(&request).await?;
                let mut answer = [0u8; 1];
                server.read_exact(&mut answer).await?;
                let ssl = connector
                    .configure()
                    .and_then(|c| c.verify_hostname(false).into_ssl("localhost"))
                    .map_err(std::io::Error::other)?;
                let mut back =
                    tokio_openssl::SslStream::new(ssl, server).map_err(std::io::Error::other)?;
                std::pin::Pin::new(&mut back)
                    .connect()
                    .await
                    .map_err(std::io::Error::other)?;
                tokio::io::copy_bidirectional(&mut front, &mut back).await?;
                Ok::<_, std::io::Error>(())
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn a_man_in_the_middle_with_another_certificate_is_caught() {
    // Without binding the relayed login works (the man in the middle sees
    // everything); with channel_binding=require the client binds to the
    // interceptor's certificate, and the server refuses, as PostgreSQL does.
    let pg = PgCluster::shared();
    let certs = Certs::generate("cbind-mitm-pooler");
    let mitm = Certs::generate("cbind-mitm");
    let pooler = Pooler::start(pg, tls_opts(&certs));
    for upstream in [pg.port(), pooler.port()] {
        let port = tls_interceptor(&mitm, upstream).await;
        let run = |tail: &'static str| {
            let info = conninfo(port, SCRAM_USER.0, tail);
            tokio::task::spawn_blocking(move || psql_conninfo(&info, Some(SCRAM_USER.1)))
        };
        let open = run("sslmode=require channel_binding=disable")
            .await
            .expect("psql");
        assert!(open.uses_tls(), "{upstream}: {}", open.stderr);
        let caught = run("sslmode=require channel_binding=require")
            .await
            .expect("psql");
        assert!(
            !caught.ok && caught.stderr.contains("SCRAM channel binding check failed"),
            "{upstream}: {}{}",
            caught.stdout,
            caught.stderr
        );
    }
}

/// A raw client at `port` that asked for TLS when `tls`, sent the startup
/// packet for [`SCRAM_USER`] and read AuthenticationSASL; returns it and
/// the mechanisms offered.
fn sasl_start(port: u16, tls: bool) -> (RawConn, Vec<String>) {
    let mut c = RawConn::connect(&Endpoint::Tcp(port));
    if tls {
        c.send(&request_packet(SSL_REQUEST_CODE))
            .expect("send SSLRequest");
        assert_eq!(c.read_request_answer(WAIT), Reply::Byte(b'S'));
        c.start_tls(&TlsVerify::None).expect("TLS handshake");
    }
    c.send_startup(&[("user", SCRAM_USER.0), ("database", TEST_DB)])
        .expect("send startup");
    match c.read_msg(WAIT) {
        Reply::Msg(b'R', body) if body[..4] == AUTH_SASL.to_be_bytes() => {
            let offered = cstrings(&body[4..]);
            (c, offered)
        }
        other => panic!("expected AuthenticationSASL, got {}", other.summary()),
    }
}

/// SASLInitialResponse (or SASLResponse when `mechanism` is None).
fn sasl_message(mechanism: Option<&str>, data: &str) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(m) = mechanism {
        body.extend_from_slice(m.as_bytes());
        body.push(0);
        body.extend_from_slice(&(data.len() as i32).to_be_bytes());
    }
    body.extend_from_slice(data.as_bytes());
    message(b'p', &body)
}

/// What the server answered a hostile SASL sequence with: severity,
/// SQLSTATE and the message with its DETAIL, or the summary of a non-error.
fn outcome(port: u16, tls: bool, mechanism: &str, first: &str, bad_c: Option<&str>) -> String {
    let (mut c, _) = sasl_start(port, tls);
    c.send(&sasl_message(Some(mechanism), first)).expect("send");
    let mut reply = c.read_msg(WAIT);
    if let Some(cbind) = bad_c {
        let Reply::Msg(b'R', body) = &reply else {
            panic!("expected SASLContinue, got {}", reply.summary());
        };
        assert_eq!(body[..4], AUTH_SASL_CONTINUE.to_be_bytes());
        let server_first = String::from_utf8_lossy(&body[4..]).into_owned();
        let nonce = server_first.split(',').next().unwrap_or("");
        let proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let last = format!("c={cbind},{nonce},{proof}");
        c.send(&sasl_message(None, &last)).expect("send");
        reply = c.read_msg(WAIT);
    }
    match reply.error() {
        Some(ErrorFields {
            severity,
            code,
            message,
            fields,
        }) => {
            // pgharbor folds a "malformed SCRAM message" DETAIL into the
            // message; the SQLSTATE and the first words must agree.
            let head = message.split(" (").next().unwrap_or("").to_string();
            let detail = fields.get(&'D').cloned().unwrap_or_default();
            let detail = if head == "malformed SCRAM message" {
                String::new()
            } else {
                detail
            };
            format!("{severity} {code} {head} | {detail}")
        }
        None => reply.summary(),
    }
}

#[test]
fn hostile_sasl_messages_get_postgresqls_errors() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("cbind-raw");
    let pooler = Pooler::start(pg, tls_opts(&certs));
    for tls in [true, false] {
        let want: &[&str] = if tls {
            &["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]
        } else {
            &["SCRAM-SHA-256"]
        };
        for port in [pg.port(), pooler.port()] {
            assert_eq!(sasl_start(port, tls).1, want, "port {port}, TLS {tls}");
        }
    }
    let plus = "SCRAM-SHA-256-PLUS";
    let plain = "SCRAM-SHA-256";
    let bound = "p=tls-server-end-point,,n=,r=abcdef";
    let cases: &[(bool, &str, &str, Option<&str>)] = &[
        // The downgrade: `y` where -PLUS was offered.
        (true, plain, "y,,n=,r=abcdef", None),
        (true, plain, bound, None),
        (true, plus, "n,,n=,r=abcdef", None),
        (true, plus, "y,,n=,r=abcdef", None),
        (true, plus, "p=tls-unique,,n=,r=abcdef", None),
        // c= without our certificate's hash.
        (true, plus, bound, Some("biws")),
        (true, plus, bound, Some("cD10bHMtc2VydmVyLWVuZC1wb2ludCws")),
        (true, "SCRAM-SHA-1", "n,,n=,r=abcdef", None),
        // -PLUS was never offered in plain text.
        (false, plus, bound, None),
        (false, plain, bound, None),
        (false, plain, "y,,n=,r=abcdef", Some("eSws")),
    ];
    for (tls, mechanism, first, c) in cases {
        let direct = outcome(pg.port(), *tls, mechanism, first, *c);
        let through = outcome(pooler.port(), *tls, mechanism, first, *c);
        assert!(
            direct.starts_with("FATAL"),
            "{mechanism} {first} {c:?}: {direct}"
        );
        assert_eq!(through, direct, "TLS {tls}, {mechanism}, {first}, c={c:?}");
    }
}
