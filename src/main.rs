//! The `pgharbor` binary: run the pooler, or check a config.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use pgharbor::check::Finding;
use pgharbor::config::Config;
use pgharbor::lifecycle::{self, ServiceOpts};
use pgharbor::logging::LogFormat;
use pgharbor::service::logfile::{self, LogFile};

/// jemalloc for Rust's allocations. An idle client is a handful of small
/// blocks, two of them 128-byte aligned (tokio's task and its socket's
/// registration): glibc pays each block's header, and every aligned block
/// leaves free fragments before and after it that a steady state of idle
/// clients never reuses (about 200 bytes a client in `malloc_stats`).
/// jemalloc's size classes keep neither. OpenSSL keeps glibc's malloc.
/// Off (`--no-default-features`) for heap profilers that see only glibc.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    /// Worker threads: a number, or `auto` (or 0) for one per core this
    /// process may use; 1 runs everything on one thread (best on small
    /// machines, where the pooler shares cores with PostgreSQL and clients).
    #[arg(long, default_value = "1", value_parser = parse_threads)]
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

/// `--threads`: `auto` and 0 mean the cores this process may run on (its
/// CPU affinity and cgroup quota, as std reads them), else a count.
fn parse_threads(arg: &str) -> Result<usize, String> {
    let n = match arg.trim() {
        "auto" | "0" => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n
            .parse::<usize>()
            .map_err(|_| format!("expected a number of threads or \"auto\", not \"{arg}\""))?,
    };
    Ok(n)
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
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    tracing::info!(threads, "runtime threads");
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pgharbor: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(lifecycle::serve(config, service)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pgharbor: {e}");
            ExitCode::FAILURE
        }
    }
}
