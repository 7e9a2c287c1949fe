//! The two ways an io_uring program here waits: its own loop inside
//! `io_uring_enter`, or one tokio task waiting on the ring's fd in tokio's
//! epoll (`hosted`). The relay and the login server differ only in what
//! they do with a completion.

use std::io;
use std::os::fd::AsRawFd;

use io_uring::IoUring;

/// What a loop drives: its ring, and what each completion means.
pub trait Handler {
    fn ring(&mut self) -> &mut IoUring;
    /// Handles one completion; may queue more entries.
    fn completed(&mut self, user_data: u64, res: i32, flags: u32) -> io::Result<()>;
}

/// A ring for the loop: single issuer, with deferred task work when the
/// loop waits in `io_uring_enter` itself. Hosted, cooperative task work
/// instead: deferred completions never make the ring's fd readable, so
/// tokio's epoll would sleep through them (tried: the first login hangs).
pub fn ring(hosted: bool) -> io::Result<IoUring> {
    let mut b = IoUring::builder();
    b.setup_single_issuer();
    if hosted {
        b.setup_coop_taskrun();
    } else {
        b.setup_defer_taskrun();
    }
    b.build(4096)
}

/// Handles every completion waiting; returns how many there were.
fn reap<H: Handler>(h: &mut H, done: &mut Vec<(u64, i32, u32)>) -> io::Result<usize> {
    done.clear();
    done.extend(
        h.ring()
            .completion()
            .map(|c| (c.user_data(), c.result(), c.flags())),
    );
    for &(t, res, flags) in done.iter() {
        h.completed(t, res, flags)?;
    }
    Ok(done.len())
}

/// Its own loop: one `io_uring_enter` submits what the last completions
/// queued and waits for the next.
pub fn run<H: Handler>(h: &mut H) -> io::Result<()> {
    let mut done = Vec::with_capacity(256);
    loop {
        match h.ring().submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
        reap(h, &mut done)?;
    }
}

/// Hosted on a current-thread tokio runtime: submit and reap without
/// waiting; when nothing completed, wait for the ring's fd in tokio's epoll
/// like any other socket.
pub fn run_hosted<H: Handler>(h: &mut H) -> io::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?
        .block_on(async {
            // SAFETY: the ring outlives this registration, which lives only
            // inside this block.
            let afd = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    h.ring().as_raw_fd(),
                    tokio::io::Interest::READABLE,
                )
            }
            .map_err(io::Error::from)?;
            let mut done = Vec::with_capacity(256);
            loop {
                if !h.ring().submission().is_empty() {
                    h.ring().submit()?;
                }
                if reap(h, &mut done)? == 0 && h.ring().submission().is_empty() {
                    afd.readable().await?.clear_ready();
                }
            }
        })
}
