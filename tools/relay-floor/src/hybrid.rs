//! The hybrid relay: tokio's current-thread runtime (epoll) runs the tasks,
//! as in pgharbor, but the sockets' receives and sends go through one
//! io_uring per thread. Tasks only queue operations; one driver task
//! submits everything queued since its last turn in a single
//! `io_uring_enter`, reaps the completions and wakes their tasks. The ring's
//! fd sits in tokio's epoll set, readable when completions wait.
//!
//! The question it answers: can a tokio program keep its tasks and futures
//! and still get io_uring's batching, or does the extra wake-up per
//! operation eat the saving?

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Poll, Waker};

use io_uring::{opcode, types, IoUring};
use slab::Slab;
use tokio::io::unix::AsyncFd;

use crate::Listen;

const BUF: usize = 16 * 1024;

/// `--plain`: the kernel's default task work (it may interrupt the
/// thread) instead of cooperative task work.
pub static PLAIN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--yield`: the driver yields after reaping instead of waiting.
pub static YIELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One queued or running operation's slot.
enum Slot {
    /// Submitted (or queued); the task waits with this waker.
    Waiting(Option<Waker>),
    /// Completed with this result; the task has not looked yet.
    Done(i32),
}

/// The thread's ring and its operations' slots.
struct Ring {
    ring: IoUring,
    slots: Slab<Slot>,
    /// The driver's waker, to call when something is queued.
    driver: Option<Waker>,
    /// Entries queued since the driver's last submit.
    queued: usize,
}

thread_local! {
    static RING: RefCell<Option<Ring>> = const { RefCell::new(None) };
}

fn with_ring<R>(f: impl FnOnce(&mut Ring) -> R) -> R {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        let ring = r.as_mut().expect("the ring is set up before any task runs");
        f(ring)
    })
}

/// Queues `entry` and waits for its result. The buffer `entry` points at
/// must stay put until this returns, which the callers' owned buffers do
/// (and a relay task is never dropped mid-operation: it runs to the end).
async fn submit(entry: io_uring::squeue::Entry) -> i32 {
    let slot = with_ring(|r| {
        let slot = r.slots.insert(Slot::Waiting(None));
        let e = entry.user_data(slot as u64);
        // SAFETY: see the function's doc: the buffer outlives the operation.
        while unsafe { r.ring.submission().push(&e) }.is_err() {
            let _ = r.ring.submit();
        }
        r.queued += 1;
        if let Some(w) = r.driver.take() {
            w.wake();
        }
        slot
    });
    poll_fn(|cx| {
        with_ring(|r| match &mut r.slots[slot] {
            Slot::Done(res) => {
                let res = *res;
                r.slots.remove(slot);
                Poll::Ready(res)
            }
            Slot::Waiting(w) => {
                *w = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    })
    .await
}

/// Submits what the tasks queued, reaps completions, wakes their tasks.
async fn drive(ring_fd: RawFd) -> io::Result<()> {
    // SAFETY: the ring (and its fd) lives in the thread-local for the
    // whole process, longer than this task.
    let afd = unsafe { AsyncFd::register_with_interest(ring_fd, tokio::io::Interest::READABLE) }
        .map_err(io::Error::from)?;
    loop {
        let reaped = with_ring(|r| -> io::Result<usize> {
            if r.queued > 0 {
                r.ring.submit()?;
                r.queued = 0;
            }
            let mut n = 0;
            let done: Vec<(u64, i32)> = r
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (slot, res) in done {
                n += 1;
                if let Slot::Waiting(Some(w)) =
                    std::mem::replace(&mut r.slots[slot as usize], Slot::Done(res))
                {
                    w.wake();
                }
            }
            Ok(n)
        })?;
        if reaped > 0 && YIELD.load(std::sync::atomic::Ordering::Relaxed) {
            tokio::task::yield_now().await;
            continue;
        }
        // Wait for a task to queue (the tasks just woken run first, so what
        // they queue goes in one submit) or for the ring's fd. Not
        // `yield_now`: tokio answers a yield with an `epoll_wait` that
        // does not block.
        let queued = poll_fn(|cx| {
            with_ring(|r| {
                if r.queued > 0 {
                    return Poll::Ready(true);
                }
                r.driver = Some(cx.waker().clone());
                Poll::Pending
            })
        });
        tokio::select! {
            biased;
            _ = queued => {}
            g = afd.readable() => { g?.clear_ready(); }
        }
    }
}

async fn copy(from: RawFd, to: RawFd) {
    let mut buf = vec![0u8; BUF].into_boxed_slice();
    loop {
        let e = opcode::Recv::new(types::Fd(from), buf.as_mut_ptr(), BUF as u32).build();
        let n = submit(e).await;
        if n <= 0 {
            break;
        }
        let mut sent = 0;
        while sent < n as usize {
            let rest = &buf[sent..n as usize];
            let e = opcode::Send::new(types::Fd(to), rest.as_ptr(), rest.len() as u32).build();
            let m = submit(e).await;
            if m <= 0 {
                return;
            }
            sent += m as usize;
        }
    }
    // SAFETY: both fds are open until the pair's tasks have both ended.
    unsafe {
        libc::shutdown(from, libc::SHUT_RDWR);
        libc::shutdown(to, libc::SHUT_RDWR);
    }
}

/// Serves until an error, one thread: tokio for tasks, io_uring for I/O.
pub fn run(listen: &Listen, backend: &std::path::Path) -> io::Result<()> {
    let mut b = IoUring::builder();
    b.setup_single_issuer();
    // Not deferred task work: its completions wait for an
    // `io_uring_enter` and never make the ring's fd readable, so tokio's
    // epoll would sleep through them (tried: the first login hangs).
    if !PLAIN.load(std::sync::atomic::Ordering::Relaxed) {
        b.setup_coop_taskrun();
    }
    let ring = b.build(4096)?;
    let ring_fd = ring.as_raw_fd();
    RING.with(|r| {
        *r.borrow_mut() = Some(Ring {
            ring,
            slots: Slab::new(),
            driver: None,
            queued: 0,
        })
    });
    crate::local::serve(listen, backend, drive(ring_fd), copy)
}
