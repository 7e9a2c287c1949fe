//! Why a backend could not be opened or used.

use crate::stream::ReadError;

/// An error PostgreSQL sent, reduced to what a client needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    /// Severity as sent (`ERROR`, `FATAL`...).
    pub severity: String,
    /// SQLSTATE.
    pub code: String,
    /// Primary message.
    pub message: String,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} ({})", self.severity, self.message, self.code)
    }
}

/// Why a backend could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// Connecting failed.
    #[error("could not connect to server at {addr}: {source}")]
    Connect {
        /// Where we tried.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// Opening and logging in took longer than `server_connect_timeout`.
    #[error("timed out connecting to server at {0}")]
    Timeout(String),
    /// The socket failed or the server went away.
    #[error("server connection lost: {0}")]
    Read(#[from] ReadError),
    /// Writing to the server failed.
    #[error("server connection lost: {0}")]
    Write(std::io::Error),
    /// PostgreSQL refused the login or a query.
    #[error("server error: {0}")]
    Server(ServerError),
    /// TLS could not be set up as the policy requires.
    #[error("server TLS: {0}")]
    Tls(String),
    /// The server asked for something we cannot answer.
    #[error("server login failed: {0}")]
    Auth(String),
    /// The server broke the protocol.
    #[error("server protocol violation: {0}")]
    Protocol(String),
}
