//! The io_uring relay: one ring, one thread. Each client is a pair of
//! sockets with one buffer per direction; a direction is always either
//! receiving into its buffer or sending it on, so it needs no queue. All
//! the sends and receives that the completions of one wait call for go to
//! the kernel in the next wait's `io_uring_enter`.

use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use slab::Slab;

use crate::frames::Frames;
use crate::ringloop::{self, Handler};
use crate::Listen;

const BUF: usize = 16 * 1024;
/// `user_data` of the listener's multishot accept.
const ACCEPT: u64 = u64::MAX;

/// Client to backend, or backend to client.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Up = 0,
    Down = 1,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Recv = 0,
    Send = 1,
}

fn token(slot: usize, dir: Dir, op: Op) -> u64 {
    ((slot as u64) << 2) | ((op as u64) << 1) | dir as u64
}

fn untoken(t: u64) -> (usize, Dir, Op) {
    let dir = if t & 1 == 0 { Dir::Up } else { Dir::Down };
    let op = if t & 2 == 0 { Op::Recv } else { Op::Send };
    ((t >> 2) as usize, dir, op)
}

/// One direction's buffer: `len` bytes received, `sent` of them sent on.
struct Half {
    buf: Box<[u8]>,
    len: usize,
    sent: usize,
    /// `--scan`: the direction's framing.
    frames: Frames,
}

/// A client and its backend connection.
struct Pair {
    client: RawFd,
    backend: RawFd,
    halves: [Half; 2],
    /// Submitted operations whose completion has not been seen: the fds
    /// close only when this is zero, so no operation outlives its fd.
    inflight: u32,
    closing: bool,
}

impl Pair {
    /// (read from, write to) for a direction.
    fn ends(&self, dir: Dir) -> (RawFd, RawFd) {
        match dir {
            Dir::Up => (self.client, self.backend),
            Dir::Down => (self.backend, self.client),
        }
    }
}

struct Relay {
    ring: IoUring,
    pairs: Slab<Pair>,
    link: bool,
    backend: std::path::PathBuf,
    listener: RawFd,
    /// Accepted sockets are TCP: they get `TCP_NODELAY`.
    tcp: bool,
    /// `--scan`: frame every received chunk before sending it on.
    scan: bool,
}

