//! What a takeover needs of the listeners: copies of the listening
//! descriptors to send to the new process, and who removes the socket file.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Listeners;

/// Duplicates of every listening socket, taken before the accept loops own
/// them, so a takeover can pass them on while this process still accepts.
pub struct Handover {
    fds: Vec<OwnedFd>,
    given_away: Arc<AtomicBool>,
}

impl Listeners {
    /// Duplicates the listening descriptors for a later takeover.
    pub fn handover(&self) -> io::Result<Handover> {
        let mut fds = Vec::new();
        for l in &self.tcp {
            fds.push(l.as_fd().try_clone_to_owned()?);
        }
        if let Some((l, _)) = &self.unix {
            fds.push(l.as_fd().try_clone_to_owned()?);
        }
        Ok(Handover {
            fds,
            given_away: self.given_away.clone(),
        })
    }

    /// The Unix socket came from a takeover: its file is this process's now,
    /// to remove on exit (unlike one a service manager passed down).
    pub fn adopt_socket_file(&mut self) {
        self.unix_inherited = false;
    }
}

impl Handover {
    /// Adds another listening socket to hand over (the metrics endpoint's).
    pub fn include(&mut self, listener: &impl AsFd) -> io::Result<()> {
        self.fds.push(listener.as_fd().try_clone_to_owned()?);
        Ok(())
    }

    /// The descriptors to attach to the offer.
    pub fn raw_fds(&self) -> Vec<RawFd> {
        self.fds.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// The new process accepts on the sockets: the Unix socket file is its
    /// own now, and must outlive this process.
    pub fn give_away(&self) {
        self.given_away.store(true, Ordering::SeqCst);
    }
}
