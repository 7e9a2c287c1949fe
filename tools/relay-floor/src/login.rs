//! `--login`: the floor of a login rather than of a transaction. The
//! program answers every client itself, as PostgreSQL 15 answers a
//! trust-authenticated login (AuthenticationOk, the twelve parameters it
//! reports, BackendKeyData, ReadyForQuery), then waits for the client's
//! Terminate or close and closes. No backend, no authentication work: what
//! is left is the sockets' cost, on tokio or on an io_uring loop, to set
//! beside PgBouncer's and pgharbor's trust logins under `pgbench -C`.
//!
//! The startup packet is assumed to arrive in one read (libpq sends it in
//! one write); an SSLRequest is refused with `N` and the real startup
//! packet read after it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use io_uring::{cqueue, opcode, types, IoUring};
use slab::Slab;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::net::Accepted;
use crate::ringloop::{self, Handler};
use crate::Listen;

const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// What PostgreSQL 15 sends after a trust login, byte for byte the same
/// for every client.
fn greeting() -> Vec<u8> {
    let mut out = Vec::new();
    let mut msg = |tag: u8, body: &[u8]| {
        out.push(tag);
        out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        out.extend_from_slice(body);
    };
    msg(b'R', &0u32.to_be_bytes());
    for (k, v) in [
        ("application_name", "pgbench"),
        ("client_encoding", "UTF8"),
        ("DateStyle", "ISO, MDY"),
        ("default_transaction_read_only", "off"),
        ("in_hot_standby", "off"),
        ("integer_datetimes", "on"),
        ("IntervalStyle", "postgres"),
        ("is_superuser", "on"),
        ("server_encoding", "UTF8"),
        ("server_version", "15.18"),
        ("session_authorization", "bench"),
        ("standard_conforming_strings", "on"),
        ("TimeZone", "Etc/UTC"),
    ] {
        let mut body = k.as_bytes().to_vec();
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
        msg(b'S', &body);
    }
    msg(b'K', &[0, 0, 0, 1, 0, 0, 0, 2]);
    msg(b'Z', b"I");
    out
}

/// tokio: one task per client.
pub fn run_tokio(listen: &Listen) -> io::Result<()> {
    let hello: &'static [u8] = greeting().leak();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    async fn serve<S>(mut s: S, hello: &'static [u8])
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let mut buf = [0u8; 1024];
        let Ok(mut n) = s.read(&mut buf).await else {
            return;
        };
        if buf[..n] == SSL_REQUEST {
            if s.write_all(b"N").await.is_err() {
                return;
            }
            let Ok(m) = s.read(&mut buf).await else {
                return;
            };
            n = m;
        }
        if n == 0 || s.write_all(hello).await.is_err() {
            return;
        }
        let _ = s.read(&mut buf).await;
    }
    rt.block_on(crate::net::accept_loop(listen, |c| match c {
        Accepted::Unix(s) => drop(tokio::spawn(serve(s, hello))),
        Accepted::Tcp(s) => drop(tokio::spawn(serve(s, hello))),
    }))
}

/// Where a client's login is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Reading the startup packet (or an SSLRequest).
    Startup,
    /// Sent `N` to an SSLRequest.
    Refused,
    /// Sending the greeting.
    Greeting,
    /// Waiting for Terminate or close.
    Waiting,
    /// Closing the fd.
    Closing,
}

struct Conn {
    fd: RawFd,
    step: Step,
    buf: Box<[u8; 1024]>,
}

const ACCEPT: u64 = u64::MAX;

/// The io_uring login server's state: every step of every login is an
/// operation on the ring, the close too.
struct Server {
    ring: IoUring,
    conns: Slab<Conn>,
    hello: Vec<u8>,
    listener: OwnedFd,
    tcp: bool,
}

impl Server {
    fn new(listen: &Listen, ring: IoUring) -> io::Result<Server> {
        let listener = crate::net::bind(listen)?;
        let mut s = Server {
            ring,
            conns: Slab::new(),
            hello: greeting(),
            listener,
            tcp: matches!(listen, Listen::Tcp(_)),
        };
        s.arm_accept()?;
        Ok(s)
    }

    fn push(&mut self, e: io_uring::squeue::Entry) -> io::Result<()> {
        // SAFETY: buffers live in `conns` (boxed) or `hello` until their
        // operation completes: a connection is freed only after its close.
        while unsafe { self.ring.submission().push(&e) }.is_err() {
            self.ring.submit()?;
        }
        Ok(())
    }

    fn arm_accept(&mut self) -> io::Result<()> {
        let e = opcode::AcceptMulti::new(types::Fd(self.listener.as_raw_fd()))
            .build()
            .user_data(ACCEPT);
        self.push(e)
    }
}

impl Handler for Server {
    fn ring(&mut self) -> &mut IoUring {
        &mut self.ring
    }

    fn completed(&mut self, id: u64, res: i32, flags: u32) -> io::Result<()> {
        if id == ACCEPT {
            if !cqueue::more(flags) {
                self.arm_accept()?;
            }
            if res < 0 {
                return Ok(());
            }
            if self.tcp {
                crate::net::nodelay(res);
            }
            let conn = Conn {
                fd: res,
                step: Step::Startup,
                buf: Box::new([0; 1024]),
            };
            let slot = self.conns.insert(conn);
            let c = &mut self.conns[slot];
            let e = opcode::Recv::new(types::Fd(c.fd), c.buf.as_mut_ptr(), 1024).build();
            return self.push(e.user_data(slot as u64));
        }
        let slot = id as usize;
        let Some(c) = self.conns.get_mut(slot) else {
            return Ok(());
        };
        let fd = types::Fd(c.fd);
        let next = match (c.step, res) {
            (Step::Closing, _) => {
                self.conns.remove(slot);
                return Ok(());
            }
            (Step::Startup, n) if n > 0 && c.buf[..n as usize] == SSL_REQUEST => {
                c.step = Step::Refused;
                opcode::Send::new(fd, b"N".as_ptr(), 1).build()
            }
            (Step::Startup, n) if n > 0 => {
                c.step = Step::Greeting;
                opcode::Send::new(fd, self.hello.as_ptr(), self.hello.len() as u32)
                    .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                    .build()
            }
            (Step::Refused, 1) => {
                c.step = Step::Startup;
                opcode::Recv::new(fd, c.buf.as_mut_ptr(), 1024).build()
            }
            (Step::Greeting, n) if n as usize == self.hello.len() => {
                c.step = Step::Waiting;
                opcode::Recv::new(fd, c.buf.as_mut_ptr(), 1024).build()
            }
            // Terminate, close, or anything unexpected: close.
            _ => {
                c.step = Step::Closing;
                opcode::Close::new(fd).build()
            }
        };
        self.push(next.user_data(id))?;
        Ok(())
    }
}

/// io_uring: its own loop, or (`hosted`) the loop as one tokio task, as
/// the relay's `hosted` mode runs.
pub fn run_uring(listen: &Listen, hosted: bool) -> io::Result<()> {
    let mut server = Server::new(listen, ringloop::ring(hosted)?)?;
    if hosted {
        ringloop::run_hosted(&mut server)
    } else {
        ringloop::run(&mut server)
    }
}
