//! The signals an operator sends, and what each one does.
//!
//! Every signal a PgBouncer or PostgreSQL operator might send is caught, so
//! none can end the process by its default action (which would skip the
//! socket-file and pidfile clean-up and log nothing). The mapping follows
//! PostgreSQL's postmaster for shutdown and PgBouncer for the rest:
//!
//! | signal | pgharbor | PgBouncer 1.23+ |
//! | --- | --- | --- |
//! | SIGTERM | safe shutdown: stop accepting, let sessions end within `shutdown_timeout`, then 57P01 | the same ("super safe", WAIT_FOR_CLIENTS) |
//! | SIGINT | fast shutdown: stop accepting, 57P01 to every session now | safe shutdown (WAIT_FOR_SERVERS) |
//! | SIGQUIT | immediate shutdown, as SIGINT | immediate shutdown |
//! | any of these during a shutdown | immediate shutdown | the same |
//! | SIGHUP | reload config, auth file, certificates; reopen `--logfile` | reload, reopen the log file |
//! | SIGUSR1 | PAUSE (all databases) | PAUSE |
//! | SIGUSR2 | RESUME (all databases) | RESUME |
//!
//! SIGINT keeps PostgreSQL's meaning (fast shutdown, what Ctrl-C in a
//! terminal should do) rather than PgBouncer's: pgharbor has no
//! WAIT_FOR_SERVERS mode, and a Ctrl-C that waits for clients to leave
//! would surprise more operators than it helps.

use std::fmt;
use std::io;
use std::sync::Arc;

use tokio::signal::unix::{signal, Signal as Stream, SignalKind};

use crate::admin::control;
use crate::admin::Admin;
use crate::pooler::Pooler;

/// A signal pgharbor handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM.
    Term,
    /// SIGINT.
    Int,
    /// SIGQUIT.
    Quit,
    /// SIGHUP.
    Hup,
    /// SIGUSR1.
    Usr1,
    /// SIGUSR2.
    Usr2,
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Term => "SIGTERM",
            Signal::Int => "SIGINT",
            Signal::Quit => "SIGQUIT",
            Signal::Hup => "SIGHUP",
            Signal::Usr1 => "SIGUSR1",
            Signal::Usr2 => "SIGUSR2",
        })
    }
}

/// How much of the running work a shutdown lets finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Stop accepting; sessions may finish within `shutdown_timeout`.
    Safe,
    /// Stop accepting; every session gets 57P01 now.
    Immediate,
}

/// What a signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Re-read the configuration (and reopen the log file).
    Reload,
    /// The admin console's PAUSE of every database.
    Pause,
    /// The admin console's RESUME of every database.
    Resume,
    /// Stop.
    Shutdown(Shutdown),
}

/// The action for `sig`; `shutting_down` is true once a shutdown has begun,
/// when any further shutdown signal escalates to an immediate one.
pub fn action(sig: Signal, shutting_down: bool) -> Action {
    match sig {
        Signal::Hup => Action::Reload,
        Signal::Usr1 => Action::Pause,
        Signal::Usr2 => Action::Resume,
        Signal::Term if !shutting_down => Action::Shutdown(Shutdown::Safe),
        Signal::Term | Signal::Int | Signal::Quit => Action::Shutdown(Shutdown::Immediate),
    }
}

/// The installed handlers. Once installed, a handler stays for the life of
/// the process (tokio never restores the default action), so a signal that
/// arrives after this value is dropped is ignored rather than fatal.
pub struct Signals {
    streams: [(Signal, Stream); 6],
}

impl Signals {
    /// Installs handlers for every signal in [`Signal`].
    pub fn install() -> io::Result<Signals> {
        let on = |sig, kind| signal(kind).map(|s| (sig, s));
        Ok(Signals {
            streams: [
                on(Signal::Term, SignalKind::terminate())?,
                on(Signal::Int, SignalKind::interrupt())?,
                on(Signal::Quit, SignalKind::quit())?,
                on(Signal::Hup, SignalKind::hangup())?,
                on(Signal::Usr1, SignalKind::user_defined1())?,
                on(Signal::Usr2, SignalKind::user_defined2())?,
            ],
        })
    }

    /// Waits for the next signal and logs it. Cancel-safe.
    pub async fn recv(&mut self) -> Signal {
        let [(t, term), (i, int), (q, quit), (h, hup), (u1, usr1), (u2, usr2)] = &mut self.streams;
        // A stream only ends when the runtime shuts down; treat that as a
        // shutdown request rather than spinning.
        let sig = tokio::select! {
            r = term.recv() => r.map(|_| *t),
            r = int.recv() => r.map(|_| *i),
            r = quit.recv() => r.map(|_| *q),
            r = hup.recv() => r.map(|_| *h),
            r = usr1.recv() => r.map(|_| *u1),
            r = usr2.recv() => r.map(|_| *u2),
        }
        .unwrap_or(Signal::Quit);
        tracing::info!(signal = %sig, "signal received");
        sig
    }
}

/// SIGUSR1: the console's PAUSE of every database. It runs in its own task,
/// since PAUSE waits until every backend is back, and signals must keep
/// being answered meanwhile.
pub fn pause(pooler: &Arc<Pooler>) {
    let pooler = pooler.clone();
    tokio::spawn(async move {
        match control::pause(&pooler, None, &Admin::by_signal()).await {
            Ok(()) => tracing::info!("SIGUSR1: paused; no backend is lent out"),
            Err(e) => tracing::warn!(error = %e.message, "SIGUSR1: PAUSE refused"),
        }
    });
}

/// SIGUSR2: the console's RESUME of every database.
pub fn resume(pooler: &Pooler) {
    if let Err(e) = control::resume(pooler, None, &Admin::by_signal()) {
        tracing::warn!(error = %e.message, "SIGUSR2: RESUME refused");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mapping_table() {
        use Action::*;
        let table = [
            (Signal::Term, false, Shutdown(super::Shutdown::Safe)),
            (Signal::Int, false, Shutdown(super::Shutdown::Immediate)),
            (Signal::Quit, false, Shutdown(super::Shutdown::Immediate)),
            (Signal::Hup, false, Reload),
            (Signal::Usr1, false, Pause),
            (Signal::Usr2, false, Resume),
            (Signal::Term, true, Shutdown(super::Shutdown::Immediate)),
            (Signal::Int, true, Shutdown(super::Shutdown::Immediate)),
            (Signal::Quit, true, Shutdown(super::Shutdown::Immediate)),
            (Signal::Hup, true, Reload),
            (Signal::Usr1, true, Pause),
            (Signal::Usr2, true, Resume),
        ];
        for (sig, shutting_down, want) in table {
            assert_eq!(action(sig, shutting_down), want, "{sig} ({shutting_down})");
        }
    }
}
