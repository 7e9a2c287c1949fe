//! The `pgharbor` binary: run the pooler, or check a config.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use pgharbor::check::Finding;
use pgharbor::config::Config;
use pgharbor::listener::Listeners;
use pgharbor::logging::LogFormat;
use pgharbor::pooler::Pooler;
use pgharbor::service::activation::Inherited;
use pgharbor::service::logfile::{self, LogFile};
use pgharbor::service::notify::Notifier;
use pgharbor::service::pidfile::{self, Pidfile};
use pgharbor::service::{limits, privileges};
use pgharbor::signals::{self, Action, Shutdown, Signals};
use pgharbor::takeover::{self, ControlSocket, Taken};
use tokio::sync::mpsc;

/// A PostgreSQL connection pooler that treats Unix sockets and TCP differently.
#[derive(Parser)]
#[command(name = "pgharbor", version, about)]
struct Cli {
    /// Configuration file.
    #[arg(
        long,
        short,
        global = true,
        env = "PGHARBOR_CONFIG",
        default_value = "/etc/pgharbor/pgharbor.toml"
    )]
    config: PathBuf,
    /// Log filter (tracing syntax, e.g. `info` or `pgharbor=debug`); RUST_LOG wins if set.
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
    /// Log line format: `text` for people, `json` (one object per line) for log shippers.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Worker threads; 1 runs everything on one thread (best on small machines,
    /// where the pooler shares cores with PostgreSQL and clients), 0 = one per core.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Write the process id here once started; removed on exit.
    #[arg(long)]
    pidfile: Option<PathBuf>,
    /// Log to this file instead of stderr; SIGHUP and RELOAD reopen it.
    #[arg(long)]
    logfile: Option<PathBuf>,
    /// Become this user after binding the sockets (overrides service.user).
    #[arg(long)]
    user: Option<String>,
    /// Take the listening sockets over from the pgharbor running on this
    /// config, which then stops accepting and drains: a restart that
    /// refuses no connection.
    #[arg(long)]
    takeover: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate the configuration and the files it names, then exit.
    Check,
    /// Translate a PgBouncer configuration into pgharbor.toml, listing
    /// every key that could not be carried over and why.
    ImportPgbouncer {
        /// PgBouncer's configuration file (pgbouncer.ini).
        ini: PathBuf,
        /// PgBouncer's user list; replaces the ini's auth_file.
        #[arg(long)]
        userlist: Option<PathBuf>,
        /// Where to write pgharbor.toml (default: standard output).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Print the overhead report of a running pgharbor (SHOW OVERHEAD).
    Report {
        /// libpq connection string of its admin console, e.g.
        /// "host=/tmp port=6432 dbname=pgharbor user=admin".
        #[arg(long)]
        admin: String,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let logfile = match cli.logfile.as_deref().map(LogFile::open).transpose() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("pgharbor: --logfile: {e}");
            return ExitCode::FAILURE;
        }
    };
    pgharbor::logging::init(&cli.log_level, cli.log_format, logfile.clone());
    if let Some(file) = logfile {
        logfile::install(file);
    }
    let service = ServiceOpts {
        pidfile: cli.pidfile,
        user: cli.user,
        takeover: cli.takeover,
    };
    match cli.command {
        Some(Command::Check) => check(&cli.config),
        Some(Command::Report { admin, json }) => pgharbor::report::run(&admin, json),
        Some(Command::ImportPgbouncer {
            ini,
            userlist,
            output,
        }) => import_pgbouncer(&ini, userlist.as_deref(), output.as_deref()),
        None => run(&cli.config, cli.threads, service),
    }
}

/// What the command line adds to the config for running as a service.
struct ServiceOpts {
    pidfile: Option<PathBuf>,
    user: Option<String>,
    takeover: bool,
}

/// `pgharbor check`: what start-up would refuse (and warn about), without
/// starting.
fn check(path: &Path) -> ExitCode {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pgharbor: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let findings = pgharbor::check::run(&config);
    for finding in &findings {
        eprintln!("pgharbor: {finding}");
    }
    if findings.iter().any(Finding::is_error) {
        return ExitCode::FAILURE;
    }
    println!("{}: configuration is valid", path.display());
    ExitCode::SUCCESS
}