impl Relay {
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY: every buffer an entry points at is a `Box` owned by a live
        // pair, which is not freed before its operations complete.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.ring.submit()?;
        }
        Ok(())
    }

    fn arm_accept(&mut self) -> io::Result<()> {
        let e = opcode::AcceptMulti::new(types::Fd(self.listener))
            .build()
            .user_data(ACCEPT);
        self.push(e)
    }

    fn recv(&mut self, slot: usize, dir: Dir) -> io::Result<()> {
        let Some(p) = self.pairs.get_mut(slot) else {
            return Ok(());
        };
        let (from, _) = p.ends(dir);
        let h = &mut p.halves[dir as usize];
        let e = opcode::Recv::new(types::Fd(from), h.buf.as_mut_ptr(), BUF as u32)
            .build()
            .user_data(token(slot, dir, Op::Recv));
        p.inflight += 1;
        self.push(e)
    }

    fn send(&mut self, slot: usize, dir: Dir) -> io::Result<()> {
        let link = self.link;
        let Some(p) = self.pairs.get_mut(slot) else {
            return Ok(());
        };
        let (from, to) = p.ends(dir);
        let h = &mut p.halves[dir as usize];
        let rest = &h.buf[h.sent..h.len];
        let mut send = opcode::Send::new(types::Fd(to), rest.as_ptr(), rest.len() as u32);
        if link {
            send = send.flags(libc::MSG_WAITALL);
        }
        let mut e = send.build().user_data(token(slot, dir, Op::Send));
        if link {
            e = e.flags(squeue::Flags::IO_LINK);
        }
        p.inflight += 1;
        let recv = link.then(|| {
            p.inflight += 1;
            opcode::Recv::new(types::Fd(from), h.buf.as_mut_ptr(), BUF as u32)
                .build()
                .user_data(token(slot, dir, Op::Recv))
        });
        self.push(e)?;
        if let Some(r) = recv {
            self.push(r)?;
        }
        Ok(())
    }

    fn accepted(&mut self, fd: RawFd) -> io::Result<()> {
        if self.tcp {
            crate::net::nodelay(fd);
        }
        let backend = match UnixStream::connect(&self.backend) {
            Ok(s) => s.into_raw_fd(),
            Err(e) => {
                eprintln!("relay-floor: backend: {e}");
                // SAFETY: `fd` came from accept and is ours alone.
                unsafe { libc::close(fd) };
                return Ok(());
            }
        };
        let half = |frames| Half {
            buf: vec![0u8; BUF].into_boxed_slice(),
            len: 0,
            sent: 0,
            frames,
        };
        let pair = Pair {
            client: fd,
            backend,
            halves: [half(Frames::client()), half(Frames::default())],
            inflight: 0,
            closing: false,
        };
        let slot = self.pairs.insert(pair);
        self.recv(slot, Dir::Up)?;
        self.recv(slot, Dir::Down)
    }

    /// Shuts both sockets so every pending operation completes; the fds
    /// close when the last one has.
    fn close(&mut self, slot: usize) {
        if let Some(p) = self.pairs.get_mut(slot) {
            if !p.closing {
                p.closing = true;
                // SAFETY: both fds are open until the pair is freed.
                unsafe {
                    libc::shutdown(p.client, libc::SHUT_RDWR);
                    libc::shutdown(p.backend, libc::SHUT_RDWR);
                }
            }
        }
    }

    fn on_pair(&mut self, slot: usize, dir: Dir, op: Op, res: i32) -> io::Result<()> {
        let Some(p) = self.pairs.get_mut(slot) else {
            return Ok(());
        };
        p.inflight -= 1;
        if p.closing || res <= 0 {
            self.close(slot);
            if let Some(p) = self.pairs.get(slot) {
                if p.inflight == 0 {
                    // SAFETY: no operation on either fd is pending.
                    unsafe {
                        libc::close(p.client);
                        libc::close(p.backend);
                    }
                    self.pairs.remove(slot);
                }
            }
            return Ok(());
        }
        let h = &mut p.halves[dir as usize];
        match op {
            Op::Recv => {
                h.len = res as usize;
                h.sent = 0;
                if self.scan && !h.frames.scan(&h.buf[..h.len]) {
                    self.close(slot);
                    return Ok(());
                }
                self.send(slot, dir)
            }
            Op::Send => {
                h.sent += res as usize;
                if h.sent < h.len {
                    if self.link {
                        // A linked receive was cancelled by the short send.
                        self.close(slot);
                        return Ok(());
                    }
                    self.send(slot, dir)
                } else if self.link {
                    Ok(())
                } else {
                    self.recv(slot, dir)
                }
            }
        }
    }
}

impl Handler for Relay {
    fn ring(&mut self) -> &mut IoUring {
        &mut self.ring
    }

    fn completed(&mut self, t: u64, res: i32, flags: u32) -> io::Result<()> {
        if t == ACCEPT {
            if res >= 0 {
                self.accepted(res)?;
            }
            if !cqueue::more(flags) {
                self.arm_accept()?;
            }
            return Ok(());
        }
        let (slot, dir, op) = untoken(t);
        self.on_pair(slot, dir, op, res)
    }
}

/// Serves until an error: accepts on `listen`, relays each client to a new
/// connection on `backend`; `hosted`, as one task on tokio's current-thread
/// runtime, which could run anything else beside it.
pub fn run(
    listen: &Listen,
    backend: &Path,
    link: bool,
    scan: bool,
    hosted: bool,
) -> io::Result<()> {
    let listener = crate::net::bind(listen)?;
    let mut relay = Relay {
        ring: ringloop::ring(hosted)?,
        pairs: Slab::new(),
        link,
        backend: backend.to_path_buf(),
        listener: listener.as_raw_fd(),
        tcp: matches!(listen, Listen::Tcp(_)),
        scan,
    };
    relay.arm_accept()?;
    if hosted {
        ringloop::run_hosted(&mut relay)
    } else {
        ringloop::run(&mut relay)
    }
}
