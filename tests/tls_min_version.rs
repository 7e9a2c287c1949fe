//! `tls.min_protocol_version` reaches the OpenSSL acceptor. The client is
//! libpq (psql), capped with its own `ssl_max_protocol_version`: a client
//! that speaks at most TLS 1.2 is refused by a pooler whose minimum is
//! TLSv1.3 (during the handshake, as PostgreSQL's
//! `ssl_min_protocol_version` refuses it), an uncapped one gets TLS 1.3
//! there, and under the default minimum (TLSv1.2) the capped one is served.

mod common;

use common::tls::{psql_conninfo, tls_pooler, Certs, PsqlRun};
use common::{Pooler, SCRAM_USER, TEST_DB};

/// psql over TCP with TLS required, plus the `extra` conninfo keywords.
fn psql(pooler: &Pooler, extra: &str) -> PsqlRun {
    psql_conninfo(
        &format!(
            "host=127.0.0.1 port={} user={} dbname={TEST_DB} sslmode=require \
             connect_timeout=10 {extra}",
            pooler.port(),
            SCRAM_USER.0
        ),
        Some(SCRAM_USER.1),
    )
}

fn start(certs: &Certs, min: Option<&str>) -> Pooler {
    let mut keys = vec![("sslmode", "require")];
    keys.extend(min.map(|m| ("min_protocol_version", m)));
    tls_pooler(certs, &keys)
}

fn protocol(run: &PsqlRun) -> Option<&str> {
    let line = run.ssl_line.as_deref()?;
    let rest = line.strip_prefix("SSL connection (protocol: ")?;
    rest.split(',').next()
}

#[test]
fn a_tls12_client_is_refused_when_the_minimum_is_tls13() {
    let certs = Certs::generate("min-tls13");
    let pooler = start(&certs, Some("TLSv1.3"));

    let capped = psql(&pooler, "ssl_max_protocol_version=TLSv1.2");
    assert!(
        !capped.ok && capped.stderr.contains("protocol version"),
        "a TLS 1.2 client should be refused in the handshake: {}{}\n{}",
        capped.stdout,
        capped.stderr,
        pooler.log_text()
    );

    let open = psql(&pooler, "");
    assert!(open.ok, "{}{}", open.stdout, open.stderr);
    assert_eq!(protocol(&open), Some("TLSv1.3"), "{:?}", open.ssl_line);
}

#[test]
fn the_default_minimum_serves_a_tls12_client() {
    let certs = Certs::generate("min-default");
    let pooler = start(&certs, None);
    let capped = psql(&pooler, "ssl_max_protocol_version=TLSv1.2");
    assert!(capped.ok, "{}{}", capped.stdout, capped.stderr);
    assert_eq!(protocol(&capped), Some("TLSv1.2"), "{:?}", capped.ssl_line);
}
