//! The admin console: the virtual database `pgharbor`, for users in
//! `admin.users`, who log in like any other user (trust, md5 or SCRAM
//! against the auth file). No backend is involved.
//!
//! Commands (simple query protocol only; case-insensitive; one per query):
//! `SHOW HELP`, `SHOW VERSION`, `SHOW CONFIG`, `SHOW DATABASES`,
//! `SHOW POOLS`, `SHOW STATS` (PgBouncer's columns, see [`show`]),
//! `SHOW CLIENTS`, `SHOW SERVERS` (see [`sockets`]), `SHOW OVERHEAD`
//! (pgharbor's establishment-versus-transfer report, see [`overhead`]),
//! `PAUSE [db]`, `RESUME [db]`, `KILL db` (see [`control`]), `RELOAD` and
//! `SHUTDOWN`. Every command checks the user's privilege itself, against the
//! configuration in force when it runs.
//!
//! Layout: [`console`] runs the session and the privilege check,
//! [`commands`] parses the command language, [`show`], [`sockets`],
//! [`overhead`] and [`control`] carry out the commands, [`rows`] encodes
//! result sets. [`metrics`] is the Prometheus endpoint.

pub mod commands;
pub mod console;
pub mod control;
pub mod metrics;
pub mod overhead;
pub mod rows;
pub mod show;
pub mod sockets;

/// Runs an admin console session for an authenticated user (see [`console::run`]).
pub use console::run as serve;
