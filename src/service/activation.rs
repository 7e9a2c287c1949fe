//! Socket activation: listening sockets a service manager opened and passed
//! down as descriptors 3.. (`LISTEN_FDS`, `LISTEN_PID`, `LISTEN_FDNAMES`;
//! sd_listen_fds(3)), parsed by the `sd-notify` crate.
//!
//! An inherited socket is matched to a configured listener by its own local
//! address: a TCP socket by IP and port (`listen.addresses` × `listen.port`),
//! a Unix socket by its path (`<unix_socket_dir>/.s.PGSQL.<port>`). The
//! config stays the one description of what pgharbor serves, so a socket
//! unit that passes something the config does not name is an error at start,
//! not a listener nobody configured a TLS policy for.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use socket2::{Domain, Socket, Type};

/// Why the inherited sockets cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    /// LISTEN_FDS, LISTEN_PID or LISTEN_FDNAMES is malformed.
    #[error("socket activation: {0}")]
    Env(std::io::Error),
    /// A descriptor is not a listening stream socket.
    #[error(
        "socket activation: descriptor {fd} ({name}) is not a listening TCP or Unix stream socket"
    )]
    NotListening {
        /// Descriptor.
        fd: RawFd,
        /// Its LISTEN_FDNAMES entry.
        name: String,
    },
    /// A descriptor could not be inspected.
    #[error("socket activation: descriptor {fd} ({name}): {source}")]
    Inspect {
        /// Descriptor.
        fd: RawFd,
        /// Its LISTEN_FDNAMES entry.
        name: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Sockets the config does not name.
    #[error("socket activation passed {0}, which the config does not name; add it to listen.addresses/listen.port/listen.unix_socket_dir or remove it from the socket unit")]
    Unused(String),
}

/// The inherited listening sockets not yet claimed by a configured address.
#[derive(Debug, Default)]
pub struct Inherited {
    tcp: Vec<(SocketAddr, TcpListener)>,
    unix: Vec<(PathBuf, UnixListener)>,
}

impl Inherited {
    /// Takes the sockets passed to this process; none when LISTEN_PID names
    /// another process (the variables were inherited from a parent).
    pub fn from_env() -> Result<Inherited, ActivationError> {
        let fds = sd_notify::listen_fds_with_names().map_err(ActivationError::Env)?;
        let mut inherited = Inherited::default();
        for (fd, name) in fds {
            // SAFETY: sd_listen_fds hands descriptors 3..3+LISTEN_FDS to this
            // process (LISTEN_PID checked); nothing else in it owns them.
            let sock = unsafe { Socket::from_raw_fd(fd) };
            inherited.add(sock, fd, name)?;
        }
        Ok(inherited)
    }

    /// The listening sockets a takeover received from the running process,
    /// matched to the config like activated ones.
    pub fn from_fds(fds: Vec<OwnedFd>) -> Result<Inherited, ActivationError> {
        let mut inherited = Inherited::default();
        for fd in fds {
            let raw = fd.as_raw_fd();
            inherited.add(Socket::from(fd), raw, "takeover".into())?;
        }
        Ok(inherited)
    }

    /// Closes what no configured listener claimed, naming it: after a
    /// takeover that is an address the new config dropped, not an error.
    pub fn close_unused(self) -> Vec<String> {
        (self.tcp.iter().map(|(a, _)| a.to_string()))
            .chain(self.unix.iter().map(|(p, _)| p.display().to_string()))
            .collect()
    }

    fn add(&mut self, sock: Socket, fd: RawFd, name: String) -> Result<(), ActivationError> {
        let inspect = |source| ActivationError::Inspect {
            fd,
            name: name.clone(),
            source,
        };
        if sock.r#type().map_err(inspect)? != Type::STREAM
            || !sock.is_listener().map_err(inspect)?
        {
            return Err(ActivationError::NotListening { fd, name });
        }
        sock.set_nonblocking(true).map_err(inspect)?;
        let local = sock.local_addr().map_err(inspect)?;
        let domain = sock.domain().map_err(inspect)?;
        if let Some(addr) = local.as_socket() {
            tracing::info!(fd, name = %name, address = %addr, "inherited TCP socket");
            self.tcp.push((addr, sock.into()));
        } else if let (Domain::UNIX, Some(path)) = (domain, local.as_pathname()) {
            tracing::info!(fd, name = %name, path = %path.display(), "inherited Unix socket");
            self.unix.push((path.to_path_buf(), sock.into()));
        } else {
            return Err(ActivationError::NotListening { fd, name });
        }
        Ok(())
    }

    /// True when nothing was inherited (or everything has been claimed).
    pub fn is_empty(&self) -> bool {
        self.tcp.is_empty() && self.unix.is_empty()
    }

    /// The inherited socket bound to `addr`, if any.
    pub fn take_tcp(&mut self, addr: SocketAddr) -> Option<TcpListener> {
        let i = self.tcp.iter().position(|(a, _)| *a == addr)?;
        Some(self.tcp.swap_remove(i).1)
    }

    /// The inherited socket bound to `path`, if any.
    pub fn take_unix(&mut self, path: &Path) -> Option<UnixListener> {
        let i = self.unix.iter().position(|(p, _)| p == path)?;
        Some(self.unix.swap_remove(i).1)
    }

    /// Errors when a socket was passed that no configured listener claimed.
    pub fn finish(self) -> Result<(), ActivationError> {
        let left: Vec<String> = (self.tcp.iter().map(|(a, _)| a.to_string()))
            .chain(self.unix.iter().map(|(p, _)| p.display().to_string()))
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        Err(ActivationError::Unused(left.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn matches_by_local_address_and_refuses_leftovers() {
        let dir = std::env::temp_dir().join(format!("pgharbor-activation-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let path = dir.join(".s.PGSQL.1");
        let _ = std::fs::remove_file(&path);
        let mut inh = Inherited::default();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        let unix = UnixListener::bind(&path).unwrap();
        for (fd, name) in [(tcp.into_raw_fd(), "tcp"), (unix.into_raw_fd(), "unix")] {
            // SAFETY: the descriptors were just released by their owners.
            let sock = unsafe { Socket::from_raw_fd(fd) };
            inh.add(sock, fd, name.into()).unwrap();
        }
        assert!(inh.take_unix(&dir.join("other")).is_none());
        assert!(inh.take_unix(&path).is_some());
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(inh.take_tcp(other.local_addr().unwrap()).is_none());
        let err = inh.finish().unwrap_err().to_string();
        assert!(err.contains(&addr.to_string()), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn refuses_a_socket_that_is_not_listening() {
        let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let mut inh = Inherited::default();
        let err = inh.add(sock, 99, "x".into()).unwrap_err();
        assert!(matches!(err, ActivationError::NotListening { .. }), "{err}");
    }
}
