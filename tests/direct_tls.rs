//! Direct TLS from clients (PostgreSQL 17's `sslnegotiation=direct`), the
//! front end of issue 16 item 4; the back end is in `direct_tls_backend.rs`.
//!
//! Debian 12's libpq is 15 and cannot start TLS directly, so the client is
//! Python's `ssl` module (a raw TLS client that can offer ALPN), driven by
//! `tests/py/direct_tls_client.py`: a ClientHello first, then the protocol
//! inside TLS. Checked as PostgreSQL 17 behaves (backend_startup.c,
//! be-secure-openssl.c): with ALPN "postgresql" a login and a query are
//! served; without ALPN the handshake completes and the connection is
//! closed with nothing sent; another ALPN protocol gets the fatal
//! no_application_protocol alert; where the transport's policy is `disable`
//! the connection is closed unanswered; bytes that start like TLS but are
//! not end in a clean close; SSLRequest keeps working for libpq 15.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::tls::{psql_conninfo, tls_toml, Certs};
use common::{PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, TEST_DB, TRUST_USER};

const WAIT: Duration = Duration::from_secs(10);

/// The raw TLS client (Python's `ssl` module), see its docstring.
fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/direct_tls_client.py")
}

/// What the raw TLS client saw.
#[derive(Debug)]
struct Seen(serde_json::Value);

impl Seen {
    fn handshake_ok(&self) -> bool {
        self.0["handshake"] == "ok"
    }
    fn str(&self, key: &str) -> String {
        self.0[key].as_str().unwrap_or_default().to_string()
    }
    /// The SQLSTATEs and messages of the ErrorResponses, in order.
    fn errors(&self) -> Vec<(String, String)> {
        let list = self.0["errors"].as_array().cloned().unwrap_or_default();
        list.iter()
            .map(|e| {
                (
                    e["C"].as_str().unwrap_or_default().into(),
                    e["M"].as_str().unwrap_or_default().into(),
                )
            })
            .collect()
    }
    fn messages(&self) -> String {
        let list = self.0["messages"].as_array().cloned().unwrap_or_default();
        list.iter().filter_map(|m| m.as_str()).collect()
    }
    /// The server ended the connection (EOF or reset), rather than the
    /// client giving up.
    fn closed(&self) -> bool {
        !self.0["closed"].is_null()
    }
}

/// Runs the raw TLS client against `target` offering `alpn`.
fn direct(target: &str, alpn: Option<&str>, certs: &Certs, action: &str) -> Seen {
    let out = Command::new("python3")
        .arg(client_script())
        .args([target, alpn.unwrap_or("-")])
        .arg(&certs.ca)
        .args([action, TRUST_USER, TEST_DB])
        .output()
        .expect("run python3 (the raw TLS client)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "TLS client failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Seen(serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}")))
}

fn tcp_target(p: &Pooler) -> String {
    p.port().to_string()
}

fn unix_target(p: &Pooler) -> String {
    p.socket_path().display().to_string()
}

/// A trust pooler with TLS on TCP (`prefer`) and the socket left at its
/// default (`disable`), plus `more` `[tls]` keys.
fn tls_pooler(pg: &PgCluster, certs: &Certs, more: &[(&str, &str)]) -> Pooler {
    let mut keys = vec![("sslmode", "prefer")];
    keys.extend_from_slice(more);
    Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("trust")
            .tls(&tls_toml(Some(certs), &keys)),
    )
}

#[test]
fn direct_tls_with_alpn_postgresql_logs_in_and_is_served() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-ok");
    let opts = PoolerOpts::default()
        .auth("trust")
        .admin_users(&[TRUST_USER])
        .tls(&tls_toml(Some(&certs), &[("sslmode", "prefer")]));
    let pooler = Pooler::start(pg, opts);
    let seen = direct(&tcp_target(&pooler), Some("postgresql"), &certs, "login");
    assert!(seen.handshake_ok(), "{seen:?}");
    assert_eq!(seen.str("alpn"), "postgresql", "{seen:?}");
    assert!(seen.errors().is_empty(), "{seen:?}");
    assert_eq!(seen.str("value"), "served", "{seen:?}");
    // A list with other protocols first still settles on postgresql.
    let seen = direct(&tcp_target(&pooler), Some("h2,postgresql"), &certs, "login");
    assert_eq!(seen.str("alpn"), "postgresql", "{seen:?}");
    assert_eq!(seen.str("value"), "served", "{seen:?}");
    // Counted and timed as TLS logins, handshake included.
    let (established, handshake_us) = tls_logins(&pooler, "tcp-loopback");
    assert_eq!(established, 2);
    assert!(handshake_us > 0, "TLS handshake time {handshake_us} µs");
    // The socket too, where socketsslmode allows TLS.
    let sock = tls_pooler(pg, &certs, &[("socketsslmode", "require")]);
    let seen = direct(&unix_target(&sock), Some("postgresql"), &certs, "login");
    assert_eq!(seen.str("value"), "served", "over the socket: {seen:?}");
}

/// SHOW OVERHEAD's client row for TLS logins over `transport`:
/// (established, tls_handshake_avg_us).
fn tls_logins(pooler: &Pooler, transport: &str) -> (i64, i64) {
    let mut admin = RawConn::connect(&pooler.endpoint(Transport::Unix));
    admin
        .login(&[("user", TRUST_USER), ("database", "pgharbor")], None)
        .unwrap_or_else(|e| panic!("admin console: {e:?}"));
    let o = admin.query("SHOW OVERHEAD");
    let column = |name: &str| o.column(name);
    let (side, tr, tls) = (column("side"), column("transport"), column("tls"));
    let row = (0..o.rows.len())
        .find(|&i| {
            side[i].as_deref() == Some("client")
                && tr[i].as_deref() == Some(transport)
                && tls[i].as_deref() == Some("t")
        })
        .unwrap_or_else(|| panic!("no client {transport} TLS row: {o:?}"));
    let int = |name: &str| {
        column(name)[row]
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}: {o:?}"))
    };
    (int("established"), int("tls_handshake_avg_us"))
}

