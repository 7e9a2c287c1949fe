//! The front-end TLS policy with libpq as the client: every libpq sslmode
//! against every pgharbor policy over the Unix socket, TCP loopback and (when
//! the machine has one) TCP to a non-loopback address of this machine, and
//! `loopbacksslmode`. Each cell is a real psql run; the evidence is libpq's
//! own `\conninfo` ("SSL connection (protocol: ...)" when TLS is in use) or
//! the exact refusal, never just "it connected".
//!
//! libpq's rules encoded here (libpq 15, checked by
//! `libpq_never_uses_tls_on_a_unix_socket` against PostgreSQL itself):
//! - On a Unix socket libpq never sends SSLRequest, whatever its sslmode:
//!   require, verify-ca and verify-full connect in plain, and `allow` does
//!   not retry with TLS after a refusal.
//! - Over TCP: `disable` sends a plain StartupMessage; `allow` does too, and
//!   after an error retries with SSLRequest; `prefer` asks and goes on in
//!   plain after `N`; `require`/`verify-*` ask and fail on `N` with "server
//!   does not support SSL, but SSL was required".

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::tls::{psql_conninfo, tls_toml, Certs, PsqlRun};
use common::util::non_loopback_ipv4;
use common::wire::{request_packet, Failure, SSL_REQUEST_CODE};
use common::{PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, SCRAM_USER, TEST_DB};

const LIBPQ_MODES: [&str; 6] = [
    "disable",
    "allow",
    "prefer",
    "require",
    "verify-ca",
    "verify-full",
];
const POLICIES: [&str; 4] = ["disable", "allow", "prefer", "require"];

/// pgharbor's refusal of a plain StartupMessage under `require`, per transport.
const TCP_REFUSAL: &str = "FATAL:  SSL required\n";
const SOCKET_REFUSAL: &str = "FATAL:  SSL required on the Unix socket (socketsslmode); \
                              note that libpq never uses SSL on Unix sockets";
/// libpq's own refusal when the server answers `N` and libpq requires TLS.
const LIBPQ_REFUSAL: &str = "server does not support SSL, but SSL was required";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Logged in without TLS.
    Plain,
    /// Logged in with TLS.
    Tls,
    /// Refused; stderr holds this text.
    Refused(&'static str),
}

/// How the client reaches the pooler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Unix,
    /// TCP to and from 127.0.0.1.
    Loopback,
    /// TCP to and from a non-loopback address of this machine: the peer
    /// address the pooler sees is not loopback.
    Remote(Ipv4Addr),
}

/// The transports of the matrix: the socket, loopback TCP, and a
/// non-loopback address when the machine has one (with loopbacksslmode
/// unset both TCP columns follow `sslmode`).
fn transports() -> Vec<Via> {
    let mut v = vec![Via::Unix, Via::Loopback];
    match non_loopback_ipv4() {
        Some(ip) => v.push(Via::Remote(ip)),
        None => {
            eprintln!("note: no non-loopback IPv4 address here; TCP is tested over loopback only")
        }
    }
    v
}

/// The DESIGN table (what the pooler demands) combined with libpq's rules
/// (what the client sends and accepts).
fn expected(via: Via, libpq: &str, policy: &str) -> Outcome {
    let required = policy == "require";
    match via {
        // libpq sends a plain StartupMessage whatever its sslmode.
        Via::Unix if required => Outcome::Refused(SOCKET_REFUSAL),
        Via::Unix => Outcome::Plain,
        Via::Loopback | Via::Remote(_) => match libpq {
            "disable" if required => Outcome::Refused(TCP_REFUSAL),
            "disable" => Outcome::Plain,
            // The plain attempt is refused, libpq retries with SSLRequest.
            "allow" if required => Outcome::Tls,
            "allow" => Outcome::Plain,
            // `N` under disable; `S` and a handshake otherwise.
            "prefer" if policy == "disable" => Outcome::Plain,
            "prefer" => Outcome::Tls,
            _ if policy == "disable" => Outcome::Refused(LIBPQ_REFUSAL),
            _ => Outcome::Tls,
        },
    }
}

