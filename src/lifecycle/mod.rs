//! One pgharbor process from start to exit: bind (or take over) the
//! sockets, serve until a signal or a takeover says stop, then drain and
//! close. The binary parses the command line and calls [`serve`].
//!
//! It sits at the top, wiring `listener`, `client`, `admin`, `service`,
//! `signals` and `takeover` together; nothing depends on it.

mod start;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::pooler::Pooler;
use crate::service::logfile;
use crate::service::notify::Notifier;
use crate::signals::{self, Action, Shutdown, Signals};
use crate::takeover::Request;

/// What the command line adds to the config for running as a service.
pub struct ServiceOpts {
    /// `--pidfile`.
    pub pidfile: Option<PathBuf>,
    /// `--user` (wins over `service.user`).
    pub user: Option<String>,
    /// `--takeover`: take the sockets of the pgharbor running on this config.
    pub takeover: bool,
}

/// The tasks of a serving pooler, for the shutdown to stop in order.
struct Running {
    pooler: Arc<Pooler>,
    accept: JoinHandle<()>,
    metrics: Option<JoinHandle<std::io::Result<()>>>,
    metrics_stop: CancellationToken,
    control: Option<JoinHandle<Option<crate::takeover::wire::Conn>>>,
    taking_over: mpsc::Receiver<Request>,
}

/// Runs the pooler on a checked `config` until it is told to stop.
pub async fn serve(config: Config, service: ServiceOpts) -> Result<(), String> {
    // First, so that no signal during start-up ends the process by its
    // default action, skipping the clean-up and the log line.
    let mut signals = Signals::install().map_err(|e| e.to_string())?;
    let notifier = Notifier::from_env();
    let shutdown_timeout = config.pool.shutdown_timeout;
    let path = config.path.clone();
    let (mut running, _pidfile) = start::start(config, &service).await?;
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "pgharbor started");
    notifier.ready("accepting connections");
    let (mode, successor) = wait_for_stop(&mut signals, &mut running, &path, &notifier).await;
    match &successor {
        Some(r) => notifier.handed_over(r.pid),
        None => notifier.stopping(match mode {
            Shutdown::Safe => "safe shutdown: waiting for sessions to end",
            Shutdown::Immediate => "immediate shutdown",
        }),
    }
    let pooler = running.pooler.clone();
    stop_accepting(running.accept, running.control, &pooler, successor).await;
    pooler.tasks.close();
    if mode == Shutdown::Safe {
        drain(&mut signals, &pooler, &path, &notifier, shutdown_timeout).await;
    } else {
        tracing::info!("immediate shutdown: closing sessions now");
    }
    pooler.terminate_sessions();
    // Metrics stay up through the graceful drain, for whoever watches it.
    running.metrics_stop.cancel();
    if let Some(task) = running.metrics {
        let _ = task.await;
    }
    let wait = tokio::time::sleep(std::time::Duration::from_secs(2));
    tokio::pin!(wait);
    loop {
        tokio::select! {
            _ = pooler.tasks.wait() => break,
            _ = &mut wait => break,
            sig = signals.recv() => if matches!(signals::action(sig, true), Action::Shutdown(_)) { break },
        }
    }
    tracing::info!("pgharbor stopped");
    Ok(())
}

/// Serves signals until one stops the pooler or a new process takes over
/// (which stops it as a safe shutdown does).
async fn wait_for_stop(
    signals: &mut Signals,
    running: &mut Running,
    path: &Path,
    notifier: &Notifier,
) -> (Shutdown, Option<Request>) {
    loop {
        tokio::select! {
            sig = signals.recv() => match signals::action(sig, false) {
                Action::Shutdown(mode) => return (mode, None),
                other => on_signal(other, &running.pooler, path, notifier).await,
            },
            Some(request) = running.taking_over.recv() => return (Shutdown::Safe, Some(request)),
        }
    }
}

/// Closes the accept loops; after a takeover, then tells the new process,
/// and starts handing idle transaction-pooling clients to it.
async fn stop_accepting(
    accept: JoinHandle<()>,
    control: Option<JoinHandle<Option<crate::takeover::wire::Conn>>>,
    pooler: &Pooler,
    successor: Option<Request>,
) {
    pooler.stop_accepting.cancel();
    let _ = accept.await;
    let handed_over = successor.is_some();
    if let Some(request) = successor {
        request.stopped_accepting();
    }
    if let Some(task) = control {
        // After a handover the task tells the new process that this one
        // stopped accepting; otherwise nobody may take over a stopping pooler.
        if !handed_over {
            task.abort();
        }
        if let Ok(Some(conn)) = task.await {
            match pooler.handoff.open(conn) {
                Ok(()) => {
                    // Idle sessions wake for it and move.
                    pooler.clients.start_moving_all();
                    tracing::info!(
                        "takeover: handing idle transaction-pooling clients to the new process"
                    )
                }
                Err(e) => {
                    tracing::warn!(error = %e, "takeover: clients cannot be handed over; they drain here")
                }
            }
        }
    }
}

/// Safe shutdown: sessions may end by themselves within `timeout`; a second
/// shutdown signal cuts the wait short. Other signals still work meanwhile.
async fn drain(
    signals: &mut Signals,
    pooler: &Arc<Pooler>,
    path: &Path,
    notifier: &Notifier,
    timeout: std::time::Duration,
) {
    tracing::info!(timeout = ?timeout, "safe shutdown: no new clients; waiting for sessions to end");
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = pooler.tasks.wait() => return,
            _ = &mut deadline => {
                tracing::info!("shutdown_timeout reached; closing sessions");
                return;
            }
            sig = signals.recv() => match signals::action(sig, true) {
                Action::Shutdown(_) => {
                    tracing::info!(signal = %sig, "immediate shutdown: closing sessions now");
                    return;
                }
                other => on_signal(other, pooler, path, notifier).await,
            },
        }
    }
}

/// The signals that do not stop the pooler.
async fn on_signal(action: Action, pooler: &Arc<Pooler>, path: &Path, notifier: &Notifier) {
    match action {
        Action::Reload => {
            notifier.reloading();
            // First, so log rotation works even while the config file is broken.
            logfile::reopen();
            reload(pooler, path).await;
            notifier.ready("accepting connections");
        }
        Action::Pause => signals::pause(pooler),
        Action::Resume => signals::resume(pooler),
        Action::Shutdown(_) => {}
    }
}

/// SIGHUP: re-read the config and auth file; a broken file keeps the old ones.
async fn reload(pooler: &Arc<Pooler>, path: &Path) {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "reload failed; keeping the old configuration");
            return;
        }
    };
    match pooler.reload(config).await {
        Ok(()) => tracing::info!("configuration reloaded"),
        Err(e) => tracing::error!(error = %e, "reload failed; keeping the old configuration"),
    }
}