#[test]
fn direct_tls_without_alpn_is_closed_after_the_handshake_with_nothing_sent() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-no-alpn");
    let mut pooler = tls_pooler(pg, &certs, &[]);
    let seen = direct(&tcp_target(&pooler), None, &certs, "login");
    // As PostgreSQL 17: the handshake completes, then the refusal is logged
    // (COMMERROR) and the connection closed; the peer, which has not said
    // it speaks PostgreSQL's protocol, is sent none of it.
    assert!(seen.handshake_ok(), "{seen:?}");
    assert!(seen.0["alpn"].is_null(), "{seen:?}");
    assert!(seen.closed() && seen.messages().is_empty(), "{seen:?}");
    let why = "received direct SSL connection request without ALPN protocol negotiation extension";
    assert!(
        pooler.wait_for_log(why, 1, WAIT),
        "refusal not logged:\n{}",
        pooler.log_text()
    );
    pooler.assert_alive();
}

#[test]
fn direct_tls_offering_another_alpn_protocol_gets_the_fatal_alert() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-wrong-alpn");
    let mut pooler = tls_pooler(pg, &certs, &[]);
    for offer in ["h2", "http/1.1,imap"] {
        let seen = direct(&tcp_target(&pooler), Some(offer), &certs, "login");
        assert!(!seen.handshake_ok(), "{offer}: {seen:?}");
        assert!(
            seen.str("reason")
                .to_lowercase()
                .contains("alert no application protocol"),
            "{offer}: {seen:?}"
        );
    }
    pooler.assert_alive();
}

#[test]
fn direct_tls_where_the_policy_is_disable_is_closed_unanswered() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-disable");
    // The socket is at socketsslmode's default, disable; TCP (loopback) is
    // disabled explicitly.
    let mut pooler = tls_pooler(pg, &certs, &[("loopbacksslmode", "disable")]);
    for (what, target) in [
        ("socket", unix_target(&pooler)),
        ("tcp", tcp_target(&pooler)),
    ] {
        let seen = direct(&target, Some("postgresql"), &certs, "login");
        assert!(!seen.handshake_ok(), "{what}: {seen:?}");
        assert!(seen.errors().is_empty(), "{what}: {seen:?}");
    }
    // Each transport still serves a plain client.
    for t in Transport::ALL {
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        raw.login(&[("user", TRUST_USER), ("database", TEST_DB)], None)
            .unwrap_or_else(|e| panic!("plain login over {t:?}: {e:?}"));
        assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
    }
    pooler.assert_alive();
}

#[test]
fn direct_tls_then_sslrequest_inside_it_is_a_protocol_violation() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-sslrequest");
    let pooler = tls_pooler(pg, &certs, &[]);
    let seen = direct(
        &tcp_target(&pooler),
        Some("postgresql"),
        &certs,
        "sslrequest",
    );
    assert!(seen.handshake_ok(), "{seen:?}");
    let errors = seen.errors();
    assert_eq!(errors.len(), 1, "{seen:?}");
    assert_eq!(errors[0].0, "08P01", "{seen:?}");
    assert!(seen.closed(), "{seen:?}");
}

#[test]
fn bytes_that_start_like_tls_but_are_not_end_in_a_clean_close() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-garbage");
    // A handshake that never completes is bounded by the login timeout.
    let opts = PoolerOpts::default()
        .auth("trust")
        .client_login_timeout("2s")
        .tls(&tls_toml(Some(&certs), &[("sslmode", "prefer")]));
    let mut pooler = Pooler::start(pg, opts);
    let garbage: [&[u8]; 4] = [
        // A handshake record header whose body is not a ClientHello.
        b"\x16\x03\x01\x00\x10not a hello at all",
        // Not even a record version.
        b"\x16garbage garbage garbage garbage",
        // A handshake record announcing more than TLS allows.
        b"\x16\x03\x03\xff\xff\x01\x00\x00",
        // A record header whose promised 5 bytes never come.
        b"\x16\x03\x01\x00\x05",
    ];
    for bytes in garbage {
        let mut c = RawConn::connect(&pooler.endpoint(Transport::Tcp));
        c.send(bytes).expect("send");
        let end = c.read_until_close(WAIT);
        assert_eq!(end.last(), Some(&Reply::Closed), "{bytes:?}: {end:?}");
    }
    // The first byte alone, then the client's half-close.
    let mut c = RawConn::connect(&pooler.endpoint(Transport::Tcp));
    c.send(b"\x16").expect("send");
    c.shutdown_write();
    assert_eq!(c.read_until_close(WAIT).last(), Some(&Reply::Closed));
    pooler.assert_alive();
    let seen = direct(&tcp_target(&pooler), Some("postgresql"), &certs, "login");
    assert_eq!(seen.str("value"), "served", "after the garbage: {seen:?}");
}

#[test]
fn sslrequest_still_works_for_libpq_15() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("direct-classic");
    let pooler = tls_pooler(pg, &certs, &[]);
    let conninfo = format!(
        "host=127.0.0.1 port={} user={TRUST_USER} dbname={TEST_DB} sslmode=require",
        pooler.port()
    );
    let run = psql_conninfo(&conninfo, None);
    assert!(run.uses_tls(), "{run:?}");
    // And plain, where the policy allows it.
    let run = psql_conninfo(&conninfo.replace("require", "disable"), None);
    assert!(run.ok && !run.uses_tls(), "{run:?}");
}
