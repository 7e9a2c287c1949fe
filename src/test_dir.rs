//! A scratch directory for one unit test, removed when it drops (the test
//! passed or not).

use std::path::{Path, PathBuf};

/// `pgharbor-<tag>-<pid>` under the system temp dir, made empty.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory; `tag` must be unique among the process's tests.
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("pgharbor-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test's temp dir");
        TempDir(dir)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
