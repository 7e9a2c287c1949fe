//! The multishot relay: tokio's current-thread runtime runs the tasks, as
//! in the hybrid, but each socket's receive is one multishot receive on
//! the thread's io_uring, armed once: the kernel fills a buffer from a
//! shared pool for every arrival and posts a completion, with no system
//! call and no re-arming per message. Sends stay plain `send(2)` calls
//! from the task. Per message that is one tokio wake-up (the completion
//! wakes the task that sends it on), where the hybrid pays two and plain
//! tokio pays a `recv(2)`.
//!
//! Sends block (the sockets are blocking for io_uring's sake): fine for
//! pgbench's small messages, not for a relay that must never stall.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Poll, Waker};

use io_uring::{cqueue, opcode, types, IoUring};
use slab::Slab;
use tokio::io::unix::AsyncFd;

use crate::Listen;

/// Pool buffer size and count: a message larger than a buffer arrives in
/// several completions, in order.
const BSZ: usize = 4096;
const NBUF: u16 = 4096;
/// The pool's buffer group.
const GROUP: u16 = 7;
/// `user_data` of buffer hand-backs.
const PROVIDE: u64 = u64::MAX;

/// A receiving socket's arrivals, waiting for its task.
#[derive(Default)]
struct Inbox {
    /// (buffer id, bytes) in arrival order.
    ready: VecDeque<(u16, u32)>,
    /// The peer closed or the receive failed.
    ended: bool,
    waker: Option<Waker>,
    fd: RawFd,
}

struct Ms {
    ring: IoUring,
    pool: Box<[u8]>,
    inboxes: Slab<Inbox>,
    driver: Option<Waker>,
    queued: usize,
}

thread_local! {
    static MS: RefCell<Option<Ms>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut Ms) -> R) -> R {
    MS.with(|m| {
        f(m.borrow_mut()
            .as_mut()
            .expect("set up before any task runs"))
    })
}

impl Ms {
    fn push(&mut self, e: io_uring::squeue::Entry) {
        // SAFETY: entries point into `pool`, which lives as long as the ring.
        while unsafe { self.ring.submission().push(&e) }.is_err() {
            let _ = self.ring.submit();
        }
        if self.queued == 0 {
            if let Some(w) = self.driver.take() {
                w.wake();
            }
        }
        self.queued += 1;
    }

    fn arm(&mut self, id: usize) {
        let fd = self.inboxes.get(id).map_or(-1, |b| b.fd);
        self.push(
            opcode::RecvMulti::new(types::Fd(fd), GROUP)
                .build()
                .user_data(id as u64),
        );
    }

    fn provide(&mut self, bid: u16) {
        let addr = self.pool[bid as usize * BSZ..].as_mut_ptr();
        self.push(
            opcode::ProvideBuffers::new(addr, BSZ as i32, 1, GROUP, bid)
                .build()
                .user_data(PROVIDE),
        );
    }

    fn completed(&mut self, id: u64, res: i32, flags: u32) {
        if id == PROVIDE {
            return;
        }
        let id = id as usize;
        let Some(b) = self.inboxes.get_mut(id) else {
            return;
        };
        if res > 0 {
            if let Some(bid) = cqueue::buffer_select(flags) {
                b.ready.push_back((bid, res as u32));
            }
        } else if res != -libc::ENOBUFS {
            b.ended = true;
        }
        if let Some(w) = b.waker.take() {
            w.wake();
        }
        if !cqueue::more(flags) && !b.ended {
            self.arm(id);
        }
    }
}

async fn drive(ring_fd: RawFd) -> io::Result<()> {
    // SAFETY: the ring lives in the thread-local for the whole process.
    let afd = unsafe { AsyncFd::register_with_interest(ring_fd, tokio::io::Interest::READABLE) }
        .map_err(io::Error::from)?;
    let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(256);
    loop {
        with(|m| -> io::Result<()> {
            if m.queued > 0 {
                m.ring.submit()?;
                m.queued = 0;
            }
            done.clear();
            done.extend(
                m.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for &(id, res, flags) in &done {
                m.completed(id, res, flags);
            }
            Ok(())
        })?;
        let queued = poll_fn(|cx| {
            with(|m| {
                if m.queued > 0 {
                    return Poll::Ready(());
                }
                m.driver = Some(cx.waker().clone());
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

fn send_all(fd: RawFd, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        // SAFETY: `data` is readable for its length; `fd` is open.
        let n = unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) };
        if n <= 0 {
            return false;
        }
        data = &data[n as usize..];
    }
    true
}

async fn copy(from: RawFd, to: RawFd) {
    let id = with(|m| {
        let inbox = Inbox {
            fd: from,
            ..Inbox::default()
        };
        let id = m.inboxes.insert(inbox);
        m.arm(id);
        id
    });
    loop {
        let next = poll_fn(|cx| {
            with(|m| {
                let Some(b) = m.inboxes.get_mut(id) else {
                    return Poll::Ready(None);
                };
                if let Some(x) = b.ready.pop_front() {
                    Poll::Ready(Some(x))
                } else if b.ended {
                    Poll::Ready(None)
                } else {
                    b.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            })
        })
        .await;
        let Some((bid, len)) = next else { break };
        let ok = with(|m| {
            let at = bid as usize * BSZ;
            let ok = send_all(to, &m.pool[at..at + len as usize]);
            m.provide(bid);
            ok
        });
        if !ok {
            break;
        }
    }
    // SAFETY: both fds stay open until the pair's tasks have ended; the
    // shutdown ends the other direction's receive.
    unsafe {
        libc::shutdown(from, libc::SHUT_RDWR);
        libc::shutdown(to, libc::SHUT_RDWR);
    }
    // Wait for the multishot receive to end before the fd may close: its
    // last completion has no MORE flag and marks the inbox ended.
    poll_fn(|cx| {
        with(|m| match m.inboxes.get_mut(id) {
            Some(b) if !b.ended => {
                b.waker = Some(cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(()),
        })
    })
    .await;
    with(|m| {
        if let Some(b) = m.inboxes.try_remove(id) {
            for (bid, _) in b.ready {
                m.provide(bid);
            }
        }
    });
}

/// Serves until an error, one thread: tokio for tasks and sends, one
/// multishot io_uring receive per socket.
pub fn run(listen: &Listen, backend: &std::path::Path) -> io::Result<()> {
    let mut b = IoUring::builder();
    b.setup_single_issuer().setup_coop_taskrun();
    let ring = b.build(4096)?;
    let ring_fd = ring.as_raw_fd();
    let mut ms = Ms {
        ring,
        pool: vec![0u8; BSZ * NBUF as usize].into_boxed_slice(),
        inboxes: Slab::new(),
        driver: None,
        queued: 0,
    };
    let addr = ms.pool.as_mut_ptr();
    ms.push(
        opcode::ProvideBuffers::new(addr, BSZ as i32, NBUF, GROUP, 0)
            .build()
            .user_data(PROVIDE),
    );
    ms.ring.submit_and_wait(1)?;
    if let Some(c) = ms.ring.completion().next() {
        if c.result() < 0 {
            return Err(io::Error::from_raw_os_error(-c.result()));
        }
    }
    ms.queued = 0;
    MS.with(|m| *m.borrow_mut() = Some(ms));
    crate::local::serve(listen, backend, drive(ring_fd), copy)
}
