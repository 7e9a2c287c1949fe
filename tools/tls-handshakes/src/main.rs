//! Server TLS handshakes per server-CPU-second: OpenSSL (the system's 3.0,
//! through the `openssl` crate, as pgharbor uses it) against rustls 0.23 with
//! its aws-lc-rs and ring providers (pgharbor issue 15).
//!
//! Every handshake is a full one between a fresh server connection and a
//! fresh OpenSSL client connection, over in-memory buffers, in this one
//! thread. Only the server's CPU is counted: `CLOCK_THREAD_CPUTIME_ID` read
//! around every stretch of server-side calls (creating the connection, each
//! flight it reads and answers, dropping it). The client is OpenSSL for
//! every row (libpq's library), so only the server differs.
//!
//! Usage: `cargo run --release [-- --reps 5 --ecdsa-n 2000 --rsa-n 500]`

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::CStr;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use openssl::ssl::{
    HandshakeError, Ssl, SslAcceptor, SslConnector, SslContext, SslMethod, SslMode, SslOptions,
    SslSessionCacheMode, SslStream, SslVerifyMode, SslVersion,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::NoServerSessionStorage;
use rustls::{ServerConfig, ServerConnection};

const ALPN: &[u8] = b"postgresql";
const ALPN_WIRE: &[u8] = b"\x0apostgresql";

// ------------------------------------------------------------- CPU clock --

/// This thread's CPU time in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Accumulates the server's CPU time.
#[derive(Default)]
struct ServerClock {
    ns: u64,
    windows: u64,
}

impl ServerClock {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t0 = thread_cpu_ns();
        let out = f();
        self.ns += thread_cpu_ns() - t0;
        self.windows += 1;
        out
    }
}

// ------------------------------------------------------------ certificates --

#[derive(Clone, Copy, PartialEq)]
enum CertKind {
    Ecdsa,
    Rsa,
}

impl CertKind {
    fn name(self) -> &'static str {
        match self {
            CertKind::Ecdsa => "ecdsa-p256",
            CertKind::Rsa => "rsa-2048",
        }
    }
    /// As pgbench/harbor_bench/system.py's CERT_KEYOPTS.
    fn keyopts(self) -> &'static [&'static str] {
        match self {
            CertKind::Ecdsa => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
            CertKind::Rsa => &["-newkey", "rsa:2048"],
        }
    }
}

struct CertFiles {
    crt: PathBuf,
    key: PathBuf,
}

