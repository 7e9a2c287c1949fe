//! The postmaster of a [`PgCluster`]: started as the server user in its own
//! process group, waited for until it accepts connections, stopped and
//! started again by a test, and stopped for good (directory removed) on drop.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::super::util::{kill, run_as, server_user, tail_file};
use super::super::wait::{wait_child, wait_until};
use super::{PgCluster, StopMode};

impl PgCluster {
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
    pub(super) fn wait_ready(&self, what: &str) {
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

/// Starts `postgres -D data` (as `user` when we are root), its output in
/// `log`, in its own process group, and records its pid in `pidfile` for
/// the watchdog.
pub(super) fn spawn_postmaster(
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
