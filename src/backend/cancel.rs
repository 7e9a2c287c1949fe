//! Forwarding a client's cancel to the backend it targets.

use std::time::Duration;

use super::CancelTarget;

/// How long a forwarded cancel may take to be confirmed (PostgreSQL closes
/// the cancel connection once it has signalled the backend); a backend
/// whose cancel is not confirmed by then is closed, never handed on.
pub const CANCEL_CONFIRM_LIMIT: Duration = Duration::from_secs(5);

/// Sends a CancelRequest for `cancel` over a fresh connection, as PostgreSQL
/// expects, and waits until PostgreSQL closes that connection: by then it
/// has signalled the backend, so the cancel cannot land on a later query.
/// Ok only when that close was seen.
pub async fn send_cancel(cancel: &CancelTarget) -> std::io::Result<()> {
    let send = async {
        let mut stream = cancel.target.open().await?;
        request_and_wait_close(&mut stream, cancel.pid, cancel.secret).await
    };
    match tokio::time::timeout(CANCEL_CONFIRM_LIMIT, send).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the server did not close the cancel connection in time",
        )),
    }
}

/// Writes a CancelRequest for (`pid`, `secret`) on `stream` and reads until
/// the other side closes, which it does once it has passed the signal on
/// (PostgreSQL, or a fleet peer); unbounded, so callers put a timeout on it.
pub async fn request_and_wait_close<S>(stream: &mut S, pid: i32, secret: i32) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = bytes::BytesMut::with_capacity(16);
    postgres_protocol::message::frontend::cancel_request(pid, secret, &mut buf);
    stream.write_all(&buf).await?;
    stream.flush().await?;
    let mut sink = [0u8; 64];
    loop {
        match stream.read(&mut sink).await {
            Ok(0) => return Ok(()),
            Ok(_) => continue,
            // A reset after the request went out is the other side closing too.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
