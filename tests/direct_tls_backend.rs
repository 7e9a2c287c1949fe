//! Direct TLS toward the server (`sslnegotiation=direct`, libpq 17), the
//! back end of issue 16 item 4; the front end is in `direct_tls.rs`.
//!
//! The stock PostgreSQL here (15) cannot accept direct TLS, and the
//! PostgreSQL 18 wheel has no TLS, so a second pgharbor plays the server:
//! client → pgharbor A → (direct TLS) → pgharbor B → PostgreSQL. A relay
//! between A and B records A's first byte, which shows that no SSLRequest
//! went first. A bare TLS server that selects no ALPN checks libpq 17's
//! refusal of such a server, and `pgharbor check` refuses direct under a
//! weak sslmode with libpq 17's message.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use common::tls::{psql_conninfo, tls_toml, Certs};
use common::util::free_port;
use common::{Backend, DbEntry, PgCluster, Pooler, PoolerOpts, TEST_DB, TRUST_USER};

/// A trust pooler with TLS on TCP (`prefer`): the server side.
fn tls_pooler(pg: &PgCluster, certs: &Certs) -> Pooler {
    let tls = tls_toml(Some(certs), &[("sslmode", "prefer")]);
    Pooler::start(pg, PoolerOpts::default().auth("trust").tls(&tls))
}

/// A TCP relay to `to` that records the first byte of each connection.
fn first_byte_relay(to: u16) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let port = free_port();
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind relay");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            let record = record.clone();
            std::thread::spawn(move || relay(client, server, record));
        }
    });
    (port, seen)
}

fn relay(mut client: TcpStream, server: TcpStream, record: Arc<Mutex<Vec<u8>>>) {
    let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut s2, &mut c2);
        let _ = c2.shutdown(std::net::Shutdown::Write);
    });
    let mut server = server;
    let mut first = [0u8; 1];
    if client.read_exact(&mut first).is_err() {
        return;
    }
    record.lock().expect("relay record").push(first[0]);
    if server.write_all(&first).is_ok() {
        let _ = std::io::copy(&mut client, &mut server);
    }
    let _ = server.shutdown(std::net::Shutdown::Write);
}

#[test]
fn backend_sslnegotiation_direct_reaches_a_second_pgharbor_without_sslrequest() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-backend");
    // B: the server side, TLS on TCP.
    let b = tls_pooler(pg, &certs);
    let (relay_port, first_bytes) = first_byte_relay(b.port());
    let entry = |name: &str, extra: &str| {
        DbEntry::new(name, Backend::Tcp)
            .conninfo_extra(&format!("port={relay_port} dbname={TEST_DB} {extra}"))
    };
    // B without TLS: direct TLS must fail rather than fall back to plain.
    let no_tls = Pooler::start(pg, PoolerOpts::default().auth("trust"));
    let a = Pooler::start(
        pg,
        PoolerOpts::default().auth("trust").databases(vec![
            entry("via_direct", "sslmode=require sslnegotiation=direct"),
            entry("via_request", "sslmode=require"),
            DbEntry::new("to_plain", Backend::Tcp).conninfo_extra(&format!(
                "port={} dbname={TEST_DB} sslmode=require sslnegotiation=direct",
                no_tls.port()
            )),
        ]),
    );
    let through_a = |db: &str| {
        let conninfo = format!(
            "host={} port={} user={TRUST_USER} dbname={db}",
            a.socket_dir().display(),
            a.port()
        );
        psql_conninfo(&conninfo, None)
    };
    let run = through_a("via_direct");
    assert!(
        run.ok,
        "{run:?}\nA:\n{}\nB:\n{}",
        a.log_text(),
        b.log_text()
    );
    assert_eq!(
        first_bytes.lock().expect("relay record").as_slice(),
        [0x16],
        "A's first byte toward B (0x16: a TLS record, no SSLRequest)"
    );
    // sslnegotiation=postgres (the default) still starts with SSLRequest,
    // whose first byte is its length's high byte, 0.
    let run = through_a("via_request");
    assert!(run.ok, "{run:?}");
    assert_eq!(first_bytes.lock().expect("relay record")[1..], [0x00]);
    let run = through_a("to_plain");
    assert!(!run.ok, "direct TLS toward a server without TLS: {run:?}");
    assert!(run.stderr.contains("TLS handshake"), "{run:?}");
}

#[test]
fn pgharbor_check_refuses_direct_with_a_weak_sslmode_as_libpq_17() {
    let pg = PgCluster::shared();
    let check = |backend: Backend, extra: &str| {
        let db = DbEntry::new("app", backend).conninfo_extra(extra);
        let text = Pooler::sample_config(pg, &PoolerOpts::default().databases(vec![db]));
        Pooler::run_check(&text)
    };
    for (backend, extra, key, mode) in [
        (
            Backend::Tcp,
            "sslmode=prefer sslnegotiation=direct",
            "sslmode",
            "prefer",
        ),
        (
            Backend::Tcp,
            "sslmode=allow sslnegotiation=direct",
            "sslmode",
            "allow",
        ),
        (
            Backend::Unix,
            "sslmode=require socketsslmode=prefer sslnegotiation=direct",
            "socketsslmode",
            "prefer",
        ),
    ] {
        let (code, text) = check(backend, extra);
        assert_ne!(code, 0, "{extra}: {text}");
        let want = format!(
            "weak {key} \"{mode}\" may not be used with sslnegotiation=direct (use \"require\", \"verify-ca\", or \"verify-full\")"
        );
        assert!(text.contains(&want), "{extra}: {text}");
        assert!(text.contains("databases.app"), "{extra}: {text}");
    }
    let (code, text) = check(Backend::Tcp, "sslmode=require sslnegotiation=direct");
    assert_eq!(code, 0, "{text}");
}

/// A TLS server (the certificate of `certs`) that selects no ALPN protocol
/// and then waits for the client to leave, as a pre-17 TLS endpoint would.
fn tls_server_without_alpn(certs: &Certs) -> u16 {
    use openssl::ssl::{SslAcceptor, SslFiletype, SslMethod};
    let port = free_port();
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind TLS server");
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("acceptor");
    b.set_certificate_chain_file(&certs.cert)
        .expect("certificate");
    b.set_private_key_file(&certs.key, SslFiletype::PEM)
        .expect("key");
    let acceptor = Arc::new(b.build());
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            let acceptor = acceptor.clone();
            std::thread::spawn(move || {
                if let Ok(mut tls) = acceptor.accept(socket) {
                    let _ = tls.read(&mut [0u8; 1024]);
                }
            });
        }
    });
    port
}

#[test]
fn backend_direct_tls_leaves_a_server_that_selects_no_alpn() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-backend-no-alpn");
    let server = tls_server_without_alpn(&certs);
    let a = Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("trust")
            .databases(vec![DbEntry::new("no_alpn", Backend::Tcp).conninfo_extra(
                &format!("port={server} dbname={TEST_DB} sslmode=require sslnegotiation=direct"),
            )]),
    );
    let conninfo = format!(
        "host={} port={} user={TRUST_USER} dbname=no_alpn",
        a.socket_dir().display(),
        a.port()
    );
    let run = psql_conninfo(&conninfo, None);
    assert!(!run.ok, "{run:?}");
    // libpq 17's words (fe-secure-openssl.c), before any startup packet.
    let why = "direct SSL connection was established without ALPN protocol negotiation extension";
    assert!(run.stderr.contains(why), "{run:?}\n{}", a.log_text());
}
