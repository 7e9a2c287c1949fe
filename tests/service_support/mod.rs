//! A pgharbor that tests/service.rs starts itself, with its own flags,
//! environment or wrapper (the shared harness's `Pooler` fixes those).

#![allow(dead_code)] // each test binary uses a different part

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::util::{kill, spawn_watchdog, unique_temp_dir};
use crate::common::wait::{wait_child, wait_until};
use crate::common::{Backend, DbEntry, Endpoint, PgCluster, Pooler, RawConn, TEST_DB, TRUST_USER};

/// A config, userlist and socket directory in a temp dir, for a pgharbor
/// this file starts itself (with its own flags, environment or wrapper).
pub struct Setup {
    pub dir: PathBuf,
    pub port: u16,
    pub config: PathBuf,
    pub log: PathBuf,
}

impl Setup {
    pub fn new(pg: &PgCluster, port: u16, extra_toml: &str) -> Setup {
        let dir = unique_temp_dir("service");
        std::fs::create_dir(dir.join("sock")).unwrap();
        let conninfo = Pooler::backend_conninfo(pg, &DbEntry::new(TEST_DB, Backend::Unix));
        let text = format!(
            "[listen]\naddresses = [\"127.0.0.1\"]\nport = {port}\nunix_socket_dir = {:?}\n\
             [auth]\nmethod = \"trust\"\nauth_file = \"userlist.txt\"\n\
             [pool]\nshutdown_timeout = \"5s\"\n[admin]\nusers = [{TRUST_USER:?}]\n\
             [databases.{TEST_DB}]\nconninfo = {conninfo:?}\n{extra_toml}",
            dir.join("sock").display().to_string()
        );
        let config = dir.join("pgharbor.toml");
        std::fs::write(&config, text).unwrap();
        std::fs::write(
            dir.join("userlist.txt"),
            format!("\"{TRUST_USER}\" \"x\"\n"),
        )
        .unwrap();
        let log = dir.join("stderr.log");
        Setup {
            dir,
            port,
            config,
            log,
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir
            .join("sock")
            .join(format!(".s.PGSQL.{}", self.port))
    }

    /// `pgharbor --config <config> args...`, output to `stderr.log`.
    pub fn pgharbor(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(Pooler::binary());
        cmd.arg("--config").arg(&self.config).args(args);
        self.output_to_log(&mut cmd);
        cmd
    }

    pub fn output_to_log(&self, cmd: &mut Command) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        cmd.current_dir(&self.dir)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn wait_log(&self, path: &Path, needle: &str) -> bool {
        wait_until(Duration::from_secs(10), || {
            std::fs::read_to_string(path).is_ok_and(|l| l.contains(needle))
        })
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- pgharbor output ----\n{}", self.log_text());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A started process, killed (whole group) on drop if still running.
pub struct Running {
    child: Child,
    watchdog: Child,
}

impl Running {
    pub fn spawn(setup: &Setup, mut cmd: Command) -> Running {
        let pidfile = setup.dir.join("harness.pid");
        let watchdog = spawn_watchdog(&pidfile, "KILL", &setup.dir);
        let child = cmd.spawn().expect("spawn");
        std::fs::write(&pidfile, child.id().to_string()).unwrap();
        Running { child, watchdog }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: i32) {
        kill(self.pid(), sig);
    }

    /// Exit code of an orderly exit within 10 s; panics on death by signal.
    pub fn wait_exit(&mut self) -> i32 {
        let status = wait_child(&mut self.child, Duration::from_secs(10)).expect("still running");
        status
            .code()
            .unwrap_or_else(|| panic!("died of a signal: {status}"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
        if self.child.try_wait().ok().flatten().is_none() {
            kill(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Logs in as the trust user and runs `SELECT 1` at `ep`; with a deadline,
/// since the process may still be starting.
pub fn serves(ep: &Endpoint) -> bool {
    wait_until(Duration::from_secs(10), || {
        let Ok(mut raw) = RawConn::try_connect(ep) else {
            return false;
        };
        let params = [("user", TRUST_USER), ("database", TEST_DB)];
        raw.login(&params, None).is_ok() && raw.query("SELECT 1").scalar().as_deref() == Some("1")
    })
}
