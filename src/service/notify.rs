//! The service manager's notification protocol (sd_notify(3)): newline-
//! separated `KEY=VALUE` lines in one datagram to `$NOTIFY_SOCKET`.
//!
//! The sender is ours rather than the `sd-notify` crate's because that crate
//! connects to the variable as a file path only, and systemd (and any test
//! or container runtime that binds its own socket) may hand out an abstract
//! address, written `@name`. Without `$NOTIFY_SOCKET` every call is a no-op,
//! so running outside systemd costs nothing.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable systemd sets for `Type=notify` services.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// A connection to the service manager, or nothing when there is none.
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET`; an unusable value is logged and ignored, since
    /// failing to notify must not stop the pooler from serving.
    pub fn from_env() -> Notifier {
        let Some(value) = std::env::var_os(NOTIFY_SOCKET) else {
            return Notifier { target: None };
        };
        let value = value.to_string_lossy().into_owned();
        match open(&value) {
            Ok(target) => Notifier {
                target: Some(target),
            },
            Err(e) => {
                tracing::warn!(socket = %value, error = %e, "cannot use NOTIFY_SOCKET; not notifying the service manager");
                Notifier { target: None }
            }
        }
    }

    /// READY=1: start-up finished, or a reload did.
    pub fn ready(&self, status: &str) {
        self.send(&format!(
            "READY=1\nSTATUS={status}\nMAINPID={}\n",
            std::process::id()
        ));
    }

    /// RELOADING=1, with the monotonic time systemd 253+ requires beside it.
    pub fn reloading(&self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading\n",
            monotonic_usec()
        ));
    }

    /// STOPPING=1: shutdown has begun.
    pub fn stopping(&self, status: &str) {
        self.send(&format!("STOPPING=1\nSTATUS={status}\n"));
    }

    /// MAINPID of the process that took over, which the service manager
    /// follows from now on (this one drains and exits); not STOPPING, since
    /// the service goes on.
    pub fn handed_over(&self, pid: u32) {
        self.send(&format!(
            "MAINPID={pid}\nSTATUS=handed over to process {pid}; draining\n"
        ));
    }

    fn send(&self, msg: &str) {
        let Some((sock, addr)) = &self.target else {
            return;
        };
        if let Err(e) = sock.send_to_addr(msg.as_bytes(), addr) {
            tracing::warn!(error = %e, "cannot notify the service manager");
        }
    }
}

/// An unbound datagram socket and the address `value` names: a path, or an
/// abstract name after `@`.
fn open(value: &str) -> io::Result<(UnixDatagram, SocketAddr)> {
    let addr = match value.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None if value.starts_with('/') => SocketAddr::from_pathname(value)?,
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "neither an absolute path nor an @abstract name",
            ))
        }
    };
    let sock = UnixDatagram::unbound()?;
    // A full receive queue must not stall the runtime thread sending on it.
    sock.set_nonblocking(true)?;
    Ok((sock, addr))
}

/// CLOCK_MONOTONIC in microseconds, the clock systemd compares with.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs * 1_000_000 + nanos / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn sends_to_an_abstract_address() {
        let name = format!("pgharbor-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let server = UnixDatagram::bind_addr(&addr).unwrap();
        let (sock, to) = open(&format!("@{name}")).unwrap();
        let n = Notifier {
            target: Some((sock, to)),
        };
        n.ready("up");
        assert!(recv(&server).starts_with("READY=1\nSTATUS=up\n"));
        n.reloading();
        let msg = recv(&server);
        assert!(msg.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{msg}");
        n.stopping("bye");
        assert_eq!(recv(&server), "STOPPING=1\nSTATUS=bye\n");
    }

    #[test]
    fn refuses_a_relative_path() {
        assert!(open("notify.sock").is_err());
        assert!(open("/run/x/notify").is_ok());
    }
}
