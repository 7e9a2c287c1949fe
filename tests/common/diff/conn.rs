//! The harness's own client connection: a Unix socket (so that a close
//! never turns into a TCP reset that could discard bytes the peer has not
//! read yet, and a direct PostgreSQL always executes every message it was
//! sent in full), reads with deadlines, and a writer half that a thread
//! can use while the main thread reads (a client that writes several MiB
//! while the server answers must not deadlock on full socket buffers).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// Something read from a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    Msg(u8, Vec<u8>),
    Closed,
    Timeout,
    /// A length word that does not frame a message.
    Garbage(Vec<u8>),
}

/// Largest message the harness accepts (its largest legitimate replies
/// are a few MiB).
const MAX_LEN: usize = 64 << 20;

pub struct Conn {
    s: UnixStream,
    rbuf: Vec<u8>,
    eof: bool,
    /// BackendKeyData (pid, key) from the login.
    pub key: Option<(i32, i32)>,
}

impl Conn {
    pub fn connect(path: &Path, write_timeout: Duration) -> io::Result<Conn> {
        let s = UnixStream::connect(path)?;
        s.set_write_timeout(Some(write_timeout))?;
        Ok(Conn {
            s,
            rbuf: Vec::new(),
            eof: false,
            key: None,
        })
    }

    /// A second handle for a writer thread.
    pub fn writer(&self) -> io::Result<UnixStream> {
        self.s.try_clone()
    }

    pub fn send(&mut self, b: &[u8]) -> io::Result<()> {
        self.s.write_all(b)
    }

    /// Reads what is there until `deadline`; false on close or deadline.
    fn fill_once(&mut self, deadline: Instant) -> Result<(), Ev> {
        if self.eof {
            return Err(Ev::Closed);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Ev::Timeout);
        }
        let _ = self
            .s
            .set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))));
        let mut chunk = vec![0u8; 256 * 1024];
        match self.s.read(&mut chunk) {
            Ok(0) => {
                self.eof = true;
                Err(Ev::Closed)
            }
            Ok(n) => {
                self.rbuf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(Ev::Timeout)
            }
            Err(_) => {
                self.eof = true;
                Err(Ev::Closed)
            }
        }
    }

    /// The next complete message in the buffer, if any.
    fn take_msg(&mut self) -> Option<Ev> {
        if self.rbuf.len() < 5 {
            return None;
        }
        let len = u32::from_be_bytes(self.rbuf[1..5].try_into().unwrap()) as usize;
        if !(4..=MAX_LEN).contains(&len) {
            return Some(Ev::Garbage(std::mem::take(&mut self.rbuf)));
        }
        if self.rbuf.len() < 1 + len {
            return None;
        }
        let tag = self.rbuf[0];
        let body = self.rbuf[5..1 + len].to_vec();
        self.rbuf.drain(..1 + len);
        Some(Ev::Msg(tag, body))
    }

    pub fn read_msg(&mut self, deadline: Instant) -> Ev {
        loop {
            if let Some(ev) = self.take_msg() {
                return ev;
            }
            if let Err(ev) = self.fill_once(deadline) {
                if ev == Ev::Closed && !self.rbuf.is_empty() {
                    return Ev::Garbage(std::mem::take(&mut self.rbuf));
                }
                return ev;
            }
        }
    }

    /// Whether the server has already ended its answer (a ReadyForQuery or
    /// an ErrorResponse is buffered, or the connection closed), reading
    /// whatever arrives within 1 ms. Consumes nothing.
    pub fn answered(&mut self) -> bool {
        let _ = self.fill_once(Instant::now() + Duration::from_millis(1));
        if self.eof {
            return true;
        }
        let mut pos = 0;
        while self.rbuf.len() >= pos + 5 {
            let tag = self.rbuf[pos];
            let len = u32::from_be_bytes(self.rbuf[pos + 1..pos + 5].try_into().unwrap()) as usize;
            if tag == b'Z' || tag == b'E' {
                return true;
            }
            if len < 4 {
                return true;
            }
            pos += 1 + len;
        }
        false
    }

    /// Closes both directions now.
    pub fn close(self) {
        let _ = self.s.shutdown(std::net::Shutdown::Both);
    }
}

/// A frontend startup packet (protocol 3.0).
pub fn startup(params: &[(&str, &str)]) -> Vec<u8> {
    crate::common::wire::startup_packet(3 << 16, params)
}

/// CancelRequest for (pid, key).
pub fn cancel_packet(pid: i32, key: i32) -> Vec<u8> {
    let mut pkt = 16u32.to_be_bytes().to_vec();
    pkt.extend_from_slice(&80877102u32.to_be_bytes());
    pkt.extend_from_slice(&pid.to_be_bytes());
    pkt.extend_from_slice(&key.to_be_bytes());
    pkt
}

fn simple_query(sql: &str) -> Vec<u8> {
    let mut b = vec![b'Q'];
    b.extend_from_slice(&((sql.len() + 5) as u32).to_be_bytes());
    b.extend_from_slice(sql.as_bytes());
    b.push(0);
    b
}

/// A superuser connection straight to PostgreSQL for setup and for looking
/// at backends from outside (pg_stat_activity, pg_locks).
pub struct Admin {
    c: Conn,
}

/// Rows of a simple query, text values.
pub type Rows = Vec<Vec<Option<String>>>;

impl Admin {
    pub fn connect(socket: &Path, db: &str) -> Admin {
        let mut c = Conn::connect(socket, Duration::from_secs(30)).expect("admin connect");
        c.send(&startup(&[
            ("user", "postgres"),
            ("database", db),
            ("application_name", "pgharbor-diff-admin"),
        ]))
        .expect("admin startup");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match c.read_msg(deadline) {
                Ev::Msg(b'Z', _) => break,
                Ev::Msg(b'E', body) => panic!("admin login: {}", String::from_utf8_lossy(&body)),
                Ev::Msg(b'R', body) if body[..4] != [0, 0, 0, 0] => {
                    panic!("admin login asks for a password")
                }
                Ev::Msg(..) => {}
                other => panic!("admin login: {other:?}"),
            }
        }
        let mut a = Admin { c };
        a.exec("SET lock_timeout = '5s'; SET statement_timeout = '60s'")
            .expect("admin settings");
        a
    }

    pub fn query(&mut self, sql: &str) -> Result<Rows, String> {
        self.c
            .send(&simple_query(sql))
            .map_err(|e| format!("admin send: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut rows = Vec::new();
        let mut err = None;
        loop {
            match self.c.read_msg(deadline) {
                Ev::Msg(b'D', body) => rows.push(super::super::wire::data_row(&body)),
                Ev::Msg(b'E', body) => {
                    err = Some(super::super::wire::ErrorFields::parse(&body).message)
                }
                Ev::Msg(b'Z', _) => break,
                Ev::Msg(..) => {}
                other => panic!("admin connection: {other:?} during {sql}"),
            }
        }
        match err {
            Some(e) => Err(format!("{sql}: {e}")),
            None => Ok(rows),
        }
    }

    pub fn exec(&mut self, sql: &str) -> Result<(), String> {
        self.query(sql).map(|_| ())
    }

    /// First column of the first row.
    pub fn scalar(&mut self, sql: &str) -> Result<String, String> {
        let rows = self.query(sql)?;
        Ok(rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .unwrap_or_default())
    }
}
