//! pgharbor: a PostgreSQL-wire connection pooler.
//!
//! Data flows one way: [`listener`] accepts a socket and classifies it,
//! [`client`] runs one client's life (negotiate, authenticate, relay),
//! [`pool`] hands out authenticated backend sessions, and [`backend`] opens
//! and authenticates one connection to PostgreSQL. [`protocol`] is the wire
//! format without I/O, [`auth`] the credentials and SCRAM/md5 exchanges,
//! [`tls`] the per-transport TLS policy, [`config`] the TOML file,
//! [`stream`] the sockets and framed reads, [`sockopt`] TCP keepalive and
//! user timeout, [`pooler`] the shared state of one running pooler,
//! [`registry`] the cancel keys, clients and statements sessions share,
//! [`stats`] the overhead report's counters, [`admin`] the admin console and
//! metrics endpoint, [`report`] `pgharbor report`, [`check`] what start-up refuses
//! (`pgharbor check` and start-up both run it), [`logging`] the
//! binary's log output (text or JSON), [`signals`] the operator signals,
//! [`service`] what running as a system service needs, [`takeover`] handing
//! the listening sockets to a new process (`--takeover`), and [`lifecycle`]
//! one process from start to exit, which wires all of them together.
//!
//! Dependencies point down and never round: `protocol` and `config` depend
//! on nothing in the crate; `listener` (which owns the peer class,
//! [`listener::Transport`]) sits below `tls`, `stats` and `backend`;
//! `registry` and `pooler` sit below `client` and `admin`; `client` hands
//! an admin login to `admin`, which never depends back on it. The listener
//! reaches `client` only through the [`listener::Serve`] that
//! [`client::accept`] gives it.

pub mod admin;
pub mod auth;
pub mod backend;
pub mod check;
pub mod client;
pub mod config;
pub mod fuzzing;
pub mod import;
pub mod lifecycle;
pub mod listener;
pub mod logging;
pub mod pool;
pub mod pooler;
pub mod protocol;
pub mod registry;
pub mod report;
pub mod service;
pub mod signals;
pub mod sockopt;
pub mod stats;
pub mod stream;
pub mod takeover;
pub mod tls;

#[cfg(test)]
mod test_dir;
#[cfg(test)]
mod test_waker;
