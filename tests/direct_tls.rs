//! Direct TLS (PostgreSQL 17's `sslnegotiation=direct`), both sides.
//!
//! Front end: Debian 12's libpq is 15 and cannot start TLS directly, so the
//! client is Python's `ssl` module (a raw TLS client that can offer ALPN),
//! driven by a small inline script: a ClientHello first, then the protocol
//! inside TLS. Checked as PostgreSQL 17 behaves (backend_startup.c,
//! be-secure-openssl.c): ALPN "postgresql" is required and then a login and a
//! query are served; without ALPN the handshake completes and the
//! connection is closed with nothing sent; another ALPN protocol gets the
//! fatal no_application_protocol alert; where the transport's policy is
//! `disable` the connection is closed unanswered; bytes that start like TLS
//! but are not end in a clean close; SSLRequest keeps working for libpq 15.
//!
//! Back end: the stock PostgreSQL here (15) cannot accept direct TLS, so a
//! second pgharbor plays the server: client → pgharbor A → (direct TLS) →
//! pgharbor B → PostgreSQL. A relay between A and B records A's first byte,
//! which shows that no SSLRequest went first.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::tls::{psql_conninfo, tls_toml, Certs};
use common::util::free_port;
use common::{
    Backend, DbEntry, PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, TEST_DB, TRUST_USER,
};

const WAIT: Duration = Duration::from_secs(10);

/// A raw TLS client: connects to argv[1] (a TCP port on 127.0.0.1 or a
/// socket path), starts TLS at once offering the ALPN protocols in argv[2]
/// ("-": none), checks the certificate against argv[3] for "localhost",
/// then does argv[4] ("login": StartupMessage for user argv[5] and database
/// argv[6], then a query; "sslrequest": an SSLRequest inside TLS), and
/// prints what it saw as JSON.
const CLIENT: &str = r#"
import json, socket, ssl, struct, sys
target, alpn, ca, action, user, db = sys.argv[1:7]
out = {"messages": [], "errors": []}
def emit():
    print(json.dumps(out))
    sys.exit(0)
if target.startswith("/"):
    raw = socket.socket(socket.AF_UNIX)
    raw.settimeout(10)
    raw.connect(target)
else:
    raw = socket.create_connection(("127.0.0.1", int(target)), timeout=10)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.load_verify_locations(ca)
if alpn != "-":
    ctx.set_alpn_protocols(alpn.split(","))
try:
    s = ctx.wrap_socket(raw, server_hostname="localhost")
except (ssl.SSLError, OSError) as e:
    out["handshake"] = "failed"
    out["reason"] = (getattr(e, "reason", None) or "") + " " + type(e).__name__ + ": " + str(e)
    emit()
out["handshake"] = "ok"
out["alpn"] = s.selected_alpn_protocol()
buf = b""
def recv_msg():
    global buf
    while True:
        if len(buf) >= 5:
            n = struct.unpack("!I", buf[1:5])[0]
            if len(buf) >= 1 + n:
                tag, body = chr(buf[0]), buf[5:1 + n]
                buf = buf[1 + n:]
                return tag, body
        try:
            chunk = s.recv(65536)
        except (ssl.SSLError, OSError) as e:
            return None, type(e).__name__
        if not chunk:
            return None, "eof"
        buf += chunk
def send(b):
    try:
        s.sendall(b)
    except (ssl.SSLError, OSError):
        pass
def read_until(last):
    while True:
        tag, body = recv_msg()
        if tag is None:
            out["closed"] = body
            out["leftover"] = len(buf)
            return False
        out["messages"].append(tag)
        if tag == "E":
            fields = {}
            for f in body.split(b"\0"):
                if f:
                    fields[chr(f[0])] = f[1:].decode()
            out["errors"].append(fields)
        if tag == "D":
            n = struct.unpack("!I", body[2:6])[0]
            out["value"] = body[6:6 + n].decode()
        if tag == last:
            return True
if action == "sslrequest":
    send(struct.pack("!II", 8, 80877103))
    read_until(None)
    emit()
params = b"user\0" + user.encode() + b"\0database\0" + db.encode() + b"\0\0"
send(struct.pack("!II", 8 + len(params), 196608) + params)
if read_until("Z"):
    q = b"SELECT 'served'\0"
    send(b"Q" + struct.pack("!I", 4 + len(q)) + q)
    read_until("Z")
    send(b"X\0\0\0\x04")
emit()
"#;

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
        .arg("-c")
        .arg(CLIENT)
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
    let pooler = tls_pooler(pg, &certs, &[]);
    let seen = direct(&tcp_target(&pooler), Some("postgresql"), &certs, "login");
    assert!(seen.handshake_ok(), "{seen:?}");
    assert_eq!(seen.str("alpn"), "postgresql", "{seen:?}");
    assert!(seen.errors().is_empty(), "{seen:?}");
    assert_eq!(seen.str("value"), "served", "{seen:?}");
    // A list with other protocols first still settles on postgresql.
    let seen = direct(&tcp_target(&pooler), Some("h2,postgresql"), &certs, "login");
    assert_eq!(seen.str("alpn"), "postgresql", "{seen:?}");
    assert_eq!(seen.str("value"), "served", "{seen:?}");
    // The socket too, where socketsslmode allows TLS.
    let sock = tls_pooler(pg, &certs, &[("socketsslmode", "require")]);
    let seen = direct(&unix_target(&sock), Some("postgresql"), &certs, "login");
    assert_eq!(seen.str("value"), "served", "over the socket: {seen:?}");
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
    let b = tls_pooler(pg, &certs, &[]);
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
