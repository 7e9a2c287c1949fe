//! Log output for the `pgharbor` binary: human-readable text or one JSON
//! object per line, on stderr or to `--logfile`.
//!
//! Colour codes are written only when stderr is a terminal: a DBA who
//! redirects the log to a file, a pipe or journald must get plain text that
//! `grep` and log shippers can read. `NO_COLOR` (<https://no-color.org>)
//! turns colour off on a terminal too.

use std::io::IsTerminal;
use std::mem::ManuallyDrop;

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

pin_project_lite::pin_project! {
    /// A future polled (and dropped) inside a span, as
    /// `tracing::Instrumented`, with the span boxed and left out when it is
    /// disabled: every client's task carries one for its whole life, idle or
    /// not, and a `Span` takes 40 bytes. Those bytes took a client's task
    /// past tokio's 256-byte step (its tasks are 128-byte aligned).
    pub struct InSpan<F> {
        // Not an Option (8 bytes more: the future's states leave it no
        // niche); dropped by hand, inside the span, as tracing does.
        #[pin]
        inner: ManuallyDrop<F>,
        span: Option<Box<tracing::Span>>,
    }

    impl<F> PinnedDrop for InSpan<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let _entered = this.span.as_deref().map(tracing::Span::enter);
            // SAFETY: this is the value's drop, so `inner` is dropped once
            // and never used again; it is dropped in place, never moved
            // out, as its pinning requires.
            unsafe { ManuallyDrop::drop(this.inner.get_unchecked_mut()) }
        }
    }
}

impl<F> InSpan<F> {
    /// Polls `inner` inside `span`.
    pub fn new(inner: F, span: tracing::Span) -> InSpan<F> {
        InSpan {
            inner: ManuallyDrop::new(inner),
            span: (!span.is_disabled()).then(|| Box::new(span)),
        }
    }
}

impl<F: std::future::Future> std::future::Future for InSpan<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        let _entered = this.span.as_deref().map(tracing::Span::enter);
        // SAFETY: `inner` is pinned with the wrapper (a pinned field), and
        // ManuallyDrop<F> holds F in place: the pin carries over.
        let inner = unsafe { this.inner.map_unchecked_mut(|f| &mut **f) };
        inner.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use super::InSpan;
    use crate::test_waker::counting_waker;

    /// Log lines written to memory.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Logs from a future's poll and from its drop (a guard it holds).
    struct Goodbye;
    impl Drop for Goodbye {
        fn drop(&mut self) {
            tracing::info!("dropped");
        }
    }

    fn run(level: tracing::Level) -> (String, usize) {
        let lines = Lines::default();
        let out = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || out.clone())
            .finish();
        let size = tracing::subscriber::with_default(subscriber, || {
            let guard = Goodbye;
            let fut = async move {
                tracing::info!("polled");
                std::future::pending::<()>().await;
                drop(guard);
            };
            let mut task = Box::pin(InSpan::new(fut, tracing::info_span!("client", id = 7)));
            let (_, waker) = counting_waker();
            assert!(task.as_mut().poll(&mut Context::from_waker(&waker)) == Poll::Pending);
            let size = std::mem::size_of_val(&*task);
            drop(task);
            size
        });
        let text = String::from_utf8_lossy(&lines.0.lock().expect("lines")).into_owned();
        (text, size)
    }

    #[test]
    fn polls_and_drops_inside_its_span_and_keeps_none_when_off() {
        let (text, size) = run(tracing::Level::INFO);
        let polled = text
            .lines()
            .find(|l| l.contains("polled"))
            .expect("polled line");
        assert!(polled.contains("client{id=7}"), "{text}");
        let dropped = text
            .lines()
            .find(|l| l.contains("dropped"))
            .expect("dropped line");
        assert!(dropped.contains("client{id=7}"), "{text}");
        // The span is boxed: the wrapper adds one pointer to the future.
        let (text, off) = run(tracing::Level::WARN);
        assert!(text.is_empty(), "{text}");
        assert_eq!(size, off);
        assert!(size <= 16, "{size}");
    }
}
