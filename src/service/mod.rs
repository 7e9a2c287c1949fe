//! Running as a system service: what systemd, init scripts and container
//! runtimes expect of a daemon, kept apart from the pooler itself.
//!
//! - [`notify`]: `Type=notify` readiness (READY, RELOADING, STOPPING) over
//!   `$NOTIFY_SOCKET`;
//! - [`activation`]: listening sockets inherited through `LISTEN_FDS`;
//! - [`privileges`]: switching to `service.user` after binding;
//! - [`pidfile`]: `--pidfile`, refused while another live process holds it;
//! - [`logfile`]: `--logfile`, reopened on SIGHUP and RELOAD for log rotation;
//! - [`limits`]: a warning when the open-files limit cannot hold the
//!   configured clients and backends.

pub mod activation;
pub mod limits;
pub mod logfile;
pub mod notify;
pub mod pidfile;
pub mod privileges;