/// The libpq conninfo of one cell. verify-* get the CA that signed the
/// pooler's certificate; TCP names the host `localhost` (which the
/// certificate names) and connects to the address of `via`.
fn cell_conninfo(pooler: &Pooler, certs: &Certs, via: Via, libpq: &str) -> String {
    let host = match via {
        Via::Unix => pooler.socket_dir().display().to_string(),
        Via::Loopback => "localhost hostaddr=127.0.0.1".to_string(),
        Via::Remote(ip) => format!("localhost hostaddr={ip}"),
    };
    let mut s = format!(
        "host={host} port={} user={} dbname={TEST_DB} sslmode={libpq} connect_timeout=10",
        pooler.port(),
        SCRAM_USER.0
    );
    if libpq.starts_with("verify") {
        s.push_str(&format!(" sslrootcert={}", certs.ca.display()));
    }
    s
}

fn observed(run: &PsqlRun) -> String {
    match (run.ok, &run.ssl_line) {
        (true, Some(line)) => format!("TLS ({line})"),
        (true, None) => "plain".to_string(),
        (false, _) => format!("refused: {}", run.stderr.trim()),
    }
}

fn matches(run: &PsqlRun, want: Outcome) -> bool {
    match want {
        Outcome::Plain => run.ok && run.ssl_line.is_none(),
        Outcome::Tls => run.uses_tls(),
        Outcome::Refused(text) => {
            !run.ok
                && run.stderr.contains(text)
                // The TCP refusal must not be the socket's, nor the reverse.
                && (text != TCP_REFUSAL || !run.stderr.contains("Unix socket"))
        }
    }
}

#[test]
fn libpq_sslmode_by_pooler_policy_by_transport() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("matrix");
    let vias = transports();
    // One pooler per policy, the same policy for TCP and the socket (and no
    // loopbacksslmode, so loopback TCP gets `sslmode`); the cells of a
    // pooler run on its own thread.
    let results: Vec<(Vec<String>, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = POLICIES
            .iter()
            .map(|&policy| {
                let (certs, vias) = (&certs, &vias);
                scope.spawn(move || {
                    let mut opts = PoolerOpts::default().tls(&tls_toml(
                        Some(certs),
                        &[("sslmode", policy), ("socketsslmode", policy)],
                    ));
                    opts.extra_addresses = remote_addresses(vias);
                    let pooler = Pooler::start(pg, opts);
                    let mut failures = Vec::new();
                    for &t in vias {
                        for libpq in LIBPQ_MODES {
                            let want = expected(t, libpq, policy);
                            let conninfo = cell_conninfo(&pooler, certs, t, libpq);
                            let run = psql_conninfo(&conninfo, Some(SCRAM_USER.1));
                            if !matches(&run, want) {
                                failures.push(format!(
                                    "{t:?} libpq sslmode={libpq} / pgharbor policy {policy}: \
                                     expected {want:?}, got {}\n  conninfo: {conninfo}\n  \
                                     stdout: {:?}",
                                    observed(&run),
                                    run.stdout
                                ));
                            }
                        }
                    }
                    let log = if failures.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "---- pgharbor log (policy {policy}) ----\n{}",
                            pooler.log_text()
                        )
                    };
                    (failures, log)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("matrix thread panicked"))
            .collect()
    });
    let failures: Vec<&String> = results.iter().flat_map(|(f, _)| f).collect();
    let logs: Vec<&str> = results
        .iter()
        .map(|(_, l)| l.as_str())
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} matrix cells wrong:\n{}\n{}",
        failures.len(),
        POLICIES.len() * LIBPQ_MODES.len() * vias.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        logs.join("\n")
    );
}

