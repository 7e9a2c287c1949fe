//! A pgharbor process for one test: its own temp dir with config, userlist,
//! Unix socket and log, its own TCP port, stopped on drop (SIGINT, then
//! SIGKILL after 5 s) and by a watchdog if the test binary dies.

use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::pg::{PgCluster, MD5_USER, SCRAM_USER, TEST_DB, TRUST_USER};
use super::util::{free_port, kill, spawn_watchdog, tail_file, unique_temp_dir};
use super::wait::wait_child;
use super::wire::{cancel_packet, Endpoint, RawConn};
use super::Transport;

/// How a `[databases.NAME]` entry reaches PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The cluster's socket directory (pg_hba: trust for everyone).
    Unix,
    /// 127.0.0.1 (pg_hba: trust_user trust, md5_user md5, others SCRAM).
    Tcp,
}

/// One `[databases.NAME]` entry.
#[derive(Debug, Clone)]
pub struct DbEntry {
    /// The name clients ask for.
    pub name: String,
    pub backend: Backend,
    /// `dbname=` in the conninfo; None leaves it out (the entry's name is used).
    pub dbname: Option<String>,
    /// `user=`: every client of the entry shares this backend user.
    pub user: Option<String>,
    /// `password=`.
    pub password: Option<String>,
    pub pool_size: Option<usize>,
    /// Appended to the conninfo verbatim (e.g. "application_name=x").
    pub extra_conninfo: String,
}

impl DbEntry {
    /// `harbor_test` over the given backend, each client's own user.
    pub fn new(name: &str, backend: Backend) -> DbEntry {
        DbEntry {
            name: name.to_string(),
            backend,
            dbname: Some(TEST_DB.to_string()),
            user: None,
            password: None,
            pool_size: None,
            extra_conninfo: String::new(),
        }
    }

    pub fn user(mut self, user: &str, password: Option<&str>) -> DbEntry {
        self.user = Some(user.to_string());
        self.password = password.map(str::to_string);
        self
    }

    pub fn pool_size(mut self, n: usize) -> DbEntry {
        self.pool_size = Some(n);
        self
    }

    /// Appends `key=value ...` to the conninfo; a later key overrides an
    /// earlier one, as in libpq (e.g. `sslmode=require` over the TCP
    /// backend's default `sslmode=disable`).
    pub fn conninfo_extra(mut self, extra: &str) -> DbEntry {
        if !self.extra_conninfo.is_empty() {
            self.extra_conninfo.push(' ');
        }
        self.extra_conninfo.push_str(extra);
        self
    }
}

/// Everything a test may choose about a pooler. `Default` is: SCRAM client
/// auth against plain passwords for the three cluster roles, session mode,
/// `harbor_test` over the cluster's Unix socket, both listeners on.
#[derive(Debug, Clone)]
pub struct PoolerOpts {
    /// trust | md5 | scram-sha-256
    pub auth_method: String,
    /// Userlist lines: (user, secret).
    pub userlist: Vec<(String, String)>,
    pub databases: Vec<DbEntry>,
    pub mode: String,
    pub default_pool_size: usize,
    pub max_client_conn: usize,
    pub query_wait_timeout: String,
    pub client_login_timeout: String,
    pub server_connect_timeout: String,
    /// None leaves the key out (the pooler's default).
    pub server_reset_query: Option<String>,
    pub shutdown_timeout: String,
    /// Listen on 127.0.0.1.
    pub tcp: bool,
    /// More TCP addresses to listen on besides 127.0.0.1 (when `tcp`), e.g.
    /// a non-loopback address of this machine.
    pub extra_addresses: Vec<String>,
    /// Listen on a Unix socket in the pooler's temp dir.
    pub unix: bool,
    /// Lines placed inside the `[tls]` table (empty: no TLS keys, the
    /// pooler's defaults).
    pub tls_toml: String,
    /// Extra TOML appended to the config.
    pub extra_toml: String,
    /// Lines placed inside the `[listen]` table, after the harness's keys
    /// (e.g. `tcp_keepidle = "21s"`).
    pub listen_toml: String,
    /// Lines placed inside the `[auth]` table, after the harness's keys
    /// (e.g. `hba_file = "/abs/pg_hba.conf"`).
    pub auth_toml: String,
    /// Lines placed inside the `[pool]` table, after the keys above (e.g.
    /// `idle_transaction_timeout = "1s"`).
    pub pool_toml: String,
    /// Use this port instead of a fresh one (to collide on purpose).
    pub port: Option<u16>,
    /// Use this socket directory instead of one in the pooler's temp dir.
    pub socket_dir: Option<PathBuf>,
    /// `admin.metrics_listen` (e.g. "127.0.0.1:9930"); None leaves it out.
    pub metrics_listen: Option<String>,
    /// `admin.users`: who may use the `pgharbor` admin console.
    pub admin_users: Vec<String>,
    /// `admin.stats_users`: who may SHOW on the console.
    pub stats_users: Vec<String>,
    /// Command-line arguments after `--config PATH` (e.g. `--log-format json`).
    pub args: Vec<String>,
}

