//! The HTTP side of the metrics endpoint: `GET /metrics` and `GET /health`
//! (and `HEAD`) over HTTP/1, anything else refused, scrapes in progress
//! drained on shutdown.
//!
//! `/health` is for a load balancer: `200 ok` while the pooler takes new
//! clients; `503 shutting down` from the moment a shutdown begins (SIGTERM,
//! SIGINT, SHUTDOWN: no new client is accepted, sessions drain), and
//! `503 paused` while every pool is paused (PAUSE without a database, or of
//! each one: new clients would only wait). A pause of some databases only
//! keeps 200: the others still serve.

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::prometheus_text;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Metrics;
use crate::pooler::Pooler;

/// Longest wait for a scraper's request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for scrapes in progress.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds `addr` and serves `/metrics` until `shutdown` is cancelled.
pub async fn serve(
    addr: SocketAddr,
    pooler: Arc<Pooler>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    serve_on(listener, pooler, shutdown).await
}

/// Serves `/metrics` on a bound listener until `shutdown` is cancelled, then
/// lets scrapes in progress finish (for up to 5 s). Binding first lets the
/// caller refuse to start when the address is taken.
pub async fn serve_on(
    listener: TcpListener,
    pooler: Arc<Pooler>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let metrics = Arc::new(Metrics::new(pooler.clone()));
    let conns = TaskTracker::new();
    tracing::info!(addr = ?listener.local_addr().ok(), "metrics endpoint listening");
    loop {
        let tcp = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of descriptors and the like: the endpoint stays up.
                    tracing::warn!(error = %e, "metrics endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let shared = (metrics.clone(), pooler.clone());
        conns.spawn(connection(tcp, shared, shutdown.clone()));
    }
    conns.close();
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, conns.wait()).await;
    Ok(())
}

/// One scraper's HTTP/1 connection.
async fn connection(
    tcp: tokio::net::TcpStream,
    (metrics, pooler): (Arc<Metrics>, Arc<Pooler>),
    shutdown: CancellationToken,
) {
    let service = service_fn(move |req| {
        let (metrics, pooler) = (metrics.clone(), pooler.clone());
        async move { Ok::<_, Infallible>(respond(&req, &metrics, &pooler)) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "metrics endpoint: connection ended");
    }
}

/// What `/health` answers now (see the module doc).
pub fn health(pooler: &Pooler) -> (StatusCode, &'static str) {
    if pooler.stop_accepting.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    }
    let pools = pooler.pools.all();
    if !pools.is_empty() && pools.iter().all(|p| p.is_paused()) {
        return (StatusCode::SERVICE_UNAVAILABLE, "paused\n");
    }
    (StatusCode::OK, "ok\n")
}

fn reply(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r
}

fn respond(req: &Request<Incoming>, metrics: &Metrics, pooler: &Pooler) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if path != "/metrics" && path != "/health" {
        return reply(StatusCode::NOT_FOUND, "try /metrics or /health\n".into());
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if path == "/health" {
        let (status, body) = health(pooler);
        let mut r = reply(status, body.into());
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        return r;
    }
    match metrics.encode() {
        Ok(text) => {
            let mut r = reply(StatusCode::OK, text);
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(prometheus_text::CONTENT_TYPE),
            );
            r
        }
        Err(fmt::Error) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding failed\n".into(),
        ),
    }
}
