//! The floor of what a third process between pgbench and PostgreSQL costs
//! on this machine (pgharbor issue 15), on several I/O models, one thread
//! each. The relay modes accept clients, open one connection to
//! PostgreSQL's socket per client and copy bytes both ways, parsing
//! nothing (or, with `--scan`, only framing). The login modes answer each
//! login themselves, as PostgreSQL answers a trust login, with no backend.
//! Is an epoll-style program (tokio here, HAProxy and PgBouncer in C) at
//! the floor, or does io_uring's batched submission go below it?
//!
//! ```text
//! relay-floor --io uring|hosted|tokio|hybrid|multishot [--link] [--scan] [--plain] [--yield]
//!             --listen SOCKET_PATH|HOST:PORT --backend SOCKET_PATH
//! relay-floor --io login-tokio|login-uring|login-hosted --listen SOCKET_PATH|HOST:PORT
//! ```
//!
//! A `--listen` that parses as `HOST:PORT` is a TCP listener (with
//! `TCP_NODELAY` on accepted sockets, as the poolers set it); the backend
//! is always PostgreSQL's Unix socket, as the poolers' are in pgbench/run.

mod frames;
mod hybrid;
mod local;
mod login;
mod multishot;
mod net;
mod ringloop;
mod uring;

use std::path::PathBuf;
use std::process::ExitCode;

/// The I/O model the relay runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Io {
    /// One io_uring, one thread: a submission and the wait for completions
    /// share one `io_uring_enter`.
    Uring,
    /// tokio's current-thread runtime (epoll), `copy_bidirectional` per
    /// client: what pgharbor's relay would cost if it did nothing.
    Tokio,
    /// tokio runs the tasks, one io_uring does their I/O.
    Hybrid,
    /// The uring loop as one tokio task, waiting in tokio's epoll.
    Hosted,
    /// Answer logins on tokio, a task per client (see `login.rs`).
    LoginTokio,
    /// Answer logins on an io_uring loop of its own.
    LoginUring,
    /// Answer logins on the io_uring loop hosted in a tokio task.
    LoginHosted,
    /// tokio runs the tasks and sends; one multishot io_uring receive per
    /// socket.
    Multishot,
}

/// The command line.
#[derive(Debug)]
struct Args {
    io: Io,
    /// uring only: chain each send to the next receive on the same socket
    /// (`IOSQE_IO_LINK`), so the receive is armed without a trip through
    /// user space.
    link: bool,
    /// uring and hosted: frame every received chunk (see `frames.rs`).
    scan: bool,
    listen: Listen,
    backend: PathBuf,
}

/// Where clients connect.
#[derive(Debug, Clone)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(std::net::SocketAddr),
}

fn parse_args() -> Result<Args, String> {
    let mut io = None;
    let mut link = false;
    let mut scan = false;
    let mut listen = None;
    let mut backend = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--io" => {
                io = Some(match it.next().as_deref() {
                    Some("uring") => Io::Uring,
                    Some("tokio") => Io::Tokio,
                    Some("hybrid") => Io::Hybrid,
                    Some("multishot") => Io::Multishot,
                    Some("hosted") => Io::Hosted,
                    Some("login-tokio") => Io::LoginTokio,
                    Some("login-uring") => Io::LoginUring,
                    Some("login-hosted") => Io::LoginHosted,
                    other => {
                        return Err(format!(
                        "--io: expected uring, hosted, tokio, hybrid, multishot, login-tokio, login-uring or login-hosted, got {other:?}"
                    ))
                    }
                })
            }
            "--link" => link = true,
            "--scan" => scan = true,
            "--plain" => hybrid::PLAIN.store(true, std::sync::atomic::Ordering::Relaxed),
            "--yield" => hybrid::YIELD.store(true, std::sync::atomic::Ordering::Relaxed),
            "--listen" => {
                listen = it.next().map(|a| match a.parse() {
                    Ok(addr) => Listen::Tcp(addr),
                    Err(_) => Listen::Unix(PathBuf::from(a)),
                })
            }
            "--backend" => backend = it.next().map(PathBuf::from),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args {
        io: io.ok_or("--io is required")?,
        link,
        scan,
        listen: listen.ok_or("--listen is required")?,
        // The login modes answer clients themselves.
        backend: match (io, backend) {
            (Some(Io::LoginTokio | Io::LoginUring | Io::LoginHosted), b) => b.unwrap_or_default(),
            (_, b) => b.ok_or("--backend is required")?,
        },
    })
}

fn run_tokio(args: &Args) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(net::accept_loop(&args.listen, |c| {
        let backend = args.backend.clone();
        match c {
            net::Accepted::Unix(s) => drop(tokio::spawn(copy_to(s, backend))),
            net::Accepted::Tcp(s) => drop(tokio::spawn(copy_to(s, backend))),
        }
    }))
}

async fn copy_to<S>(mut client: S, backend: PathBuf)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut server) = tokio::net::UnixStream::connect(&backend).await else {
        return;
    };
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("relay-floor: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match args.io {
        Io::Uring => uring::run(&args.listen, &args.backend, args.link, args.scan, false),
        Io::Tokio => run_tokio(&args),
        Io::Hybrid => hybrid::run(&args.listen, &args.backend),
        Io::Multishot => multishot::run(&args.listen, &args.backend),
        Io::Hosted => uring::run(&args.listen, &args.backend, false, args.scan, true),
        Io::LoginTokio => login::run_tokio(&args.listen),
        Io::LoginUring => login::run_uring(&args.listen, false),
        Io::LoginHosted => login::run_uring(&args.listen, true),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relay-floor: {e}");
            ExitCode::FAILURE
        }
    }
}