/// The refusal under `require` is a FATAL 28000 sent before any
/// authentication request, so no password ever crosses the plain link; the
/// socket's message says why libpq cannot comply.
#[test]
fn plain_startup_under_require_is_refused_before_any_password_request() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("refusal");
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default().tls(&tls_toml(
            Some(&certs),
            &[("sslmode", "require"), ("socketsslmode", "require")],
        )),
    );
    for (t, message) in [
        (Transport::Tcp, "SSL required"),
        (
            Transport::Unix,
            "SSL required on the Unix socket (socketsslmode); note that libpq never uses SSL on Unix sockets",
        ),
    ] {
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        let err = raw
            .login(
                &[("user", SCRAM_USER.0), ("database", TEST_DB)],
                Some(SCRAM_USER.1),
            )
            .expect_err("plain login under require succeeded");
        let Failure::Error(e) = &err else {
            panic!("{t:?}: expected an ErrorResponse, got {err:?}");
        };
        assert_eq!(
            (e.severity.as_str(), e.code.as_str(), e.message.as_str()),
            ("FATAL", "28000", message),
            "{t:?}"
        );
        assert!(
            raw.auth_codes.is_empty(),
            "{t:?}: the pooler asked for authentication {:?} on a link it refuses",
            raw.auth_codes
        );
        assert_eq!(
            raw.read_msg(Duration::from_secs(3)),
            Reply::Closed,
            "{t:?}: not closed after the refusal"
        );
    }
}

/// What the matrix assumes about libpq on a socket, checked against
/// PostgreSQL itself (which answers `N` there anyway): require and
/// verify-full (with a CA that signed nothing of PostgreSQL's) connect in
/// plain, so libpq never sent SSLRequest.
#[test]
fn libpq_never_uses_tls_on_a_unix_socket() {
    let pg = PgCluster::shared();
    let stranger = Certs::generate("stranger");
    for mode in ["require", "verify-ca", "verify-full"] {
        let conninfo = format!(
            "host={} port={} user=postgres dbname={TEST_DB} sslmode={mode} sslrootcert={}",
            pg.socket_dir().display(),
            pg.port(),
            stranger.ca.display()
        );
        let run = psql_conninfo(&conninfo, None);
        assert!(
            run.ok && run.ssl_line.is_none(),
            "libpq sslmode={mode} on PostgreSQL's socket: {}\n{}",
            observed(&run),
            run.stdout
        );
    }
    // And over TCP the same libpq does use TLS with PostgreSQL.
    let conninfo = format!(
        "host=localhost hostaddr=127.0.0.1 port={} user={} password={} dbname={TEST_DB} \
         sslmode=verify-full sslrootcert={}",
        pg.port(),
        SCRAM_USER.0,
        SCRAM_USER.1,
        pg.ca_cert().display()
    );
    let run = psql_conninfo(&conninfo, None);
    assert!(run.uses_tls(), "direct TCP: {}", observed(&run));
}