impl Default for PoolerOpts {
    fn default() -> Self {
        PoolerOpts {
            auth_method: "scram-sha-256".into(),
            userlist: vec![
                (SCRAM_USER.0.into(), SCRAM_USER.1.into()),
                (MD5_USER.0.into(), MD5_USER.1.into()),
                (TRUST_USER.into(), "trust_pass".into()),
            ],
            databases: vec![DbEntry::new(TEST_DB, Backend::Unix)],
            mode: "session".into(),
            default_pool_size: 20,
            max_client_conn: 10000,
            query_wait_timeout: "120s".into(),
            client_login_timeout: "15s".into(),
            server_connect_timeout: "15s".into(),
            server_reset_query: Some("DISCARD ALL".into()),
            shutdown_timeout: "30s".into(),
            tcp: true,
            extra_addresses: Vec::new(),
            unix: true,
            tls_toml: String::new(),
            extra_toml: String::new(),
            listen_toml: String::new(),
            auth_toml: String::new(),
            pool_toml: String::new(),
            port: None,
            socket_dir: None,
            metrics_listen: None,
            admin_users: Vec::new(),
            stats_users: Vec::new(),
            args: Vec::new(),
        }
    }
}

impl PoolerOpts {
    pub fn auth(mut self, method: &str) -> Self {
        self.auth_method = method.into();
        self
    }
    pub fn userlist(mut self, entries: &[(&str, &str)]) -> Self {
        self.userlist = entries
            .iter()
            .map(|(u, s)| (u.to_string(), s.to_string()))
            .collect();
        self
    }
    pub fn databases(mut self, dbs: Vec<DbEntry>) -> Self {
        self.databases = dbs;
        self
    }
    pub fn pool_size(mut self, n: usize) -> Self {
        self.default_pool_size = n;
        self
    }
    pub fn max_client_conn(mut self, n: usize) -> Self {
        self.max_client_conn = n;
        self
    }
    pub fn query_wait_timeout(mut self, t: &str) -> Self {
        self.query_wait_timeout = t.into();
        self
    }
    pub fn client_login_timeout(mut self, t: &str) -> Self {
        self.client_login_timeout = t.into();
        self
    }
    pub fn shutdown_timeout(mut self, t: &str) -> Self {
        self.shutdown_timeout = t.into();
        self
    }
    pub fn reset_query(mut self, q: Option<&str>) -> Self {
        self.server_reset_query = q.map(str::to_string);
        self
    }
    /// `admin.users` (the admin console's users).
    pub fn admin_users(mut self, users: &[&str]) -> Self {
        self.admin_users = users.iter().map(|u| u.to_string()).collect();
        self
    }
    /// `admin.stats_users` (console users that may only SHOW).
    pub fn stats_users(mut self, users: &[&str]) -> Self {
        self.stats_users = users.iter().map(|u| u.to_string()).collect();
        self
    }

