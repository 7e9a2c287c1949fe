//! TLS helpers for the `tls_*` tests: certificates made at run time with
//! `scripts/gen-certs.sh`, the `[tls]` table, psql runs that report whether
//! libpq used TLS, tokio-postgres over TLS (TCP and Unix socket), and a
//! genuine TLS ClientHello for direct-TLS probes.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use openssl::ssl::{HandshakeError, SslConnector, SslMethod, SslVerifyMode};
use tokio_postgres::Client;

use super::clients::psql_cmd;
use super::util::unique_temp_dir;

/// A development CA and a server certificate it signed (ECDSA P-256; the
/// server certificate names localhost, 127.0.0.1, ::1 and this host's name),
/// in a temp dir removed on drop. Keys are mode 0600.
pub struct Certs {
    pub dir: PathBuf,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Certs {
    /// Runs `scripts/gen-certs.sh` into a fresh temp dir.
    pub fn generate(label: &str) -> Certs {
        let dir = unique_temp_dir(&format!("certs-{label}"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gen-certs.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/gen-certs.sh");
        assert!(
            out.status.success(),
            "gen-certs.sh failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Certs {
            ca: dir.join("ca.crt"),
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
            dir,
        }
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        if std::env::var_os("PGHARBOR_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The body of a `[tls]` table: the certificate and key of `certs` (when
/// given) and the listed keys, e.g. `[("sslmode", "require")]`.
pub fn tls_toml(certs: Option<&Certs>, keys: &[(&str, &str)]) -> String {
    let mut t = String::new();
    if let Some(c) = certs {
        t.push_str(&format!(
            "cert_file = \"{}\"\nkey_file = \"{}\"\n",
            c.cert.display(),
            c.key.display()
        ));
    }
    for (k, v) in keys {
        t.push_str(&format!("{k} = \"{v}\"\n"));
    }
    t
}

/// A pooler on its own TCP port serving `certs`, with the listed `[tls]`
/// keys, in front of the shared cluster.
pub fn tls_pooler(certs: &Certs, keys: &[(&str, &str)]) -> super::Pooler {
    let mut opts = super::PoolerOpts::default().tls(&tls_toml(Some(certs), keys));
    opts.port = Some(super::util::free_port());
    super::Pooler::start(super::PgCluster::shared(), opts)
}

/// What one psql run showed.
#[derive(Debug, Clone)]
pub struct PsqlRun {
    pub ok: bool,
    /// The `SSL connection (protocol: ...)` line of `\conninfo`, when libpq
    /// used TLS.
    pub ssl_line: Option<String>,
    pub stdout: String,
    pub stderr: String,
}

impl PsqlRun {
    pub fn uses_tls(&self) -> bool {
        self.ok && self.ssl_line.is_some()
    }
}

/// Runs psql with `\conninfo` and a query, so the result says whether the
/// session works and whether libpq used TLS. HOME points nowhere, so no
/// `~/.postgresql/root.crt` or client certificate changes libpq's behaviour.
pub fn psql_conninfo(conninfo: &str, password: Option<&str>) -> PsqlRun {
    let out = psql_cmd(conninfo, password)
        .env("HOME", "/nonexistent")
        .args(["-At", "-c", "\\conninfo", "-c", "SELECT 'served'"])
        .output()
        .expect("run psql");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let ok = out.status.success() && stdout.lines().any(|l| l == "served");
    PsqlRun {
        ok,
        ssl_line: stdout
            .lines()
            .find(|l| l.starts_with("SSL connection (protocol: "))
            .map(str::to_string),
        stdout,
        stderr,
    }
}

/// An OpenSSL client connector that checks the chain against `ca` (and, via
/// the connect configuration, the host name), as libpq's verify-full.
pub fn verifying_connector(ca: &Path) -> SslConnector {
    let mut b = SslConnector::builder(SslMethod::tls_client()).expect("SslConnector");
    b.set_ca_file(ca)
        .unwrap_or_else(|e| panic!("CA file {}: {e}", ca.display()));
    b.set_verify(SslVerifyMode::PEER);
    b.build()
}

/// tokio-postgres over TCP with TLS that checks the certificate against `ca`
/// and the conninfo's `host` (use `sslmode=require` in `conninfo`). Must be
/// called inside a tokio runtime.
pub async fn connect_tls_tcp(conninfo: &str, ca: &Path) -> Result<Client, tokio_postgres::Error> {
    let tls = postgres_openssl::MakeTlsConnector::new(verifying_connector(ca));
    let (client, connection) = tokio_postgres::connect(conninfo, tls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// tokio-postgres over a Unix socket with TLS: tokio-postgres has no host
/// name for a socket (its own `connect` fails with "no hostname provided for
/// TLS handshake"), so the socket is opened here and the TLS connector is
/// given `host` for verification against `ca`. `conninfo` carries user,
/// dbname, password and sslmode, no host.
pub async fn connect_tls_unix(
    socket: &Path,
    conninfo: &str,
    ca: &Path,
    host: &str,
) -> Result<Client, tokio_postgres::Error> {
    let config: tokio_postgres::Config = conninfo.parse()?;
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    let ssl = verifying_connector(ca)
        .configure()
        .expect("ConnectConfiguration");
    let tls = postgres_openssl::TlsConnector::new(ssl, host);
    let (client, connection) = config.connect_raw(stream, tls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// A genuine TLS ClientHello record (first byte 0x16), as a client that
/// starts TLS directly (no SSLRequest) would send it.
pub fn client_hello() -> Vec<u8> {
    /// Records what the handshake writes; never has anything to read.
    #[derive(Debug, Default)]
    struct Capture(Vec<u8>);
    impl Read for Capture {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
    impl Write for Capture {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let connector = SslConnector::builder(SslMethod::tls_client())
        .expect("SslConnector")
        .build();
    match connector.connect("localhost", Capture::default()) {
        Err(HandshakeError::WouldBlock(mid)) => {
            let hello = mid.get_ref().0.clone();
            assert_eq!(hello.first(), Some(&0x16), "not a TLS handshake record");
            hello
        }
        Err(e) => panic!("building a ClientHello: {e}"),
        Ok(_) => panic!("handshake completed without a server"),
    }
}

/// A name that resolves to 127.0.0.1 but that a certificate naming only
/// localhost and 127.0.0.1 does not cover: this host's name when
/// /etc/hosts maps it to 127.0.0.1, else `127.1` (inet_aton's short form of
/// 127.0.0.1, which is not an IP literal for a certificate check). None
/// when neither resolves to 127.0.0.1 here.
pub fn other_name_for_loopback() -> Option<String> {
    use std::net::ToSocketAddrs;
    let hostname = Command::new("hostname")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|h| !h.is_empty() && h != "localhost");
    hostname
        .into_iter()
        .chain(["127.1".to_string()])
        .find(|name| {
            (name.as_str(), 1u16)
                .to_socket_addrs()
                .map(|mut addrs| addrs.any(|a| a.ip() == std::net::Ipv4Addr::LOCALHOST))
                .unwrap_or(false)
        })
}

/// A raw client inside TLS over TCP, not yet logged in: SSLRequest, the
/// pooler's `S`, then a handshake that checks no certificate.
pub fn raw_tls_link(pooler: &super::Pooler) -> super::RawConn {
    use super::wire::{request_packet, TlsVerify, SSL_REQUEST_CODE};
    let mut raw = super::RawConn::connect(&pooler.endpoint(super::Transport::Tcp));
    raw.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
    assert_eq!(
        raw.read_byte(std::time::Duration::from_secs(5)),
        super::Reply::Byte(b'S')
    );
    raw.start_tls(&TlsVerify::None)
        .unwrap_or_else(|e| panic!("handshake: {e}\n{}", pooler.log_text()));
    raw
}
