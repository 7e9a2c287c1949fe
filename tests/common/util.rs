//! Small process and file-system helpers shared by the PostgreSQL and pooler
//! harnesses: free ports, unique temp dirs, the unprivileged server user and
//! the watchdog that cleans up after a test binary that died without
//! running its destructors.

use std::collections::HashSet;
use std::ffi::CStr;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where [`free_port`] looks: below the kernel's ephemeral range (32768 and
/// up), which outgoing connections draw from, and above the fixed ports a
/// few tests name (all below 25000).
const FREE_PORTS: std::ops::Range<u32> = 25000..32768;

/// A TCP port on 127.0.0.1 that nobody listened on a moment ago, never the
/// same one twice in this process, always in [`FREE_PORTS`]. The search
/// starts at a point derived from our pid, so two test processes rarely try
/// the same ports; another process may still take it before we use it,
/// a race rare enough for tests.
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let handed = handed.get_or_insert_with(HashSet::new);
    let span = FREE_PORTS.end - FREE_PORTS.start;
    let start = std::process::id().wrapping_mul(7919) % span;
    for i in 0..span {
        let port = (FREE_PORTS.start + (start + i) % span) as u16;
        if !handed.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed.insert(port);
            return port;
        }
    }
    panic!("no free TCP port in {FREE_PORTS:?} on 127.0.0.1");
}

/// Creates a fresh directory under the system temp dir, mode 0755 so the
/// unprivileged server user can traverse it.
pub fn unique_temp_dir(kind: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "pgharbor-{kind}-{}-{n}-{nanos:x}",
            std::process::id()
        ));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                    .expect("chmod temp dir");
                return dir;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create temp dir {}: {e}", dir.display()),
        }
    }
}

/// A directory removed when the test ends, passed or not. Keep it alive as
/// long as anything (a pooler, a cluster) still reads its files: declare it
/// before them, or hold it in a struct field after theirs.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh [`unique_temp_dir`] of this kind.
    pub fn new(kind: &str) -> TempDir {
        TempDir(unique_temp_dir(kind))
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

/// The (uid, gid) PostgreSQL must run as: the `postgres` OS user when the
/// tests run as root (PostgreSQL refuses root), `None` otherwise.
pub fn server_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name: &CStr = c"postgres";
    // SAFETY: getpwnam takes a NUL-terminated string and returns a pointer to
    // static storage or NULL; we copy the two ids out before any other call.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(
        !pw.is_null(),
        "tests run as root but there is no `postgres` OS user to run PostgreSQL as \
         (install the postgresql package or create the user)"
    );
    // SAFETY: pw is non-null and points to a valid passwd entry.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Some((uid, gid))
}

/// Makes `cmd` run as the server user (when there is one).
pub fn run_as(cmd: &mut Command, user: Option<(u32, u32)>) {
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
}

/// chown -R.
pub fn chown_recursive(path: &Path, user: Option<(u32, u32)>) {
    let Some((uid, gid)) = user else { return };
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).expect("read_dir") {
            chown_recursive(&entry.expect("dir entry").path(), Some((uid, gid)));
        }
    }
}

/// Starts a detached shell that waits for this test process to exit, then
/// sends `sig` to the pid written in `pidfile` (if any) and removes `dir`.
/// This is what cleans up when the test binary is killed or aborts, and for
/// the per-binary shared cluster, whose static is never dropped. Spawn it
/// right after creating `dir`; write the server's pid to `pidfile` right
/// after spawning it. A normal teardown kills the watchdog first.
pub fn spawn_watchdog(pidfile: &Path, sig: &str, dir: &Path) -> Child {
    // Liveness from /proc: a zombie (never reaped when PID 1 does not reap)
    // still answers `kill -0`.
    const SCRIPT: &str = r#"
test_pid=$1; sig=$2; dir=$3; pidfile=$4
alive() {
  [ -r "/proc/$1/stat" ] || return 1
  read -r line < "/proc/$1/stat" 2>/dev/null || return 1
  s=${line##*")"}; s=${s# }
  case "$s" in Z*|X*) return 1;; esac
  return 0
}
while alive "$test_pid"; do sleep 0.3; done
victim=
[ -r "$pidfile" ] && read -r victim < "$pidfile"
if [ -n "$victim" ]; then
  kill -"$sig" "$victim" 2>/dev/null
  i=0
  while alive "$victim" && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  kill -KILL "$victim" 2>/dev/null
fi
rm -rf "$dir"
"#;
    Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("pgharbor-test-watchdog")
        .arg(std::process::id().to_string())
        .arg(sig)
        .arg(dir)
        .arg(pidfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Own process group: a Ctrl-C aimed at `cargo test` must not kill the
        // cleaner before it has cleaned.
        .process_group(0)
        .spawn()
        .expect("spawn watchdog shell")
}

/// An IPv4 address of this machine outside 127.0.0.0/8 (from getifaddrs),
/// for tests that need a TCP peer that is not loopback; None when the
/// machine has none.
pub fn non_loopback_ipv4() -> Option<std::net::Ipv4Addr> {
    let mut found = None;
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills ifap with a list we free below; each entry's
    // ifa_addr is NULL or points to a sockaddr of the family it names.
    unsafe {
        if libc::getifaddrs(&mut ifap) != 0 {
            return None;
        }
        let mut cur = ifap;
        while !cur.is_null() {
            let addr = (*cur).ifa_addr;
            if !addr.is_null() && i32::from((*addr).sa_family) == libc::AF_INET {
                let sin = &*(addr as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() && !ip.is_unspecified() && !ip.is_link_local() {
                    found = Some(ip);
                    break;
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(ifap);
    }
    // Only if we can listen there.
    found.filter(|ip| TcpListener::bind((*ip, 0)).is_ok())
}

/// Sends `sig` to `pid`; errors (already gone) are ignored.
pub fn kill(pid: u32, sig: i32) {
    // SAFETY: plain syscall.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// The last `max` bytes of a log file, for panic messages.
pub fn tail_file(path: &Path, max: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let start = bytes.len().saturating_sub(max);
            String::from_utf8_lossy(&bytes[start..]).into_owned()
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

/// Removes libpq environment variables the caller's shell may carry, so a
/// psql or pgbench run connects exactly where the test says.
pub fn clean_libpq_env(cmd: &mut Command) {
    for var in [
        "PGHOST",
        "PGHOSTADDR",
        "PGPORT",
        "PGUSER",
        "PGPASSWORD",
        "PGDATABASE",
        "PGSSLMODE",
        "PGOPTIONS",
        "PGAPPNAME",
        "PGSERVICE",
        "PGSERVICEFILE",
        "PGSSLROOTCERT",
        "PGSSLCERT",
        "PGSSLKEY",
        "PGCONNECT_TIMEOUT",
        "PGCHANNELBINDING",
        "PGREQUIREAUTH",
        "PGGSSENCMODE",
        "PGTARGETSESSIONATTRS",
        "PGCLIENTENCODING",
        "PGDATESTYLE",
        "PGTZ",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("PGPASSFILE", "/nonexistent/pgpass");
    cmd.env("PGSYSCONFDIR", "/nonexistent");
}