    /// Serves Prometheus metrics on `addr` (`admin.metrics_listen`).
    pub fn metrics_listen(mut self, addr: &str) -> Self {
        self.metrics_listen = Some(addr.into());
        self
    }
    /// `pool.mode`: session | transaction | statement.
    pub fn mode(mut self, mode: &str) -> Self {
        self.mode = mode.into();
        self
    }
    /// Transaction pooling over `pool_size` backends, the rest as `default()`.
    pub fn transaction(pool_size: usize) -> Self {
        PoolerOpts::default()
            .mode("transaction")
            .pool_size(pool_size)
    }

    /// Adds lines to the `[pool]` table (e.g. `track_parameters = ["work_mem"]`).
    pub fn pool_toml(mut self, lines: &str) -> Self {
        if !self.pool_toml.is_empty() && !self.pool_toml.ends_with('\n') {
            self.pool_toml.push('\n');
        }
        self.pool_toml.push_str(lines);
        self
    }
    /// Adds lines to the `[listen]` table.
    /// Lines for the `[auth]` table (e.g. `hba_file = ...`).
    pub fn auth_toml(mut self, lines: &str) -> Self {
        self.auth_toml.push_str(lines);
        self.auth_toml.push('\n');
        self
    }

    pub fn listen_toml(mut self, lines: &str) -> Self {
        self.listen_toml.push_str(lines);
        self.listen_toml.push('\n');
        self
    }
    /// The body of the `[tls]` table (e.g. from `common::tls::tls_toml`).
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    pub fn tls(mut self, toml: &str) -> Self {
        self.tls_toml = toml.into();
        self
    }
}

pub struct Pooler {
    dir: PathBuf,
    port: u16,
    sock_dir: Option<PathBuf>,
    tcp: bool,
    config_path: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    watchdog: Option<Child>,
}

/// TOML basic string.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Writes a userlist that others cannot read, as an operator should (a
/// world-readable one draws a warning from check and start-up): mode 0640,
/// its group the server user's when running as root, so a pooler that
/// switched to `service.user = "postgres"` can still read it.
pub fn write_userlist(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write userlist.txt");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o640))
        .expect("chmod userlist.txt");
    if let Some((_, gid)) = super::util::server_user() {
        std::os::unix::fs::chown(path, None, Some(gid)).expect("chgrp userlist.txt");
    }
}

