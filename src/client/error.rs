//! The one place where a failed client session becomes an ErrorResponse.

use crate::admin::AdminError;
use crate::backend::BackendError;
use crate::pool::{AcquireError, NoPool};
use crate::protocol::frontend::StartupError;
use crate::protocol::{PgError, Violation};
use crate::stream::ReadError;

/// Why a client session ended early.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The client went away (EOF or reset): nothing to send.
    #[error("client disconnected")]
    Gone,
    /// Reading from or writing to the client failed.
    #[error("client I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A protocol violation (08P01).
    #[error("protocol violation: {0}")]
    Protocol(#[from] Violation),
    /// A startup packet PostgreSQL would close without a word.
    #[error("invalid startup packet: {0}")]
    SilentClose(Violation),
    /// A PROXY protocol header from an address not trusted to send one: a
    /// client must not choose the address the hba rules see.
    #[error("PROXY protocol header from an address not in listen.proxy_protocol_from")]
    UntrustedProxy,
    /// The startup packet was refused.
    #[error("{0}")]
    Startup(#[from] StartupError),
    /// Login refused (28000 / 28P01 / 3D000...).
    #[error("{0}")]
    Refused(PgError),
    /// A wrong password or an unknown user: one 28P01 for both, so probing
    /// cannot tell them apart; `why` tells them apart in the log only.
    #[error("password authentication failed for user \"{user}\": {why}")]
    AuthFailed {
        /// The user the client named.
        user: String,
        /// What failed, for the log.
        why: &'static str,
    },
    /// The TLS handshake with the client failed; no channel is left to
    /// send an error on.
    #[error("TLS handshake failed: {0}")]
    TlsHandshake(String),
    /// No pool serves the database (3D000), or it could not be built.
    #[error("{0}")]
    NoPool(#[from] NoPool),
    /// No backend could be had.
    #[error("{0}")]
    Acquire(#[from] AcquireError),
    /// A backend failed while serving this client.
    #[error("{0}")]
    Backend(#[from] BackendError),
    /// Login did not finish in `client_login_timeout`.
    #[error("login timed out")]
    LoginTimeout,
    /// The pooler is shutting down.
    #[error("shutting down")]
    Shutdown,
}

impl From<ReadError> for ClientError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Eof => ClientError::Gone,
            ReadError::Io(e) => ClientError::Io(e),
            ReadError::Violation(v) => ClientError::Protocol(v),
        }
    }
}

impl From<AdminError> for ClientError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::Refused(e) => ClientError::Refused(e),
            AdminError::Gone => ClientError::Gone,
            AdminError::Io(e) => ClientError::Io(e),
            AdminError::Protocol(v) => ClientError::Protocol(v),
            AdminError::Shutdown => ClientError::Shutdown,
        }
    }
}

impl ClientError {
    /// True when the client spoke a protocol older than 3.0 and can read only
    /// the old error format.
    pub fn is_pre_v3(&self) -> bool {
        matches!(self, ClientError::Startup(StartupError::UnsupportedVersion { major, .. }) if *major < 3)
    }

    /// The ErrorResponse to send, or None when the connection is just closed
    /// (the peer is gone, or PostgreSQL itself would answer nothing).
    pub fn to_pg_error(&self) -> Option<PgError> {
        Some(match self {
            ClientError::Gone
            | ClientError::Io(_)
            | ClientError::SilentClose(_)
            | ClientError::UntrustedProxy
            | ClientError::TlsHandshake(_) => return None,
            ClientError::AuthFailed { user, .. } => PgError::fatal(
                "28P01",
                format!("password authentication failed for user \"{user}\""),
            ),
            ClientError::Protocol(v) => PgError::fatal("08P01", v.0.clone()),
            ClientError::Startup(StartupError::UnsupportedVersion { .. }) => {
                PgError::fatal("0A000", self.to_string())
            }
            ClientError::Startup(StartupError::Malformed(v)) => PgError::fatal("08P01", v.0.clone()),
            ClientError::Refused(e) => e.clone(),
            ClientError::NoPool(e @ NoPool::UnknownDatabase(_)) => {
                PgError::fatal("3D000", e.to_string())
            }
            ClientError::NoPool(e @ NoPool::Create(_)) => PgError::fatal("XX000", e.to_string()),
            ClientError::Acquire(AcquireError::WaitTimeout(d)) => PgError::fatal(
                "53300",
                format!("no server connection became free within query_wait_timeout ({d:?})"),
            )
            .with_hint("All server connections of this pool are in use; raise pool_size or query_wait_timeout."),
            ClientError::Acquire(AcquireError::Closed) | ClientError::Shutdown => {
                PgError::fatal("57P01", "terminating connection due to administrator command")
            }
            ClientError::Acquire(AcquireError::Backend(e)) | ClientError::Backend(e) => backend_error(e),
            ClientError::LoginTimeout => PgError::fatal(
                "08P01",
                "canceling authentication due to timeout (client_login_timeout)",
            ),
        })
    }
}

impl ClientError {
    /// Logs how the session ended, once: a failed login or TLS handshake at
    /// WARN with its reason (never a secret: the messages quote user and
    /// database names only), another error at INFO, a disconnect at DEBUG.
    /// A backend that could not be opened is logged at WARN where it failed
    /// (`pool::BackendManager`), so its clients' endings stay at INFO.
    pub fn log(&self, reply: Option<&PgError>) {
        let failed_login = match self {
            ClientError::AuthFailed { .. } | ClientError::TlsHandshake(_) => true,
            ClientError::NoPool(NoPool::UnknownDatabase(_)) => true,
            ClientError::Refused(e) => e.code.starts_with("28") || e.code == "3D000",
            _ => false,
        };
        if let ClientError::UntrustedProxy = self {
            return tracing::info!(reason = %self, "client refused");
        }
        match reply {
            Some(r) if failed_login => {
                tracing::warn!(sqlstate = %r.code, reason = %self, "client login failed")
            }
            None if failed_login => tracing::warn!(reason = %self, "client login failed"),
            Some(r) => tracing::info!(error = %r, "client closed with error"),
            None => tracing::debug!(reason = %self, "client closed"),
        }
    }
}

/// SQLSTATE 08006, connection_failure: the server connection broke or
/// stopped answering.
const CONNECTION_FAILURE: &str = "08006";

/// What a client sees when its backend fails: PostgreSQL's own error where
/// there is one, otherwise a 08006 naming the server.
fn backend_error(e: &BackendError) -> PgError {
    match e {
        BackendError::CommandTimeout { .. } => PgError::fatal(CONNECTION_FAILURE, e.to_string())
            .with_hint(
                "The server stopped answering; connect again to get another server connection.",
            ),
        BackendError::Server(s) => {
            let code = if s.code.len() == 5 {
                leak_code(&s.code)
            } else {
                "XX000"
            };
            PgError::fatal(code, format!("server login failed: {}", s.message))
        }
        BackendError::Auth(msg) => PgError::fatal("08P01", format!("server login failed: {msg}")),
        other => PgError::fatal(CONNECTION_FAILURE, other.to_string()),
    }
}

/// SQLSTATEs are five ASCII characters from a fixed set; map the ones a
/// backend login produces to static strings, the rest to a generic class.
fn leak_code(code: &str) -> &'static str {
    const KNOWN: [&str; 12] = [
        "28000", "28P01", "3D000", "53300", "57P01", "57P02", "57P03", "08P01", "08006", "42501",
        "0A000", "53000",
    ];
    KNOWN
        .iter()
        .find(|k| **k == code)
        .copied()
        .unwrap_or("08006")
}
