//! Test harness for pgharbor's integration tests.
//!
//! - [`pg`]: a throwaway PostgreSQL cluster per test binary (initdb, SSL,
//!   SCRAM/md5/trust roles), run as the `postgres` OS user under root.
//! - [`pooler`]: a pgharbor process per test with its own config, userlist,
//!   ports and socket directory.
//! - [`clients`]: connection strings, tokio-postgres, psql and pgbench.
//! - [`wire`]: a raw protocol client for malformed input and for reading what
//!   real clients hide (BackendKeyData, ParameterStatus, exact errors); it
//!   can also switch to TLS after SSLRequest.
//! - [`tls`]: run-time certificates, the `[tls]` table, psql runs that show
//!   whether libpq used TLS, tokio-postgres over TLS.
//! - [`fleet`]: pgharbor instances sharing a port or peering, for cancel routing.
//! - [`haproxy`]: Debian's HAProxy as a load balancer in front of poolers;
//!   [`proxy`]: the PROXY headers a balancer sends.
//! - [`wait`]: waits on observable state with a deadline (never a sleep
//!   that hopes something happened).
//!
//! Environment knobs: `PGHARBOR_TEST_LOG` sets the pooler's RUST_LOG
//! (default `info`); `PGHARBOR_KEEP_TEST_DIRS` keeps each pooler's temp dir
//! (config, userlist, `pgharbor.log`) after the test; `PGHARBOR_ALLOW_SKIP=1`
//! lets a test skip when a client library or tool cannot be installed
//! ([`skip`]; without it such a test fails). A failing test prints its
//! poolers' logs.
//!
//! Every test binary does `mod common;` and uses a subset, hence the
//! dead-code allowance.
#![allow(dead_code, unused_imports)]

pub mod clients;
pub mod diff;
pub mod ext;
pub mod fleet;
pub mod haproxy;
pub mod pg;
pub mod pki;
pub mod pooler;
pub mod proxy;
pub mod secrets;
pub mod skip;
pub mod tls;
pub mod util;
pub mod wait;
pub mod wire;

pub use clients::{
    backend_pid, connect, connect_err, connect_ok, connect_with_messages, conninfo_tcp,
    conninfo_unix, db_err, psql, psql_ok, DbErr,
};
pub use pg::{PgCluster, StopMode, MD5_USER, SCRAM_USER, TEST_DB, TRUST_USER};
pub use pooler::{Backend, DbEntry, Pooler, PoolerOpts};
pub use wire::{Endpoint, ErrorFields, RawConn, Reply};

/// The two ways a client reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Unix,
    Tcp,
}

impl Transport {
    pub const ALL: [Transport; 2] = [Transport::Unix, Transport::Tcp];
}

/// A libpq key=value connection string. TCP and Unix alike get
/// `sslmode=disable`: tokio-postgres with NoTls needs it, and the TLS
/// policy has tests of its own.
pub fn conninfo(host: &str, port: u16, user: &str, password: Option<&str>, db: &str) -> String {
    let mut s = format!(
        "host={} port={port} user={} dbname={} sslmode=disable",
        quote(host),
        quote(user),
        quote(db)
    );
    if let Some(p) = password {
        s.push_str(&format!(" password={}", quote(p)));
    }
    s
}

/// Quotes a conninfo value when it needs it.
fn quote(v: &str) -> String {
    if !v.is_empty() && !v.contains([' ', '\'', '\\', '=']) {
        return v.to_string();
    }
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A raw client at `ep`, logged in as [`SCRAM_USER`] to [`TEST_DB`].
#[allow(dead_code)]
pub fn scram_login(ep: &Endpoint) -> RawConn {
    let mut c = RawConn::connect(ep);
    c.login(
        &[("user", SCRAM_USER.0), ("database", TEST_DB)],
        Some(SCRAM_USER.1),
    )
    .unwrap_or_else(|e| panic!("login at {ep:?} as {}: {e:?}", SCRAM_USER.0));
    c
}

/// Runs a simple query on a raw client; panics (with the error) unless it
/// succeeds.
pub fn q_ok(c: &mut RawConn, sql: &str) -> wire::QueryResult {
    let r = c.query(sql);
    assert!(r.error.is_none(), "{sql}: {:?}", r.error);
    r
}

/// The conninfo of [`SCRAM_USER`] on [`TEST_DB`] through the pooler's Unix
/// socket.
pub fn scram_unix_conninfo(p: &Pooler) -> String {
    p.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)
}
