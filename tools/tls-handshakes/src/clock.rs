//! The server's CPU clock: this thread's CPU time, summed over the stretches
//! of server-side calls.

/// This thread's CPU time in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Accumulates the server's CPU time.
#[derive(Default)]
pub struct ServerClock {
    pub ns: u64,
    pub windows: u64,
}

impl ServerClock {
    /// Runs F as one server window, adding its CPU time.
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t0 = thread_cpu_ns();
        let out = f();
        self.ns += thread_cpu_ns() - t0;
        self.windows += 1;
        out
    }
}
