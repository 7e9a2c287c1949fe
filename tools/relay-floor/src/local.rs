//! Serving for the models whose tasks run on tokio but whose I/O goes
//! through a thread-local ring (`hybrid`, `multishot`): a current-thread
//! runtime, the ring's driver task, and an accept loop that gives each
//! client, with its new backend connection, to two copy tasks.

use std::future::Future;
use std::io;
use std::os::fd::{IntoRawFd, RawFd};
use std::path::{Path, PathBuf};

use crate::Listen;

/// Clears `O_NONBLOCK`: io_uring answers EAGAIN on a non-blocking socket
/// instead of waiting, and tokio accepts sockets non-blocking.
fn blocking(fd: RawFd) {
    // SAFETY: `fd` is an open socket of ours.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
}

async fn pair<C, F>(client: RawFd, backend: PathBuf, copy: C)
where
    C: Fn(RawFd, RawFd) -> F,
    F: Future<Output = ()> + 'static,
{
    blocking(client);
    let Ok(server) = std::os::unix::net::UnixStream::connect(&backend) else {
        // SAFETY: `client` is ours alone.
        unsafe { libc::close(client) };
        return;
    };
    let server = server.into_raw_fd();
    let up = tokio::task::spawn_local(copy(client, server));
    copy(server, client).await;
    let _ = up.await;
    // SAFETY: no operation on either fd is pending: both copies ended.
    unsafe {
        libc::close(client);
        libc::close(server);
    }
}

/// Runs `driver` and the accept loop until either fails. `copy(from, to)`
/// relays one direction and returns when it has ended; it shuts both
/// sockets down so the other direction's copy ends too.
pub fn serve<D, C, F>(listen: &Listen, backend: &Path, driver: D, copy: C) -> io::Result<()>
where
    D: Future<Output = io::Result<()>> + 'static,
    C: Fn(RawFd, RawFd) -> F + Copy + 'static,
    F: Future<Output = ()> + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        tokio::task::spawn_local(async move {
            if let Err(e) = driver.await {
                eprintln!("relay-floor: driver: {e}");
                std::process::exit(1);
            }
        });
        let backend = backend.to_path_buf();
        crate::net::accept_loop(listen, |c| match c.into_fd() {
            Ok(fd) => {
                tokio::task::spawn_local(pair(fd, backend.clone(), copy));
            }
            Err(e) => eprintln!("relay-floor: accept: {e}"),
        })
        .await
    })
}
