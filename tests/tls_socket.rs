//! TLS over the Unix socket, which libpq never asks for: with
//! `socketsslmode` allow/prefer/require a client that does ask (a raw client,
//! or tokio-postgres handed the socket and a host name to verify) gets `S`,
//! a real handshake against the configured certificate, and a working
//! session.

mod common;

use std::time::Duration;

use common::tls::{connect_tls_unix, tls_toml, Certs};
use common::wire::{request_packet, TlsVerify, SSL_REQUEST_CODE};
use common::{PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, SCRAM_USER, TEST_DB};

/// SSLRequest on the socket, `S`, a handshake that verifies the pooler's
/// certificate (CA and host name), SCRAM login and a query, all inside TLS.
fn raw_tls_session_over_socket(pooler: &Pooler, certs: &Certs) {
    let mut raw = RawConn::connect(&pooler.endpoint(Transport::Unix));
    raw.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
    assert_eq!(raw.read_byte(Duration::from_secs(5)), Reply::Byte(b'S'));
    raw.start_tls(&TlsVerify::Full {
        ca: certs.ca.clone(),
        host: "localhost".into(),
    })
    .unwrap_or_else(|e| panic!("handshake on the socket: {e}\n{}", pooler.log_text()));
    let version = raw.tls_version().expect("TLS in use");
    assert!(
        version == "TLSv1.3" || version == "TLSv1.2",
        "negotiated {version}"
    );
    raw.login(
        &[("user", SCRAM_USER.0), ("database", TEST_DB)],
        Some(SCRAM_USER.1),
    )
    .unwrap_or_else(|e| panic!("login inside TLS on the socket: {e:?}"));
    let res = raw.query("SELECT current_user, 6 * 7");
    assert_eq!(
        res.rows,
        vec![vec![Some(SCRAM_USER.0.to_string()), Some("42".to_string())]],
        "{res:?}"
    );
    raw.terminate();
}

#[test]
fn raw_client_gets_tls_on_the_socket_under_each_tls_policy() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("socket-raw");
    for policy in ["allow", "prefer", "require"] {
        let pooler = Pooler::start(
            pg,
            PoolerOpts::default().tls(&tls_toml(
                Some(&certs),
                &[("sslmode", "disable"), ("socketsslmode", policy)],
            )),
        );
        raw_tls_session_over_socket(&pooler, &certs);
        // TCP follows its own policy (disable): the same request gets `N`.
        let mut tcp = RawConn::connect(&pooler.endpoint(Transport::Tcp));
        tcp.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
        assert_eq!(
            tcp.read_byte(Duration::from_secs(5)),
            Reply::Byte(b'N'),
            "TCP under sslmode=disable (socketsslmode={policy})"
        );
    }
}

#[test]
fn tokio_postgres_gets_tls_on_the_socket_when_given_a_host_name() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("socket-tokio");
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default().tls(&tls_toml(
            Some(&certs),
            &[("sslmode", "disable"), ("socketsslmode", "require")],
        )),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // sslmode=require: tokio-postgres fails on `N`, so a session proves TLS;
        // the connector checks the pooler's certificate against the CA and
        // the name "localhost".
        let conninfo = format!(
            "user={} password={} dbname={TEST_DB} sslmode=require",
            SCRAM_USER.0, SCRAM_USER.1
        );
        let client = connect_tls_unix(&pooler.socket_path(), &conninfo, &certs.ca, "localhost")
            .await
            .unwrap_or_else(|e| panic!("tokio-postgres TLS on the socket: {e:?}"));
        let row = client
            .query_one("SELECT current_user::text, 6 * 7", &[])
            .await
            .expect("query inside TLS");
        assert_eq!(row.get::<_, String>(0), SCRAM_USER.0);
        assert_eq!(row.get::<_, i32>(1), 42);

        // A name the certificate does not carry fails the check: the
        // handshake really used the configured certificate.
        let err = connect_tls_unix(
            &pooler.socket_path(),
            &conninfo,
            &certs.ca,
            "not-the-pooler.example",
        )
        .await
        .expect_err("wrong host name accepted");
        // OpenSSL: "certificate verify failed"; AWS-LC, the default TLS
        // library (the test client's too): "CERTIFICATE_VERIFY_FAILED".
        let reason = format!("{err:?}").to_lowercase().replace('_', " ");
        assert!(reason.contains("certificate verify failed"), "{err:?}");

        // Why socketsslmode defaults to disable: tokio-postgres's own
        // connect has no host name for a socket and gives up after `S`.
        let tls =
            postgres_openssl::MakeTlsConnector::new(common::tls::verifying_connector(&certs.ca));
        let err = tokio_postgres::connect(
            &format!(
                "host={} port={} {conninfo}",
                pooler.socket_dir().display(),
                pooler.port()
            ),
            tls,
        )
        .await
        .map(|(client, _connection)| client)
        .expect_err("tokio-postgres connected with TLS on a socket without a host name");
        assert!(
            format!("{err:?}").contains("no hostname provided for TLS handshake"),
            "{err:?}"
        );
    });
}