/// `loopbacksslmode` replaces `sslmode` for TCP clients from 127.0.0.0/8
/// and ::1; everyone else keeps `sslmode`. The non-loopback side needs an
/// address of this machine outside 127.0.0.0/8 (a client connecting to it
/// from the same machine has it as its peer address); without one only the
/// loopback side is checked here (the unit tests of `tls::policy` and
/// `TlsConfig::mode_for` cover the rest). IPv6 ::1 is not exercised: the
/// harness listens on IPv4.
#[test]
fn loopbacksslmode_overrides_sslmode_for_loopback_clients() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("loopback");
    let conninfo = |pooler: &Pooler, mode: &str| {
        format!(
            "host=127.0.0.1 port={} user={} dbname={TEST_DB} sslmode={mode} connect_timeout=10",
            pooler.port(),
            SCRAM_USER.0
        )
    };
    let pw = Some(SCRAM_USER.1);
    let remote = non_loopback_ipv4();
    if remote.is_none() {
        eprintln!("note: no non-loopback IPv4 address here; only loopback clients are checked");
    }
    let remote_conninfo = |pooler: &Pooler, ip: Ipv4Addr, mode: &str| {
        format!(
            "host={ip} port={} user={} dbname={TEST_DB} sslmode={mode} connect_timeout=10",
            pooler.port(),
            SCRAM_USER.0
        )
    };
    let start = |keys: &[(&str, &str)]| {
        let mut opts = PoolerOpts::default().tls(&tls_toml(Some(&certs), keys));
        opts.extra_addresses = remote.iter().map(|ip| ip.to_string()).collect();
        Pooler::start(pg, opts)
    };

    // sslmode=disable, loopbacksslmode=require: loopback clients must use TLS.
    let strict = start(&[("sslmode", "disable"), ("loopbacksslmode", "require")]);
    let run = psql_conninfo(&conninfo(&strict, "disable"), pw);
    assert!(
        !run.ok && run.stderr.contains(TCP_REFUSAL),
        "plain loopback client under loopbacksslmode=require: {}",
        observed(&run)
    );
    let run = psql_conninfo(&conninfo(&strict, "prefer"), pw);
    assert!(
        run.uses_tls(),
        "loopbacksslmode=require, libpq prefer: {}",
        observed(&run)
    );
    // The socket keeps its own policy (socketsslmode defaults to disable).
    let run = psql_conninfo(
        &format!(
            "host={} port={} user={} dbname={TEST_DB}",
            strict.socket_dir().display(),
            strict.port(),
            SCRAM_USER.0
        ),
        pw,
    );
    assert!(
        run.ok && run.ssl_line.is_none(),
        "socket: {}",
        observed(&run)
    );
    // 127.0.0.0/8, not just 127.0.0.1: a client from 127.0.0.5 is loopback too.
    let mut raw = RawConn::from_tcp(tcp_from("127.0.0.5", strict.port()));
    let err = raw
        .login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .expect_err("plain login from 127.0.0.5 under loopbacksslmode=require");
    assert_eq!(
        err.error().map(|e| (e.code.as_str(), e.message.as_str())),
        Some(("28000", "SSL required")),
        "{err:?}"
    );

    // A non-loopback client gets sslmode=disable: plain, even when it prefers TLS.
    if let Some(ip) = remote {
        let run = psql_conninfo(&remote_conninfo(&strict, ip, "prefer"), pw);
        assert!(
            run.ok && run.ssl_line.is_none(),
            "client from {ip} under sslmode=disable, loopbacksslmode=require: {}",
            observed(&run)
        );
    }

    // sslmode=require, loopbacksslmode=disable: loopback clients get `N`.
    let lax = start(&[("sslmode", "require"), ("loopbacksslmode", "disable")]);
    let run = psql_conninfo(&conninfo(&lax, "disable"), pw);
    assert!(
        run.ok && run.ssl_line.is_none(),
        "loopbacksslmode=disable, libpq disable: {}",
        observed(&run)
    );
    let run = psql_conninfo(&conninfo(&lax, "prefer"), pw);
    assert!(
        run.ok && run.ssl_line.is_none(),
        "loopbacksslmode=disable answers N, libpq prefer goes on in plain: {}",
        observed(&run)
    );
    let run = psql_conninfo(&conninfo(&lax, "require"), pw);
    assert!(
        !run.ok && run.stderr.contains(LIBPQ_REFUSAL),
        "loopbacksslmode=disable, libpq require: {}",
        observed(&run)
    );
    let mut raw = RawConn::from_tcp(tcp_from("127.0.0.5", lax.port()));
    raw.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
    assert_eq!(
        raw.read_byte(Duration::from_secs(3)),
        Reply::Byte(b'N'),
        "SSLRequest from 127.0.0.5 under loopbacksslmode=disable"
    );
    // A non-loopback client gets sslmode=require.
    if let Some(ip) = remote {
        let run = psql_conninfo(&remote_conninfo(&lax, ip, "disable"), pw);
        assert!(
            !run.ok && run.stderr.contains(TCP_REFUSAL),
            "plain client from {ip} under sslmode=require, loopbacksslmode=disable: {}",
            observed(&run)
        );
        let run = psql_conninfo(&remote_conninfo(&lax, ip, "prefer"), pw);
        assert!(
            run.uses_tls(),
            "client from {ip} under sslmode=require: {}",
            observed(&run)
        );
    }
}

/// The non-loopback addresses among `vias`, for the pooler to listen on.
fn remote_addresses(vias: &[Via]) -> Vec<String> {
    vias.iter()
        .filter_map(|v| match v {
            Via::Remote(ip) => Some(ip.to_string()),
            _ => None,
        })
        .collect()
}

/// A TCP connection to 127.0.0.1:`port` from the source address `src`.
fn tcp_from(src: &str, port: u16) -> std::net::TcpStream {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    let src: std::net::SocketAddr = format!("{src}:0").parse().unwrap();
    sock.bind(&src.into())
        .unwrap_or_else(|e| panic!("bind {src}: {e}"));
    let dst: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect(&dst.into())
        .unwrap_or_else(|e| panic!("connect {dst} from {src}: {e}"));
    sock.into()
}
