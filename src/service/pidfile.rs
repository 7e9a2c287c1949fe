//! `--pidfile`: the process id, written once start-up succeeded and removed
//! on every orderly exit. A pidfile naming a live process refuses the start,
//! as PgBouncer does, so two poolers are never started on one config.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why the pidfile could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum PidfileError {
    /// Another live process holds it.
    #[error("pidfile {path}: process {pid} is still running; is pgharbor already running?")]
    Running {
        /// The file.
        path: PathBuf,
        /// The live process.
        pid: i32,
    },
    /// The file could not be read or written.
    #[error("pidfile {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// A written pidfile; removed when dropped.
#[derive(Debug)]
pub struct Pidfile {
    path: PathBuf,
}

/// Refuses when `path` names a live process other than this one; a stale
/// file (a crashed run) is fine and will be overwritten.
pub fn check(path: &Path) -> Result<(), PidfileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(PidfileError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let Ok(pid) = text.trim().parse::<i32>() else {
        tracing::warn!(path = %path.display(), "ignoring a pidfile that holds no process id");
        return Ok(());
    };
    if pid > 0 && u32::try_from(pid).ok() != Some(std::process::id()) && alive(pid) {
        return Err(PidfileError::Running {
            path: path.to_path_buf(),
            pid,
        });
    }
    Ok(())
}

/// True when `pid` exists and is not a zombie (a zombie answers `kill -0`).
fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(
            stat.rsplit_once(')')
                .map(|(_, s)| s.trim_start().chars().next()),
            Some(Some('Z' | 'X'))
        ),
        Err(_) => true,
    }
}

impl Pidfile {
    /// Checks `path` again (another process may have started since) and
    /// writes this process's id to it.
    pub fn create(path: &Path) -> Result<Pidfile, PidfileError> {
        check(path)?;
        Pidfile::write(path)
    }

    /// After a takeover: the file names the process handing over, which
    /// leaves it alone once it no longer holds its own id.
    pub fn take_over(path: &Path) -> Result<Pidfile, PidfileError> {
        Pidfile::write(path)
    }

    fn write(path: &Path) -> Result<Pidfile, PidfileError> {
        let io = |source| PidfileError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut f = std::fs::File::create(path).map_err(io)?;
        writeln!(f, "{}", std::process::id()).map_err(io)?;
        tracing::info!(path = %path.display(), "pidfile written");
        Ok(Pidfile {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for Pidfile {
    fn drop(&mut self) {
        // A process that took over has written its own id here.
        let own = std::fs::read_to_string(&self.path)
            .map(|t| t.trim() == std::process::id().to_string())
            .unwrap_or(true);
        if !own {
            return;
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove pidfile");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_refused_while_live_and_removed_on_drop() {
        let dir = std::env::temp_dir().join(format!("pgharbor-pidfile-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let path = dir.join("p.pid");
        // PID 1 is always alive.
        std::fs::write(&path, "1\n").unwrap();
        assert!(matches!(
            check(&path),
            Err(PidfileError::Running { pid: 1, .. })
        ));
        // A pid far beyond pid_max is stale.
        std::fs::write(&path, "2147483646\n").unwrap();
        let p = Pidfile::create(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        drop(p);
        assert!(!path.exists());
        let p = Pidfile::take_over(&path).unwrap();
        std::fs::write(&path, "1\n").unwrap();
        drop(p);
        assert!(path.exists(), "removed another process's pidfile");
        std::fs::write(&path, "not a pid").unwrap();
        assert!(check(&path).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
