//! The process's own figures, under the names every Prometheus client
//! library uses (`process_resident_memory_bytes`, `process_open_fds`,
//! `process_cpu_seconds_total`), read at scrape time from the kernel:
//! `/proc/self/statm` and `/proc/self/fd` (Linux), and getrusage. A figure
//! the system does not give is left out, never guessed.

/// What the kernel says about this process now.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Process {
    /// Resident set size, bytes.
    pub resident_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
}

impl Process {
    /// Reads the figures now.
    pub fn read() -> Process {
        Process {
            resident_bytes: resident_bytes(),
            open_fds: open_fds(),
            cpu_seconds: cpu_seconds(),
        }
    }
}

/// `/proc/self/statm`'s second field (resident pages) × the page size.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages = resident_pages(&statm)?;
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|p| pages * p)
}

fn resident_pages(statm: &str) -> Option<u64> {
    statm.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Entries of `/proc/self/fd` (the one the listing itself holds included,
/// as other Prometheus clients count it).
fn open_fds() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(dir.count() as u64)
}

/// User plus system time of the whole process, from getrusage.
fn cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_SELF is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and it started zeroed).
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_gives_the_resident_field() {
        assert_eq!(resident_pages("5000 1234 300 10 0 900 0\n"), Some(1234));
        assert_eq!(resident_pages("5000"), None);
        assert_eq!(resident_pages(""), None);
    }

    #[test]
    fn this_process_has_memory_descriptors_and_cpu_time() {
        let p = Process::read();
        if cfg!(target_os = "linux") {
            assert!(p.resident_bytes.unwrap_or(0) > 1 << 20, "{p:?}");
            assert!(p.open_fds.unwrap_or(0) >= 3, "{p:?}");
        }
        assert!(p.cpu_seconds.is_some_and(|s| s >= 0.0), "{p:?}");
    }
}
