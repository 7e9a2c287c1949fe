//! The `pgharbor` binary: run the pooler, or check a config.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use pgharbor::config::Config;
use pgharbor::listener::Listeners;
use pgharbor::pooler::Pooler;

/// A PostgreSQL connection pooler that treats Unix sockets and TCP differently.
#[derive(Parser)]
#[command(name = "pgharbor", version, about)]
struct Cli {
    /// Configuration file.
    #[arg(long, short, global = true, default_value = "conf/pgharbor.toml")]
    config: PathBuf,
    /// Log filter (tracing syntax, e.g. `info` or `pgharbor=debug`); RUST_LOG wins if set.
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
    /// Worker threads; 1 runs everything on one thread (best on small machines,
    /// where the pooler shares cores with PostgreSQL and clients), 0 = one per core.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate the configuration and the files it names, then exit.
    Check,
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
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&cli.log_level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Some(Command::Check) => check(&cli.config),
        Some(Command::Report { admin, json }) => report(&admin, json),
        None => run(&cli.config, cli.threads),
    }
}

/// `pgharbor check`: config errors name the key; file problems are listed.
fn check(path: &Path) -> ExitCode {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pgharbor: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    for problem in config.check_files() {
        eprintln!("pgharbor: {problem}");
        failed |= problem.is_error();
    }
    if let Err(e) = pgharbor::tls::build_acceptor(&config.tls) {
        eprintln!("pgharbor: error: {e}");
        failed = true;
    }
    if let Err(e) = pgharbor::tls::check_databases(&config) {
        eprintln!("pgharbor: error: {e}");
        failed = true;
    }
    if let Some(auth) = &config.auth.auth_file {
        if let Err(e) = pgharbor::auth::AuthFile::load(auth) {
            eprintln!("pgharbor: error: auth.auth_file: {e}");
            failed = true;
        }
    }
    if failed {
        return ExitCode::FAILURE;
    }
    println!("{}: configuration is valid", path.display());
    ExitCode::SUCCESS
}

/// `pgharbor report`: reads SHOW OVERHEAD from a running pooler.
fn report(conninfo: &str, json: bool) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pgharbor: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(pgharbor::report::fetch(conninfo)) {
        Ok(rows) if json => {
            println!("{}", pgharbor::report::to_json(&rows));
            ExitCode::SUCCESS
        }
        Ok(rows) => {
            print!("{}", pgharbor::report::to_table(&rows));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pgharbor: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(path: &Path, threads: usize) -> ExitCode {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pgharbor: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
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
    match runtime.block_on(serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pgharbor: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config) -> Result<(), String> {
    let listeners = Listeners::bind(&config).await.map_err(|e| e.to_string())?;
    let shutdown_timeout = config.pool.shutdown_timeout;
    let path = config.path.clone();
    // Bound before start-up completes, so a taken port fails the start as the
    // client listeners do. Changing it takes a restart.
    let metrics_listener = match config.admin.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("admin.metrics_listen {addr}: {e}"))?,
        ),
        None => None,
    };
    let pooler = Pooler::new(config).await.map_err(|e| e.to_string())?;
    let metrics_stop = CancellationToken::new();
    let metrics = metrics_listener.map(|l| {
        tokio::spawn(pgharbor::admin::metrics::serve_on(
            l,
            pooler.clone(),
            metrics_stop.clone(),
        ))
    });
    let mut sigterm = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut sighup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let accept = tokio::spawn(pgharbor::client::accept(listeners, pooler.clone()));
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "pgharbor started");
    let graceful = loop {
        tokio::select! {
            _ = sigterm.recv() => break true,
            _ = sigint.recv() => break false,
            _ = sighup.recv() => reload(&pooler, &path).await,
        }
    };
    pooler.stop_accepting.cancel();
    let _ = accept.await;
    pooler.tasks.close();
    if graceful {
        tracing::info!(timeout = ?shutdown_timeout, "SIGTERM: no new clients; waiting for sessions to end");
        tokio::select! {
            _ = pooler.tasks.wait() => {}
            _ = tokio::time::sleep(shutdown_timeout) => tracing::info!("shutdown_timeout reached; closing sessions"),
            _ = sigint.recv() => tracing::info!("SIGINT: closing sessions now"),
        }
    } else {
        tracing::info!("SIGINT: closing sessions now");
    }
    pooler.terminate_sessions();
    // Metrics stay up through the graceful drain, for whoever watches it.
    metrics_stop.cancel();
    if let Some(task) = metrics {
        let _ = task.await;
    }
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), pooler.tasks.wait()).await;
    tracing::info!("pgharbor stopped");
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
