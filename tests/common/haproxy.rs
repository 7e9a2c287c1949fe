//! Debian's HAProxy as a real load balancer in front of poolers: one TCP
//! frontend on 127.0.0.1, round robin over the given backends, each server
//! line with `send-proxy-v2`, a chosen source address and health checks
//! (which send a v2 LOCAL header). `mode tcp`
//! relays bytes untouched, so a client's TLS runs end to end with pgharbor
//! (passthrough). Run in the foreground (`-db`) with its own config in a
//! temp dir; killed on drop, and by a watchdog if the test process dies.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use std::net::SocketAddr;

use super::tls::{verifying_connector, Certs};
use super::util::{free_port, spawn_watchdog, tail_file, unique_temp_dir};
use super::wait::wait_until;
use super::{SCRAM_USER, TEST_DB};

/// Where Debian's package puts the binary, else the first on PATH.
pub fn binary() -> Option<PathBuf> {
    let debian = Path::new("/usr/sbin/haproxy");
    if debian.is_file() {
        return Some(debian.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("haproxy"))
        .find(|p| p.is_file())
}

/// A running HAProxy.
pub struct Haproxy {
    /// The frontend port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    watchdog: Option<Child>,
}

impl Haproxy {
    /// Starts `bin` balancing over the poolers on 127.0.0.1 at `backends`,
    /// connecting to them from `source` and sending a PROXY v2 header.
    pub fn start(bin: &Path, backends: &[u16], source: &str) -> Haproxy {
        let dir = unique_temp_dir("haproxy");
        let pidfile = dir.join("harness-haproxy.pid");
        let watchdog = spawn_watchdog(&pidfile, "KILL", &dir);
        let port = free_port();
        let mut cfg = format!(
            "global\n    maxconn 200\n\
             defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n\
             frontend pg\n    bind 127.0.0.1:{port}\n    default_backend poolers\n\
             backend poolers\n    balance roundrobin\n"
        );
        for (i, backend) in backends.iter().enumerate() {
            cfg.push_str(&format!(
                "    server p{i} 127.0.0.1:{backend} send-proxy-v2 source {source} check inter 200ms\n"
            ));
        }
        let cfg_path = dir.join("haproxy.cfg");
        std::fs::write(&cfg_path, cfg).expect("write haproxy.cfg");
        let log = dir.join("haproxy.log");
        let log_file = std::fs::File::create(&log).expect("create haproxy.log");
        let child = Command::new(bin)
            .arg("-db")
            .arg("-f")
            .arg(&cfg_path)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("dup log"))
            .stderr(log_file)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        std::fs::write(&pidfile, child.id().to_string()).expect("write pidfile");
        let mut h = Haproxy {
            port,
            dir,
            child: Some(child),
            watchdog: Some(watchdog),
        };
        h.wait_bound();
        h
    }

    /// Waits until the frontend port is bound. Asks the kernel (the port
    /// is taken) rather than connecting, which would send a client through.
    fn wait_bound(&mut self) {
        let port = self.port;
        let bound = wait_until(Duration::from_secs(10), || {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("haproxy exited ({status}):\n{}", self.log_text());
            }
            std::net::TcpListener::bind(("127.0.0.1", port)).is_err()
        });
        assert!(
            bound,
            "haproxy never bound 127.0.0.1:{port}:\n{}",
            self.log_text()
        );
    }

    /// The end of HAProxy's own output.
    pub fn log_text(&self) -> String {
        tail_file(&self.dir.join("haproxy.log"), 4000)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        // The watchdog first, so it never signals a pid that was reused.
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- haproxy output ---\n{}", self.log_text());
        }
        if std::env::var_os("PGHARBOR_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// tokio-postgres through the HAProxy frontend at `port`, connecting from
/// `from`, as [`SCRAM_USER`] (TLS end to end when `certs` is given); the
/// client and its local port, after one query.
pub async fn connect_through(
    port: u16,
    from: &str,
    certs: Option<&Certs>,
) -> (tokio_postgres::Client, u16) {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{from}:0").parse().expect("addr"))
        .expect("bind");
    let stream = sock
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connect to haproxy");
    let local = stream.local_addr().expect("local addr").port();
    let (user, password) = SCRAM_USER;
    let base = format!("user={user} password={password} dbname={TEST_DB}");
    let client = match certs {
        None => {
            let config: tokio_postgres::Config =
                format!("{base} sslmode=disable").parse().expect("config");
            let (client, conn) = config
                .connect_raw(stream, tokio_postgres::NoTls)
                .await
                .expect("plain login through haproxy");
            tokio::spawn(conn);
            client
        }
        Some(certs) => {
            let config: tokio_postgres::Config =
                format!("{base} sslmode=require").parse().expect("config");
            let ssl = verifying_connector(&certs.ca)
                .configure()
                .expect("ConnectConfiguration");
            let tls = postgres_openssl::TlsConnector::new(ssl, "localhost");
            let (client, conn) = config
                .connect_raw(stream, tls)
                .await
                .expect("TLS login through haproxy");
            tokio::spawn(conn);
            client
        }
    };
    let one: i32 = client
        .query_one("SELECT 1", &[])
        .await
        .expect("query through haproxy")
        .get(0);
    assert_eq!(one, 1);
    (client, local)
}
