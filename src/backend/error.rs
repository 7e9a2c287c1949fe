//! Why a backend could not be opened or used.

use std::fmt;
use std::time::Duration;

use crate::stream::ReadError;

/// A statement pgharbor sends on its own behalf, each bounded by
/// `pool.server_command_timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolerStatement {
    /// `server_check_query`, before an idle backend is handed out.
    Check,
    /// `server_reset_query` (with a ROLLBACK first if a transaction is open).
    Reset,
    /// ROLLBACK alone, of a transaction a client left open.
    Rollback,
    /// The SETs that give a backend a client's parameters.
    Settings,
    /// pgharbor's own Parse or Close of a prepared statement.
    Prepared,
    /// `auth.query`, looking a user's secret up.
    Lookup,
}

impl fmt::Display for PoolerStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolerStatement::Check => "server_check_query",
            PoolerStatement::Reset => "server_reset_query",
            PoolerStatement::Rollback => "ROLLBACK",
            PoolerStatement::Settings => "the SET of the client's parameters",
            PoolerStatement::Prepared => "pgharbor's own statements (SET, Parse, Close)",
            PoolerStatement::Lookup => "auth.query",
        })
    }
}

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
    /// Opening and logging in to one host took longer than its connect
    /// timeout (`connect_timeout`, at most `server_connect_timeout`).
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
    /// One of pgharbor's own statements got no answer in time; the
    /// backend is closed.
    #[error("server did not answer {what} within server_command_timeout ({timeout:?}); pgharbor closed that server connection")]
    CommandTimeout {
        /// Which statement.
        what: PoolerStatement,
        /// `pool.server_command_timeout`.
        timeout: Duration,
    },
    /// The server broke the protocol.
    #[error("server protocol violation: {0}")]
    Protocol(String),
    /// The server does not fit `target_session_attrs` (libpq's reason).
    #[error("server at {addr} does not fit target_session_attrs={attrs}: {why} (it is a {role})")]
    Misfit {
        /// Where.
        addr: String,
        /// `target_session_attrs`.
        attrs: &'static str,
        /// libpq's message, e.g. "session is read-only".
        why: &'static str,
        /// What the server is.
        role: &'static str,
    },
    /// Every host of a list was tried and none took the backend.
    #[error("no host of the conninfo's {tried} took the connection: {detail}")]
    NoHost {
        /// How many attempts (hosts, times passes).
        tried: usize,
        /// Each host's failure, in the order tried.
        detail: String,
    },
}