/// Userlist field: PgBouncer doubles a `"` inside quotes.
fn userlist_str(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

impl Pooler {
    /// The path of the pgharbor binary cargo built for these tests.
    pub fn binary() -> &'static str {
        env!("CARGO_BIN_EXE_pgharbor")
    }

    /// Writes the config and starts pgharbor; panics (with its log) when it
    /// exits or does not listen within 10 s.
    pub fn start(cluster: &PgCluster, opts: PoolerOpts) -> Pooler {
        Pooler::try_start(cluster, opts).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Pooler::start`], returning the failure instead of panicking.
    pub fn try_start(cluster: &PgCluster, opts: PoolerOpts) -> Result<Pooler, String> {
        let dir = unique_temp_dir("pooler");
        let port = opts.port.unwrap_or_else(free_port);
        let sock_dir = match (&opts.socket_dir, opts.unix) {
            (_, false) => None,
            (Some(d), true) => Some(d.clone()),
            (None, true) => {
                let d = dir.join("sock");
                std::fs::create_dir(&d).expect("mkdir pooler sock dir");
                Some(d)
            }
        };
        let config_path = dir.join("pgharbor.toml");
        std::fs::write(
            &config_path,
            Pooler::config_text(cluster, &opts, port, &sock_dir),
        )
        .expect("write pgharbor.toml");
        let mut userlist = String::new();
        for (u, s) in &opts.userlist {
            let _ = writeln!(userlist, "{} {}", userlist_str(u), userlist_str(s));
        }
        write_userlist(&dir.join("userlist.txt"), &userlist);

        let (child, log, watchdog) = spawn_in(&dir, &config_path, &opts.args);
        let mut pooler = Pooler {
            dir,
            port,
            sock_dir,
            tcp: opts.tcp,
            config_path,
            log,
            child: Some(child),
            watchdog: Some(watchdog),
        };
        pooler.wait_listening(Duration::from_secs(10))?;
        Ok(pooler)
    }

    /// Starts `pgharbor --takeover` on this pooler's config (with `args`),
    /// in its own temp dir for its log; returns once it says it took over.
    /// Drop it before this one: the socket directory is this one's.
    pub fn take_over(&self, args: &[&str]) -> Result<Pooler, String> {
        let dir = unique_temp_dir("pooler-takeover");
        let mut all = vec!["--takeover".to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        let (child, log, watchdog) = spawn_in(&dir, &self.config_path, &all);
        let mut next = Pooler {
            dir,
            port: self.port,
            sock_dir: self.sock_dir.clone(),
            tcp: self.tcp,
            config_path: self.config_path.clone(),
            log,
            child: Some(child),
            watchdog: Some(watchdog),
        };
        let took = super::wait::wait_until(Duration::from_secs(15), || {
            next.log_text().contains("took over")
                || next
                    .child
                    .as_mut()
                    .is_some_and(|c| c.try_wait().ok().flatten().is_some())
        });
        if !took || !next.log_text().contains("took over") {
            return Err(format!(
                "takeover did not happen; log:\n{}",
                next.log_text()
            ));
        }
        Ok(next)
    }

    fn config_text(
        cluster: &PgCluster,
        opts: &PoolerOpts,
        port: u16,
        sock_dir: &Option<PathBuf>,
    ) -> String {
        let mut t = String::new();
        let addresses = if opts.tcp {
            let all: Vec<String> = std::iter::once("127.0.0.1")
                .chain(opts.extra_addresses.iter().map(String::as_str))
                .map(toml_str)
                .collect();
            format!("[{}]", all.join(", "))
        } else {
            "[]".to_string()
        };
        let sock = sock_dir
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let _ = writeln!(
            t,
            "[listen]\naddresses = {addresses}\nport = {port}\nunix_socket_dir = {}\n\
             unix_socket_mode = \"0777\"\nclient_login_timeout = {}\n{}",
            toml_str(&sock),
            toml_str(&opts.client_login_timeout),
            opts.listen_toml,
        );
        let _ = writeln!(t, "[tls]\n{}", opts.tls_toml);
        let _ = writeln!(
            t,
            "[auth]\nmethod = {}\nauth_file = \"userlist.txt\"\n{}",
            toml_str(&opts.auth_method),
            opts.auth_toml
        );
        let _ = writeln!(
            t,
            "[pool]\nmode = {}\ndefault_pool_size = {}\nmax_client_conn = {}\n\
             query_wait_timeout = {}\nserver_connect_timeout = {}\nshutdown_timeout = {}",
            toml_str(&opts.mode),
            opts.default_pool_size,
            opts.max_client_conn,
            toml_str(&opts.query_wait_timeout),
            toml_str(&opts.server_connect_timeout),
            toml_str(&opts.shutdown_timeout),
        );
        if let Some(q) = &opts.server_reset_query {
            let _ = writeln!(t, "server_reset_query = {}", toml_str(q));
        }
        if !opts.pool_toml.is_empty() {
            let _ = writeln!(t, "{}", opts.pool_toml);
        }
        let admins: Vec<String> = opts.admin_users.iter().map(|u| toml_str(u)).collect();
        let _ = writeln!(t, "\n[admin]\nusers = [{}]\n", admins.join(", "));
        if !opts.stats_users.is_empty() {
            let stats: Vec<String> = opts.stats_users.iter().map(|u| toml_str(u)).collect();
            let _ = writeln!(t, "stats_users = [{}]\n", stats.join(", "));
        }
        if let Some(addr) = &opts.metrics_listen {
            // Still in the [admin] table written just above.
            let _ = writeln!(t, "metrics_listen = {}\n", toml_str(addr));
        }
        for db in &opts.databases {
            let _ = writeln!(
                t,
                "[databases.{}]\nconninfo = {}",
                toml_str(&db.name),
                toml_str(&Pooler::backend_conninfo(cluster, db))
            );
            if let Some(n) = db.pool_size {
                let _ = writeln!(t, "pool_size = {n}");
            }
            t.push('\n');
        }
        t.push_str(&opts.extra_toml);
        t
    }

    /// The libpq conninfo for a database entry.
    pub fn backend_conninfo(cluster: &PgCluster, db: &DbEntry) -> String {
        let mut s = match db.backend {
            Backend::Unix => format!(
                "host={} port={}",
                cluster.socket_dir().display(),
                cluster.port()
            ),
            // Backend TLS is the TLS issue's subject; these tests pin plain TCP.
            Backend::Tcp => format!("host=127.0.0.1 port={} sslmode=disable", cluster.port()),
        };
        if let Some(d) = &db.dbname {
            s.push_str(&format!(" dbname={d}"));
        }
        if let Some(u) = &db.user {
            s.push_str(&format!(" user={u}"));
        }
        if let Some(p) = &db.password {
            s.push_str(&format!(" password={p}"));
        }
        if !db.extra_conninfo.is_empty() {
            s.push(' ');
            s.push_str(&db.extra_conninfo);
        }
        s
    }

    fn wait_listening(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!(
                    "pgharbor exited during start-up ({status}); config:\n{}\nlog:\n{}",
                    std::fs::read_to_string(&self.config_path).unwrap_or_default(),
                    self.log_text()
                ));
            }
            // Connect, not just stat: a stale file from a crashed run exists
            // before this pooler listens.
            let sock_ok = self
                .sock_dir
                .as_ref()
                .is_none_or(|_| probe(&Endpoint::Unix(self.socket_path())));
            let tcp_ok = !self.tcp || probe(&Endpoint::Tcp(self.port));
            if sock_ok && tcp_ok {
                // Let the pooler finish forgetting the probes, so they do not
                // count against a small max_client_conn.
                std::thread::sleep(Duration::from_millis(50));
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "pgharbor did not listen within {timeout:?} (socket file: {sock_ok}, \
                     TCP: {tcp_ok}); log:\n{}",
                    self.log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The config file this pooler was started with (edit it, then SIGHUP).
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// Waits until the log has `needle` at least `count` times.
    pub fn wait_for_log(&self, needle: &str, count: usize, timeout: Duration) -> bool {
        super::wait::wait_until(timeout, || {
            std::fs::read_to_string(&self.log)
                .map(|l| l.matches(needle).count() >= count)
                .unwrap_or(false)
        })
    }

    /// Directory holding the Unix socket (panics if the socket is off).
    pub fn socket_dir(&self) -> &Path {
        self.sock_dir
            .as_deref()
            .expect("this pooler has no Unix socket")
    }

    /// `<socket dir>/.s.PGSQL.<port>`.
    pub fn socket_path(&self) -> PathBuf {
        self.socket_dir().join(format!(".s.PGSQL.{}", self.port))
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("pooler child").id()
    }

    /// libpq connection string through the pooler.
    pub fn conninfo(
        &self,
        transport: Transport,
        user: &str,
        password: Option<&str>,
        db: &str,
    ) -> String {
        super::conninfo(&self.host(transport), self.port, user, password, db)
    }

    /// The libpq `host` for a transport (socket dir or 127.0.0.1).
    pub fn host(&self, transport: Transport) -> String {
        match transport {
            Transport::Unix => self.socket_dir().display().to_string(),
            Transport::Tcp => "127.0.0.1".to_string(),
        }
    }

    pub fn endpoint(&self, transport: Transport) -> Endpoint {
        match transport {
            Transport::Unix => Endpoint::Unix(self.socket_path()),
            Transport::Tcp => Endpoint::Tcp(self.port),
        }
    }

    /// The pooler's stdout and stderr so far.
    pub fn log_text(&self) -> String {
        tail_file(&self.log, 20_000)
    }

    /// Panics (with the log) if the process has exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        {
            panic!("pgharbor died ({status}); log:\n{}", self.log_text());
        }
    }

    pub fn signal(&self, sig: i32) {
        kill(self.pid(), sig);
    }

    /// Sends SIGHUP and waits until the log has the `n`th `marker`
    /// ("configuration reloaded", "reload failed").
    pub fn sighup_until(&self, marker: &str, n: usize) {
        self.signal(libc::SIGHUP);
        assert!(
            self.wait_for_log(marker, n, Duration::from_secs(10)),
            "no {n}th {marker:?} in the log after SIGHUP:\n{}",
            self.log_text()
        );
    }

    /// Waits for the process to exit; None if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_child(self.child.as_mut().expect("pooler child"), timeout)
    }

    /// Asserts the process exits cleanly within `timeout` (an old process
    /// after a takeover), showing its log otherwise.
    pub fn assert_exits(&mut self, timeout: Duration) {
        let status = self
            .wait_exit(timeout)
            .unwrap_or_else(|| panic!("the process is still running; log:\n{}", self.log_text()));
        assert!(
            status.success(),
            "it exited {status}; log:\n{}",
            self.log_text()
        );
    }

    /// Runs `pgharbor check --config <file>` on `config_text` (written, with
    /// an empty userlist.txt beside it, into a temp dir); returns the exit
    /// code (-1 when killed by a signal) and stderr.
    pub fn run_check(config_text: &str) -> (i32, String) {
        let dir = unique_temp_dir("check");
        let path = dir.join("pgharbor.toml");
        std::fs::write(&path, config_text).expect("write config");
        write_userlist(&dir.join("userlist.txt"), "");
        let out = Command::new(Pooler::binary())
            .arg("check")
            .arg("--config")
            .arg(&path)
            .stdin(Stdio::null())
            .output()
            .expect("run pgharbor check");
        let _ = std::fs::remove_dir_all(&dir);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout),
        )
    }

    /// The config text this harness would write (for `check` tests).
    pub fn sample_config(cluster: &PgCluster, opts: &PoolerOpts) -> String {
        let port = free_port();
        Pooler::config_text(cluster, opts, port, &Some(std::env::temp_dir()))
    }
}

/// Spawns pgharbor on `config_path` with `args`, logging into `dir`, with
/// a watchdog that kills it if the test binary dies.
fn spawn_in(dir: &Path, config_path: &Path, args: &[String]) -> (Child, PathBuf, Child) {
    let pidfile = dir.join("harness-pgharbor.pid");
    let watchdog = spawn_watchdog(&pidfile, "KILL", dir);
    let log = dir.join("pgharbor.log");
    let log_file = std::fs::File::create(&log).expect("create pgharbor.log");
    let mut cmd = Command::new(Pooler::binary());
    cmd.arg("--config")
        .arg(config_path)
        .args(args)
        .current_dir(dir)
        .env(
            "RUST_LOG",
            std::env::var("PGHARBOR_TEST_LOG").unwrap_or_else(|_| "info".into()),
        )
        // The pooler itself must leave colour out of a log file.
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("dup log"))
        .stderr(log_file)
        .process_group(0);
    let child = cmd.spawn().expect("spawn pgharbor");
    std::fs::write(&pidfile, child.id().to_string()).expect("write pidfile");
    (child, log, watchdog)
}

/// Whether something accepts connections at `ep`. The probe sends a
/// CancelRequest with a key nobody has (servers drop it silently and close)
/// and waits for that close, so the probe is over on both sides.
fn probe(ep: &Endpoint) -> bool {
    let Ok(mut conn) = RawConn::try_connect(ep) else {
        return false;
    };
    let _ = conn.send(&cancel_packet(0, 0));
    let _ = conn.read_until_close(Duration::from_secs(2));
    true
}

impl Drop for Pooler {
    fn drop(&mut self) {
        if let Some(mut wd) = self.watchdog.take() {
            let _ = wd.kill();
            let _ = wd.wait();
        }
        if let Some(mut child) = self.child.take() {
            if child.try_wait().ok().flatten().is_none() {
                kill(child.id(), libc::SIGINT);
                if wait_child(&mut child, Duration::from_secs(5)).is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "---- pgharbor log ({}) ----\n{}\n---- end of pgharbor log ----",
                self.log.display(),
                self.log_text()
            );
        }
        if std::env::var_os("PGHARBOR_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
