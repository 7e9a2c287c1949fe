//! Log output for the `pgharbor` binary: human-readable text or one JSON
//! object per line, on stderr or to `--logfile`.
//!
//! Colour codes are written only when stderr is a terminal: a DBA who
//! redirects the log to a file, a pipe or journald must get plain text that
//! `grep` and log shippers can read. `NO_COLOR` (<https://no-color.org>)
//! turns colour off on a terminal too.

use std::io::IsTerminal;

use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::EnvFilter;

use crate::service::logfile::LogFile;

/// How each log line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `fields` (with
    /// `message`), `target` and, inside a client's life, its connection `span`.
    Json,
}

/// Installs the global subscriber. `level` is a tracing filter
/// (`info`, `pgharbor=debug`); `RUST_LOG` wins when set, and a filter that
/// does not parse falls back to `info` rather than silencing the log.
/// With `file`, lines go there (never coloured) instead of stderr.
pub fn init(level: &str, format: LogFormat, file: Option<LogFile>) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let colour = file.is_none() && use_colour();
    let writer = match file {
        Some(f) => BoxMakeWriter::new(f),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.with_ansi(colour).init(),
        // JSON never carries colour: escape codes inside string values would
        // be noise to every consumer.
        // The one span is the client's connection; a list would repeat it.
        LogFormat::Json => builder.json().with_span_list(false).with_ansi(false).init(),
    }
}

/// Colour only for a person watching a terminal who has not opted out.
fn use_colour() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    std::io::stderr().is_terminal() && !no_color
}
