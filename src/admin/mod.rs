//! The admin console: the virtual database `pgharbor` (or `pgbouncer`,
//! PgBouncer's name, for tools written for it), for users in `admin.users`
//! (every command) and `admin.stats_users` (SHOW only), who log in like any
//! other user (trust, md5 or SCRAM against the auth file). No backend is
//! involved.
//!
//! Commands (simple query protocol only; case-insensitive; one per query):
//! `SHOW HELP`, `SHOW VERSION`, `SHOW CONFIG`, `SHOW CONFIG_RELOAD`,
//! `SHOW DATABASES`, `SHOW USERS`, `SHOW POOLS`, `SHOW STATS`,
//! `SHOW STATS_TOTALS`, `SHOW TOTALS`, `SHOW LISTS`, `SHOW MEM`, `SHOW STATE`
//! (PgBouncer's columns, see [`show`]),
//! `SHOW CLIENTS`, `SHOW SERVERS` (see [`sockets`]), `SHOW OVERHEAD`
//! (pgharbor's establishment-versus-transfer report, see [`overhead`]),
//! `PAUSE [db]`, `RESUME [db]`, `KILL db`, `KILL_CLIENT id`, `DISABLE db`,
//! `ENABLE db`, `RECONNECT [db]`, `WAIT_CLOSE [db]`, `RELOAD`, `SHUTDOWN`
//! (see [`control`]) and `SET key = value` (see [`set`]). Every command
//! checks the user's privilege itself, against the configuration in force
//! when it runs.
//!
//! Layout: [`Authorized`] (may SHOW) and [`Admin`] (may change the
//! pooler's state) below are the privilege proofs, [`console`] runs the
//! session and asks for the proof per command, [`commands`] parses the
//! command language, [`show`], [`sockets`], [`overhead`], [`control`] and
//! [`set`] carry out the commands, [`rows`] encodes result sets.
//! [`metrics`] is the Prometheus endpoint.

pub mod commands;
pub mod console;
pub mod control;
pub mod metrics;
pub mod overhead;
pub mod rows;
pub mod set;
pub mod show;
pub mod sockets;

use crate::config::Config;
use crate::protocol::{PgError, Violation};
use crate::stream::ReadError;

/// Runs an admin console session for an authenticated user (see [`console::run`]).
pub use console::run as serve;
pub use proof::{Admin, Authorized};

/// Why an admin console session ended early.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The user may not use the console (28000); the caller sends it.
    #[error("{0}")]
    Refused(PgError),
    /// The client went away (EOF or reset): nothing to send.
    #[error("client disconnected")]
    Gone,
    /// Reading from or writing to the client failed.
    #[error("client I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A protocol violation (08P01).
    #[error("protocol violation: {0}")]
    Protocol(#[from] Violation),
    /// SHUTDOWN, or the pooler is shutting down (57P01).
    #[error("shutting down")]
    Shutdown,
}

impl From<ReadError> for AdminError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Eof => AdminError::Gone,
            ReadError::Io(e) => AdminError::Io(e),
            ReadError::Violation(v) => AdminError::Protocol(v),
        }
    }
}

/// True when `user` may run every console command under `config` (`admin.users`).
pub fn is_admin(config: &Config, user: &str) -> bool {
    config.admin.users.iter().any(|u| u == user)
}

/// True when `user` may log in to the console and SHOW under `config`
/// (`admin.users` or `admin.stats_users`).
pub fn may_show(config: &Config, user: &str) -> bool {
    is_admin(config, user) || config.admin.stats_users.iter().any(|u| u == user)
}

/// The privilege proofs, in a module of their own so that nothing in
/// `admin` can build one except through their `check`.
mod proof {
    use crate::config::Config;

    /// Proof that the session's user may run a SHOW command now (a user of
    /// `admin.users` or `admin.stats_users`): every SHOW handler takes one,
    /// so a handler that skipped the check would not compile.
    pub struct Authorized {
        _private: (),
    }

    impl Authorized {
        /// The proof, if `user` may SHOW under `config` (the configuration
        /// in force when the command runs).
        pub(in crate::admin) fn check(config: &Config, user: &str) -> Option<Authorized> {
            super::may_show(config, user).then_some(Authorized { _private: () })
        }
    }

    /// Proof that the session's user may change the pooler's state now (a
    /// user of `admin.users`): every command other than SHOW takes one.
    pub struct Admin {
        read: Authorized,
    }

    impl Admin {
        /// The proof, if `user` is in `admin.users` of `config`.
        pub(in crate::admin) fn check(config: &Config, user: &str) -> Option<Admin> {
            super::is_admin(config, user).then_some(Admin {
                read: Authorized { _private: () },
            })
        }

        /// Proof for a command sent as a signal (SIGUSR1 = PAUSE, SIGUSR2 =
        /// RESUME): the kernel lets only root or the process's own user send one.
        pub(crate) fn by_signal() -> Admin {
            Admin {
                read: Authorized { _private: () },
            }
        }

        /// An administrator may SHOW too.
        pub fn read(&self) -> &Authorized {
            &self.read
        }
    }
}
