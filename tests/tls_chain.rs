//! The certificate chain pgharbor shows TLS clients. A certificate file
//! holding only the leaf is completed from `tls.ca_file`, as OpenSSL does
//! for PostgreSQL (which loads its files the same way); pgharbor builds
//! that chain once at load instead of on every handshake, so the chain a
//! client receives must be the one OpenSSL's per-handshake completion
//! sent.

mod common;

use common::pki::{Pki, SERVER_NAME};
use common::tls::{raw_tls_link, tls_toml};
use common::{PgCluster, Pooler, PoolerOpts};

/// The chain a TLS client is sent by a pooler with these `[tls]` keys.
fn chain_shown(tls: &[(&str, String)]) -> Vec<String> {
    let keys: Vec<(&str, &str)> = tls.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let toml = tls_toml(None, &keys);
    let pooler = Pooler::start(PgCluster::shared(), PoolerOpts::default().tls(&toml));
    let mut chains = Vec::new();
    // Twice: the second handshake is served from the same built context.
    for _ in 0..2 {
        chains.push(raw_tls_link(&pooler).tls_peer_chain());
    }
    assert_eq!(chains[0], chains[1], "the chain changed between handshakes");
    chains.swap_remove(0)
}

#[test]
fn a_leaf_only_certificate_file_is_completed_from_the_ca_file() {
    let pki = Pki::generate();
    let file = |name: &str| pki.dir.join(name).display().to_string();
    let leaf = [
        ("cert_file", file("server.crt")),
        ("key_file", file("server.key")),
        ("sslmode", "require".to_string()),
    ];
    // No trust store: the leaf alone.
    assert_eq!(chain_shown(&leaf), vec![SERVER_NAME.to_string()]);
    // The CA that signed it in ca_file: sent after the leaf.
    let mut with_ca = leaf.to_vec();
    with_ca.push(("ca_file", file("ca.crt")));
    assert_eq!(
        chain_shown(&with_ca),
        vec![SERVER_NAME.to_string(), "pgharbor-test-CA".to_string()]
    );
    // A chain in the certificate file is sent as it is, not completed.
    let bundle = pki.dir.join("bundle.crt");
    let pem = [
        std::fs::read(pki.dir.join("server.crt")).unwrap(),
        std::fs::read(pki.dir.join("ca.crt")).unwrap(),
    ]
    .concat();
    std::fs::write(&bundle, pem).unwrap();
    let bundled = [
        ("cert_file", bundle.display().to_string()),
        ("key_file", file("server.key")),
        ("sslmode", "require".to_string()),
    ];
    assert_eq!(
        chain_shown(&bundled),
        vec![SERVER_NAME.to_string(), "pgharbor-test-CA".to_string()]
    );
}
