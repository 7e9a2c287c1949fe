//! Configuration: parse, validate and reload the TOML file. Nothing else in
//! pgharbor reads files named by the configuration.
//!
//! The types below are the validated form that the rest of the crate uses;
//! units are already applied (durations are `Duration`, paths are resolved
//! against the config file's directory).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::tls::SslMode;

/// The whole validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where the config was read from (reload reads it again).
    pub path: PathBuf,
    /// `[listen]`
    pub listen: ListenConfig,
    /// `[tls]`
    pub tls: TlsConfig,
    /// `[auth]`
    pub auth: AuthConfig,
    /// `[pool]`
    pub pool: PoolConfig,
    /// `[admin]`
    pub admin: AdminConfig,
    /// `[databases.NAME]`, by name.
    pub databases: BTreeMap<String, DatabaseConfig>,
}

/// `[listen]`: sockets the pooler accepts clients on.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenConfig {
    /// TCP addresses; empty turns TCP off. Default `["127.0.0.1"]`.
    pub addresses: Vec<IpAddr>,
    /// TCP port, and the number in the socket file name. Default 6432.
    pub port: u16,
    /// Directory of `.s.PGSQL.<port>`; `None` (config `""`) turns it off. Default `/tmp`.
    pub unix_socket_dir: Option<PathBuf>,
    /// Permission bits of the socket file (config: octal string, default `"0777"`).
    pub unix_socket_mode: u32,
    /// A client that has not finished logging in by then is closed. Default 15s.
    pub client_login_timeout: Duration,
}

/// `[tls]`: certificates and the per-transport policies.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert_file: Option<PathBuf>,
    /// PEM private key.
    pub key_file: Option<PathBuf>,
    /// Policy for TCP clients. Default prefer with a certificate, else disable.
    pub sslmode: SslMode,
    /// Policy for Unix-socket clients. Default disable.
    pub socketsslmode: SslMode,
    /// Policy for TCP clients from loopback addresses; `None` = same as `sslmode`.
    pub loopbacksslmode: Option<SslMode>,
    /// Lowest TLS version accepted. Default TLSv1.2.
    pub min_protocol_version: TlsVersion,
}

/// TLS protocol versions native-tls can pin as a minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// `"TLSv1"`
    Tls10,
    /// `"TLSv1.1"`
    Tls11,
    /// `"TLSv1.2"`
    Tls12,
}

/// `[auth]`: how clients prove who they are.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthConfig {
    /// Client authentication method. Default scram-sha-256.
    pub method: AuthMethod,
    /// PgBouncer-style userlist; required unless method is trust.
    pub auth_file: Option<PathBuf>,
}

/// Client authentication methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// No password.
    Trust,
    /// md5 challenge (falls back to SCRAM for users with only a SCRAM secret, as PostgreSQL does).
    Md5,
    /// SCRAM-SHA-256.
    ScramSha256,
}

/// How long a client keeps a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// For the whole client session.
    Session,
    /// Until the transaction ends.
    Transaction,
    /// Until the statement ends.
    Statement,
}

/// `[pool]`: pool sizing and backend session handling.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    /// Default pool mode. Default session.
    pub mode: PoolMode,
    /// Backends per (database, user) pool. Default 20.
    pub default_pool_size: usize,
    /// Clients connected at once; the next gets 53300. Default 10000.
    pub max_client_conn: usize,
    /// Longest wait for a free backend before an error. Default 120s.
    pub query_wait_timeout: Duration,
    /// Limit on opening and authenticating one backend. Default 15s.
    pub server_connect_timeout: Duration,
    /// Run when a session is released; `""` skips it. Default `DISCARD ALL`.
    pub server_reset_query: String,
    /// How long SIGTERM waits for sessions to end. Default 30s.
    pub shutdown_timeout: Duration,
}

/// `[admin]`: the admin console.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AdminConfig {
    /// Users allowed on the `pgharbor` virtual database.
    pub users: Vec<String>,
}

/// `[databases.NAME]`: one database clients can ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseConfig {
    /// Where and how to reach PostgreSQL.
    pub conninfo: ConnInfo,
    /// Overrides `pool.default_pool_size`.
    pub pool_size: Option<usize>,
    /// Overrides `pool.mode`.
    pub pool_mode: Option<PoolMode>,
}

/// Where a backend lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendHost {
    /// TCP host name or address.
    Tcp(String),
    /// Directory holding `.s.PGSQL.<port>` (a host starting with `/`).
    Unix(PathBuf),
}

/// A parsed libpq connection string (key=value or `postgresql://` URI).
#[derive(Debug, Clone, PartialEq)]
pub struct ConnInfo {
    /// `host`; default `/var/run/postgresql` as Debian's libpq.
    pub host: BackendHost,
    /// `port`; default 5432.
    pub port: u16,
    /// `dbname`; `None` = the entry's name (filled in by validation, so always Some after load).
    pub dbname: Option<String>,
    /// `user`; `None` = each client's own user.
    pub user: Option<String>,
    /// `password`, if given.
    pub password: Option<String>,
    /// `sslmode` for TCP backends; default prefer (libpq's default).
    pub sslmode: SslMode,
    /// `socketsslmode` for Unix-socket backends; default disable.
    pub socketsslmode: SslMode,
    /// `sslrootcert` for verify-ca / verify-full.
    pub sslrootcert: Option<PathBuf>,
    /// `connect_timeout` (seconds in libpq), if given.
    pub connect_timeout: Option<Duration>,
    /// `application_name`, `options` and any other key libpq accepts that we pass through as startup parameters.
    pub extra: BTreeMap<String, String>,
}