/// A self-signed server certificate made by `openssl req` exactly as
/// pgbench/harbor_bench/system.py's make_cert makes the bench's.
fn make_cert(kind: CertKind, dir: &Path) -> CertFiles {
    let crt = dir.join(format!("{}.crt", kind.name()));
    let key = dir.join(format!("{}.key", kind.name()));
    let out = Command::new("openssl")
        .arg("req")
        .arg("-x509")
        .args(kind.keyopts())
        .args(["-sha256", "-nodes", "-days", "2", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("could not run `openssl req` (is the openssl CLI installed?)");
    assert!(
        out.status.success(),
        "openssl req failed for {}: {}",
        kind.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    CertFiles { crt, key }
}

// --------------------------------------------------------------- servers --

#[derive(Clone, Copy, PartialEq)]
enum Version {
    Tls13,
    Tls12,
}

impl Version {
    fn name(self) -> &'static str {
        match self {
            Version::Tls13 => "TLS 1.3",
            Version::Tls12 => "TLS 1.2",
        }
    }
    fn openssl(self) -> SslVersion {
        match self {
            Version::Tls13 => SslVersion::TLS1_3,
            Version::Tls12 => SslVersion::TLS1_2,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Library {
    OpenSsl,
    RustlsAwsLc,
    RustlsRing,
}

impl Library {
    fn name(self) -> &'static str {
        match self {
            Library::OpenSsl => "openssl",
            Library::RustlsAwsLc => "rustls-aws-lc-rs",
            Library::RustlsRing => "rustls-ring",
        }
    }
}

/// A server context built once per row and shared by its handshakes, as
/// pgharbor shares one acceptor.
enum Server {
    OpenSsl(SslContext),
    Rustls(Arc<ServerConfig>),
}

/// The acceptor pgharbor's src/tls/acceptor.rs builds: Mozilla intermediate
/// v5, ALPN "postgresql" selected, no tickets, no session cache, released
/// buffers; pinned to one protocol version here.
fn openssl_server(cert: &CertFiles, version: Version) -> SslContext {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())
        .expect("SslAcceptor::mozilla_intermediate_v5");
    b.set_alpn_select_callback(|_, offer| {
        openssl::ssl::select_next_proto(ALPN_WIRE, offer).ok_or(openssl::ssl::AlpnError::NOACK)
    });
    b.set_certificate_chain_file(&cert.crt)
        .expect("OpenSSL: server certificate");
    b.set_private_key_file(&cert.key, openssl::ssl::SslFiletype::PEM)
        .expect("OpenSSL: server key");
    b.check_private_key().expect("OpenSSL: key matches cert");
    b.set_min_proto_version(Some(version.openssl()))
        .expect("min version");
    b.set_max_proto_version(Some(version.openssl()))
        .expect("max version");
    b.set_options(SslOptions::NO_TICKET);
    b.set_num_tickets(0).expect("set_num_tickets");
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    b.set_mode(SslMode::RELEASE_BUFFERS);
    b.build().into_context()
}

/// rustls with the provider's defaults (cipher suites, key-exchange groups),
/// one protocol version, ALPN "postgresql", no session storage, no tickets.
fn rustls_server(cert: &CertFiles, version: Version, provider: CryptoProvider) -> ServerConfig {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert.crt)
        .expect("rustls: open server certificate")
        .collect::<Result<_, _>>()
        .expect("rustls: parse server certificate");
    let key = PrivateKeyDer::from_pem_file(&cert.key).expect("rustls: read server key");
    let versions: &[&rustls::SupportedProtocolVersion] = match version {
        Version::Tls13 => &[&rustls::version::TLS13],
        Version::Tls12 => &[&rustls::version::TLS12],
    };
    let mut c = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("rustls: protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("rustls: certificate and key");
    c.alpn_protocols = vec![ALPN.to_vec()];
    // Full handshakes only: nothing stored, no ticket sent. (The default
    // ticketer already never produces stateless tickets.)
    c.session_storage = Arc::new(NoServerSessionStorage {});
    c.send_tls13_tickets = 0;
    c
}

// -------------------------------------------------------------- transport --

/// One direction of the in-memory link.
type Pipe = Rc<RefCell<VecDeque<u8>>>;

/// A byte stream over two pipes; reads of an empty pipe say WouldBlock so
/// OpenSSL returns WANT_READ and we can let the other side run.
#[derive(Debug)]
struct Duplex {
    rx: Pipe,
    tx: Pipe,
}

impl Read for Duplex {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rx = self.rx.borrow_mut();
        if rx.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = rx.read(buf)?;
        Ok(n)
    }
}

impl Write for Duplex {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx.borrow_mut().extend(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// ---------------------------------------------------------------- client --

/// The OpenSSL client every row uses: the library's defaults (offered
/// groups, cipher suites), ALPN "postgresql", one protocol version, no
/// session cache, no verification (as libpq's sslmode=require).
fn openssl_client(version: Version) -> SslConnector {
    let mut b = SslConnector::builder(SslMethod::tls_client()).expect("SslConnector::builder");
    b.set_verify(SslVerifyMode::NONE);
    b.set_alpn_protos(ALPN_WIRE).expect("client ALPN");
    b.set_min_proto_version(Some(version.openssl()))
        .expect("client min version");
    b.set_max_proto_version(Some(version.openssl()))
        .expect("client max version");
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    b.build()
}

enum ClientState {
    Mid(openssl::ssl::MidHandshakeSslStream<Duplex>),
    Done(SslStream<Duplex>),
}

/// The OpenSSL client's side of one handshake.
struct Client(Option<ClientState>);

impl Client {
    fn start(connector: &SslConnector, link: Duplex) -> Client {
        let mut cfg = connector.configure().expect("client configure");
        cfg.set_verify_hostname(false);
        let ssl = cfg.into_ssl("localhost").expect("client Ssl");
        Client(Some(Self::state(ssl.connect(link))))
    }
    fn state(r: Result<SslStream<Duplex>, HandshakeError<Duplex>>) -> ClientState {
        match r {
            Ok(s) => ClientState::Done(s),
            Err(HandshakeError::WouldBlock(m)) => ClientState::Mid(m),
            Err(e) => panic!("client handshake: {e}"),
        }
    }
    /// Runs the client until it waits for the server (or is done).
    fn turn(&mut self) {
        self.0 = match self.0.take() {
            Some(ClientState::Mid(m)) => Some(Self::state(m.handshake())),
            done => done,
        };
    }
    fn done(&self) -> &SslStream<Duplex> {
        match &self.0 {
            Some(ClientState::Done(s)) => s,
            _ => panic!("client handshake did not finish"),
        }
    }
}

/// The group the client's connection negotiated, by its OpenSSL short name.
fn negotiated_group(ssl: &openssl::ssl::SslRef) -> String {
    use foreign_types_shared::ForeignTypeRef;
    const SSL_CTRL_GET_NEGOTIATED_GROUP: libc::c_int = 134;
    // SAFETY: a live SSL*; SSL_get_negotiated_group is this SSL_ctrl (a macro in ssl.h).
    let nid = unsafe {
        openssl_sys::SSL_ctrl(
            ssl.as_ptr(),
            SSL_CTRL_GET_NEGOTIATED_GROUP,
            0,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: OBJ_nid2sn returns NULL or a static string.
    let sn = unsafe { openssl_sys::OBJ_nid2sn(nid as libc::c_int) };
    if sn.is_null() {
        format!("nid {nid}")
    } else {
        // SAFETY: non-NULL static C string.
        unsafe { CStr::from_ptr(sn) }.to_string_lossy().into_owned()
    }
}

// ------------------------------------------------------------ handshakes --

/// What the client saw on the last handshake of a run.
#[derive(Clone, Default)]
struct Negotiated {
    version: String,
    cipher: String,
    group: String,
}

/// N full handshakes; the server's CPU nanoseconds, server windows, and what
/// was negotiated.
fn run(
    server: &Server,
    connector: &SslConnector,
    n: usize,
) -> (ServerClock, Negotiated, std::time::Duration) {
    let mut clock = ServerClock::default();
    let mut neg = Negotiated::default();
    let wall = Instant::now();
    for i in 0..n {
        let c2s: Pipe = Rc::default();
        let s2c: Pipe = Rc::default();
        let mut client = Client::start(
            connector,
            Duplex {
                rx: s2c.clone(),
                tx: c2s.clone(),
            },
        );
        let last = i + 1 == n;
        let server_alpn = match server {
            Server::OpenSsl(ctx) => openssl_handshake(ctx, &mut client, c2s, s2c, &mut clock),
            Server::Rustls(cfg) => rustls_handshake(cfg, &mut client, c2s, s2c, &mut clock),
        };
        let ssl = client.done().ssl();
        assert!(!ssl.session_reused(), "a session was resumed");
        assert_eq!(ssl.selected_alpn_protocol(), Some(ALPN), "client ALPN");
        assert_eq!(server_alpn.as_deref(), Some(ALPN), "server ALPN");
        if last {
            neg = Negotiated {
                version: ssl.version_str().to_string(),
                cipher: ssl
                    .current_cipher()
                    .map(|c| c.standard_name().unwrap_or(c.name()).to_string())
                    .unwrap_or_default(),
                group: negotiated_group(ssl),
            };
        }
    }
    (clock, neg, wall.elapsed())
}

fn openssl_handshake(
    ctx: &SslContext,
    client: &mut Client,
    c2s: Pipe,
    s2c: Pipe,
    clock: &mut ServerClock,
) -> Option<Vec<u8>> {
    let link = Duplex { rx: c2s, tx: s2c };
    // Window 1: a new server connection, and its answer to the ClientHello.
    let mut stream = clock.time(|| {
        let mut ssl = Ssl::new(ctx).expect("server Ssl");
        ssl.set_accept_state();
        let mut stream = SslStream::new(ssl, link).expect("server SslStream");
        server_step(&mut stream);
        stream
    });
    loop {
        client.turn();
        // Later windows: each further flight from the client.
        let done = clock.time(|| server_step(&mut stream));
        if done {
            break;
        }
    }
    // TLS 1.2: the server finished first; the client reads its Finished.
    client.turn();
    let alpn = stream.ssl().selected_alpn_protocol().map(<[u8]>::to_vec);
    clock.time(|| drop(stream));
    alpn
}

/// One server do_handshake; true when the handshake is complete.
fn server_step(stream: &mut SslStream<Duplex>) -> bool {
    match stream.do_handshake() {
        Ok(()) => true,
        Err(e) if e.code() == openssl::ssl::ErrorCode::WANT_READ => false,
        Err(e) => panic!("OpenSSL server handshake: {e}"),
    }
}

fn rustls_handshake(
    cfg: &Arc<ServerConfig>,
    client: &mut Client,
    c2s: Pipe,
    s2c: Pipe,
    clock: &mut ServerClock,
) -> Option<Vec<u8>> {
    let mut conn = clock.time(|| {
        let mut conn = ServerConnection::new(cfg.clone()).expect("ServerConnection::new");
        rustls_step(&mut conn, &c2s, &s2c);
        conn
    });
    while conn.is_handshaking() {
        client.turn();
        clock.time(|| rustls_step(&mut conn, &c2s, &s2c));
    }
    client.turn();
    let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
    clock.time(|| drop(conn));
    alpn
}

/// The server reads all the client sent, processes it, writes its answer.
fn rustls_step(conn: &mut ServerConnection, c2s: &Pipe, s2c: &Pipe) {
    let mut rx = c2s.borrow_mut();
    while !rx.is_empty() {
        let (front, _) = rx.as_slices();
        let mut slice: &[u8] = front;
        let before = slice.len();
        conn.read_tls(&mut slice).expect("rustls read_tls");
        let used = before - slice.len();
        rx.drain(..used);
        conn.process_new_packets()
            .expect("rustls process_new_packets");
    }
    drop(rx);
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).expect("rustls write_tls");
    }
    s2c.borrow_mut().extend(out);
}

// ------------------------------------------------------------------- main --

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number after the flag"))
        .unwrap_or(default)
}

fn cpu_facts() -> (String, String) {
    let info = std::fs::read_to_string("/proc/cpuinfo").expect("cannot read /proc/cpuinfo");
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let model = field("model name");
    let flags = field("flags");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    let feats = ["sha_ni", "avx2", "aes", "vaes", "avx512f", "adx", "bmi2"]
        .iter()
        .map(|f| format!("{f}={}", if has(f) { "yes" } else { "no" }))
        .collect::<Vec<_>>()
        .join(" ");
    (model, feats)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps = arg(&args, "--reps", 5);
    let ecdsa_n = arg(&args, "--ecdsa-n", 2000);
    let rsa_n = arg(&args, "--rsa-n", 500);

    let dir = std::env::temp_dir().join(format!("tls-handshakes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("cannot create the temp dir for certificates");
    let certs = [
        (CertKind::Ecdsa, make_cert(CertKind::Ecdsa, &dir)),
        (CertKind::Rsa, make_cert(CertKind::Rsa, &dir)),
    ];

    let cli = Command::new("openssl")
        .arg("version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("(openssl version failed: {e})"));
    let (model, feats) = cpu_facts();
    println!("openssl version: {cli}");
    println!("openssl crate links: {}", openssl::version::version());
    println!("rustls 0.23 (aws-lc-rs and ring providers), client: OpenSSL for every row");
    println!("cpu: {model}; {feats}");
    println!(
        "cores online: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let t0 = thread_cpu_ns();
    for _ in 0..1000 {
        std::hint::black_box(thread_cpu_ns());
    }
    println!(
        "clock_gettime(CLOCK_THREAD_CPUTIME_ID): {:.0} ns a call",
        (thread_cpu_ns() - t0) as f64 / 1000.0
    );
    println!("repetitions: {reps}, median shown; N = {ecdsa_n} (ECDSA) / {rsa_n} (RSA)\n");

    println!(
        "| server | cert | TLS | handshakes/server-CPU-s | µs server CPU/handshake | min–max µs | windows/hs | wall s/rep | cipher | group |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---|---|");
    for (kind, cert) in &certs {
        for version in [Version::Tls13, Version::Tls12] {
            let connector = openssl_client(version);
            for lib in [Library::OpenSsl, Library::RustlsAwsLc, Library::RustlsRing] {
                let server = match lib {
                    Library::OpenSsl => Server::OpenSsl(openssl_server(cert, version)),
                    Library::RustlsAwsLc => Server::Rustls(Arc::new(rustls_server(
                        cert,
                        version,
                        rustls::crypto::aws_lc_rs::default_provider(),
                    ))),
                    Library::RustlsRing => Server::Rustls(Arc::new(rustls_server(
                        cert,
                        version,
                        rustls::crypto::ring::default_provider(),
                    ))),
                };
                let n = if *kind == CertKind::Ecdsa {
                    ecdsa_n
                } else {
                    rsa_n
                };
                // Warm-up: caches, lazy initialisation, allocator.
                run(&server, &connector, (n / 10).max(10));
                let mut us = Vec::new();
                let mut walls = Vec::new();
                let mut neg = Negotiated::default();
                let mut windows = 0;
                for _ in 0..reps {
                    let (clock, ng, wall) = run(&server, &connector, n);
                    us.push(clock.ns as f64 / 1000.0 / n as f64);
                    walls.push(wall.as_secs_f64());
                    windows = clock.windows / n as u64;
                    neg = ng;
                }
                let lo = us.iter().cloned().fold(f64::INFINITY, f64::min);
                let hi = us.iter().cloned().fold(0.0, f64::max);
                let med = median(&mut us);
                println!(
                    "| {} | {} | {} | {:.0} | {:.1} | {:.1}–{:.1} | {} | {:.2} | {} | {} |",
                    lib.name(),
                    kind.name(),
                    version.name(),
                    1e6 / med,
                    med,
                    lo,
                    hi,
                    windows,
                    median(&mut walls),
                    neg.cipher,
                    neg.group,
                );
                assert_eq!(
                    neg.version,
                    version.name().replace(' ', "v"),
                    "protocol version"
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
