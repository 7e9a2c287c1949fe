//! `--logfile PATH`: the log goes to a file that SIGHUP and the console's
//! RELOAD reopen, so logrotate can move it away and pgharbor starts a new
//! one (PgBouncer reopens its log file on the same two events). SIGUSR1,
//! which some daemons use for this, is PAUSE here as in PgBouncer.
//!
//! The open file is process-wide, like the tracing subscriber that writes to
//! it: [`install`] registers it so any reload path can [`reopen`] it without
//! threading a handle through the pooler.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tracing_subscriber::fmt::MakeWriter;

/// A log file that can be reopened under the same path.
#[derive(Clone, Debug)]
pub struct LogFile {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

static INSTALLED: OnceLock<LogFile> = OnceLock::new();

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl LogFile {
    /// Opens (creating, appending) `path`.
    pub fn open(path: &Path) -> io::Result<LogFile> {
        Ok(LogFile {
            path: path.to_path_buf(),
            file: Arc::new(Mutex::new(open_append(path)?)),
        })
    }

    /// The path it was opened under.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the path again and switches to the new file; on failure the
    /// old file stays in use, so no line is lost.
    pub fn reopen(&self) -> io::Result<()> {
        let new = open_append(&self.path)?;
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(())
    }
}

/// Registers `file` as the process's log file for [`reopen`].
pub fn install(file: LogFile) {
    let _ = INSTALLED.set(file);
}

/// The registered log file, if `--logfile` was given.
pub fn installed() -> Option<&'static LogFile> {
    INSTALLED.get()
}

/// Reopens the registered log file, logging the outcome; a no-op without
/// `--logfile`.
pub fn reopen() {
    let Some(file) = INSTALLED.get() else {
        return;
    };
    match file.reopen() {
        Ok(()) => tracing::info!(path = %file.path.display(), "log file reopened"),
        Err(e) => {
            tracing::error!(path = %file.path.display(), error = %e, "cannot reopen log file; still writing to the old one")
        }
    }
}

/// One event's write, under the lock so lines never interleave.
pub struct Writer<'a>(&'a Mutex<File>);

impl Write for Writer<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = Writer<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        Writer(&self.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopen_follows_a_rotated_file() {
        let dir = std::env::temp_dir().join(format!("pgharbor-logfile-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let path = dir.join("pgharbor.log");
        let log = LogFile::open(&path).unwrap();
        log.make_writer().write_all(b"one\n").unwrap();
        std::fs::rename(&path, dir.join("pgharbor.log.1")).unwrap();
        log.make_writer().write_all(b"two\n").unwrap();
        log.reopen().unwrap();
        log.make_writer().write_all(b"three\n").unwrap();
        let old = std::fs::read_to_string(dir.join("pgharbor.log.1")).unwrap();
        assert_eq!(old, "one\ntwo\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