/// `pgharbor import-pgbouncer`: the notes go to stderr, the file only
/// where pgharbor loads it.
fn import_pgbouncer(ini: &Path, userlist: Option<&Path>, output: Option<&Path>) -> ExitCode {
    let (imported, refused) = match pgharbor::import::translate(ini, userlist, output) {
        Ok(t) => (t.imported, t.refused),
        Err(e) => {
            eprintln!("pgharbor: {e}");
            return ExitCode::FAILURE;
        }
    };
    for note in &imported.notes {
        eprintln!("pgharbor: {note}");
    }
    if let Some(e) = refused {
        eprintln!("pgharbor: not written: pgharbor would refuse the translation: {e}");
        return ExitCode::FAILURE;
    }
    let written = match output {
        None => {
            print!("{}", imported.toml);
            Ok(())
        }
        Some(path) => std::fs::write(path, &imported.toml),
    };
    if let Err(e) = written {
        eprintln!("pgharbor: cannot write the output: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn run(path: &Path, threads: usize, service: ServiceOpts) -> ExitCode {
    let mut config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pgharbor: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    // `--user` wins over service.user, here as when switching.
    if let Some(user) = &service.user {
        config.service.user = Some(user.clone());
    }
    // The same findings as `pgharbor check`, in the same words: errors
    // refuse the start, warnings go to the log.
    let findings = pgharbor::check::run(&config);
    for finding in findings.iter().filter(|f| !f.is_error()) {
        tracing::warn!("{}", finding.message);
    }
    let errors: Vec<&Finding> = findings.iter().filter(|f| f.is_error()).collect();
    if !errors.is_empty() {
        for finding in errors {
            eprintln!("pgharbor: {finding}");
        }
        return ExitCode::FAILURE;
    }
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if threads > 1 {
            b.worker_threads(threads);
        }
        b
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pgharbor: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config, service)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pgharbor: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config, service: ServiceOpts) -> Result<(), String> {
    // First, so that no signal during start-up ends the process by its
    // default action, skipping the clean-up and the log line.
    let mut signals = Signals::install().map_err(|e| e.to_string())?;
    let notifier = Notifier::from_env();
    // A takeover's pidfile names the process it takes over from until then.
    if let (Some(p), false) = (&service.pidfile, service.takeover) {
        pidfile::check(p).map_err(|e| e.to_string())?;
    }
    let (listeners, mut taken) = bind_listeners(&config, service.takeover).await?;
    let control = ControlSocket::bind(&config).map_err(|e| e.to_string())?;
    let mut handover = listeners.handover().map_err(|e| e.to_string())?;
    let shutdown_timeout = config.pool.shutdown_timeout;
    let path = config.path.clone();
    // Bound before start-up completes, so a taken port fails the start as the
    // client listeners do. Changing it takes a restart.
    let metrics_listener = match config.admin.metrics_listen {
        Some(addr) => {
            let l = match taken.as_mut().and_then(|(_, left)| left.take_tcp(addr)) {
                Some(l) => tokio::net::TcpListener::from_std(l),
                None => tokio::net::TcpListener::bind(addr).await,
            }
            .map_err(|e| format!("admin.metrics_listen {addr}: {e}"))?;
            handover.include(&l).map_err(|e| e.to_string())?;
            Some(l)
        }
        None => None,
    };
    let taken = taken.map(|(t, left)| {
        for unused in left.close_unused() {
            tracing::info!(socket = %unused, "takeover: no longer configured; closing");
        }
        t
    });
    let control_file = control.as_ref().map(|c| c.bound_path().to_path_buf());
    drop_privileges(
        &config,
        service.user.as_deref(),
        &listeners,
        control_file.as_deref(),
    )?;
    let mut pidfile = match &service.pidfile {
        Some(p) if !service.takeover => Some(Pidfile::create(p).map_err(|e| e.to_string())?),
        _ => None,
    };
    limits::warn_if_low(&config);
    let pooler = Pooler::new(config).await.map_err(|e| e.to_string())?;
    let metrics_stop = CancellationToken::new();
    let metrics = metrics_listener.map(|l| {
        tokio::spawn(pgharbor::admin::metrics::serve_on(
            l,
            pooler.clone(),
            metrics_stop.clone(),
        ))
    });
    let accept = tokio::spawn(pgharbor::client::accept(listeners, pooler.clone()));
    if let Some(taken) = taken {
        // Only now that this process accepts may the old one stop.
        match taken.accepting().await {
            Ok(old) => tracing::info!(pid = old, "took over; the old process drains"),
            Err(e) => {
                tracing::warn!(error = %e, "takeover: the old process did not confirm; it may still accept too")
            }
        }
        if let Some(p) = &service.pidfile {
            pidfile = Some(Pidfile::take_over(p).map_err(|e| e.to_string())?);
        }
    }
    let _pidfile = pidfile;
    let (requests, mut taking_over) = mpsc::channel(1);
    let control = control.and_then(|mut c| match c.place() {
        Ok(()) => Some(tokio::spawn(c.serve(handover, requests))),
        Err(e) => {
            tracing::warn!(error = %e, "no takeover control socket; --takeover cannot reach this process");
            None
        }
    });
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "pgharbor started");
    notifier.ready("accepting connections");
    let mut successor = None;
    let mode = loop {
        tokio::select! {
            sig = signals.recv() => match signals::action(sig, false) {
                Action::Shutdown(mode) => break mode,
                other => on_signal(other, &pooler, &path, &notifier).await,
            },
            Some(request) = taking_over.recv() => {
                successor = Some(request);
                break Shutdown::Safe;
            }
        }
    };
    match &successor {
        Some(r) => notifier.handed_over(r.pid),
        None => notifier.stopping(match mode {
            Shutdown::Safe => "safe shutdown: waiting for sessions to end",
            Shutdown::Immediate => "immediate shutdown",
        }),
    }
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
        let _ = task.await;
    }
    pooler.tasks.close();
    if mode == Shutdown::Safe {
        drain(&mut signals, &pooler, &path, &notifier, shutdown_timeout).await;
    } else {
        tracing::info!("immediate shutdown: closing sessions now");
    }
    pooler.terminate_sessions();
    // Metrics stay up through the graceful drain, for whoever watches it.
    metrics_stop.cancel();
    if let Some(task) = metrics {
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

/// The listening sockets: bound, or taken over from the running process
/// (with the received sockets no configured listener claimed, for the
/// metrics endpoint and then to be closed).
async fn bind_listeners(
    config: &Config,
    takeover: bool,
) -> Result<(Listeners, Option<(Taken, Inherited)>), String> {
    if !takeover {
        let mut inherited = Inherited::from_env().map_err(|e| e.to_string())?;
        let listeners = Listeners::bind_with(config, &mut inherited)
            .await
            .map_err(|e| e.to_string())?;
        inherited.finish().map_err(|e| e.to_string())?;
        return Ok((listeners, None));
    }
    let mut taken = takeover::take(config)
        .await
        .map_err(|e| format!("--takeover: {e}"))?;
    let mut inherited = std::mem::take(&mut taken.inherited);
    let mut listeners = Listeners::bind_with(config, &mut inherited)
        .await
        .map_err(|e| format!("--takeover: {e}"))?;
    listeners.adopt_socket_file();
    Ok((listeners, Some((taken, inherited))))
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

/// `service.user` (or `--user`): switch now that every socket is bound.
fn drop_privileges(
    config: &Config,
    cli_user: Option<&str>,
    listeners: &Listeners,
    control_file: Option<&Path>,
) -> Result<(), String> {
    let Some(name) = cli_user.or(config.service.user.as_deref()) else {
        return Ok(());
    };
    let user = privileges::lookup(name).map_err(|e| e.to_string())?;
    let own: Vec<&Path> = listeners
        .own_socket_file()
        .into_iter()
        .chain(logfile::installed().map(LogFile::path))
        .chain(control_file)
        .collect();
    privileges::switch(&user, &own).map_err(|e| e.to_string())?;
    if let Err(e) = std::fs::File::open(&config.path) {
        tracing::warn!(path = %config.path.display(), user = %user.name, error = %e, "service.user cannot read the config file: RELOAD and SIGHUP will fail");
    }
    Ok(())
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
