//! Configuration: parse, validate and reload the TOML file. Nothing else in
//! pgharbor reads files named by the configuration.
//!
//! The types below are the validated form that the rest of the crate uses;
//! units are already applied (durations are `Duration`, paths are resolved
//! against the config file's directory).

//!
//! Layout: `keys` is the one table of keys (type, default, unit, what a
//! reload does, doc), `raw` holds the serde mirror of the file (unknown keys
//! are errors), `validate` turns it into the types below through the
//! table's rows and names the dotted key of every problem, `conninfo` parses libpq connection strings, and
//! `files` checks the files the config names (the only part doing I/O
//! besides [`Config::load`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod conninfo;
mod files;
mod fleet;
mod front_tls;
pub mod keys;
mod pool;
mod raw;
mod service;
mod set;
mod sslmode;
mod tcp;
mod validate;

pub use conninfo::{
    join_keyword_pairs, split_keyword_pairs, ChannelBinding, ClientCertMode, Compression,
    ConnInfoError, HostSpec, LoadBalance, ServerName, Sni, SslNegotiation, TargetSessionAttrs,
    TlsOptions, TlsProtocol,
};
pub use files::{FileProblem, Severity};
pub use fleet::{InstanceId, Peer, PEER_CONNECT_TIMEOUT};
pub use pool::TRACKED_PARAMETERS;
pub use raw::key_part as toml_key;
pub use service::ServiceConfig;
pub use sslmode::{ParseSslModeError, SslMode};
pub use tcp::{Keepalive, TcpOptions};

/// The virtual database name of the admin console; no `[databases.*]` entry may use it.
pub const ADMIN_DATABASE: &str = "pgharbor";

/// PgBouncer's name for its console, answered by the same console, so tools
/// written for PgBouncer (pgbouncer_exporter's default `dbname=pgbouncer`)
/// work unchanged; reserved like [`ADMIN_DATABASE`].
pub const ADMIN_DATABASE_ALIAS: &str = "pgbouncer";

/// True for the database names that reach the admin console.
pub fn is_admin_database(name: &str) -> bool {
    name == ADMIN_DATABASE || name == ADMIN_DATABASE_ALIAS
}

/// The `[databases."*"]` table: PgBouncer's fallback for database names
/// with no table of their own (a backend database of the same name).
pub const FALLBACK_DATABASE: &str = "*";

/// Why a configuration could not be loaded. Every variant but `Io` and
/// `Syntax` names the offending key in dotted form (`pool.mode`,
/// `databases.app.conninfo`).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Io {
        /// The file named on the command line.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("TOML syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What toml reported.
        message: String,
    },
    /// A key is unknown, has the wrong type or an impossible value.
    #[error("{key}: {message}")]
    Invalid {
        /// Dotted key path, e.g. `databases.app.pool_size`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ConfigError {
    /// Builds an [`ConfigError::Invalid`] for `key`.
    pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The dotted key the error is about, if it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

impl Config {
    /// Reads and validates the config file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Parses and validates config `text`; relative file names in it are
    /// resolved against the directory of `path`, which is kept in `Config::path`.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw = raw::from_toml(text)?;
        let mut config = validate::validate(raw, path)?;
        // Kept for SET (see `set`); the text parsed once already.
        config.source = set::Source(text.parse().unwrap_or_default());
        Ok(config)
    }

    /// Checks the files the config names (readable, key permissions, socket
    /// directory); errors and warnings, each naming its key. Does not parse them.
    pub fn check_files(&self) -> Vec<FileProblem> {
        files::check(self)
    }

    /// The database entry clients ask for by `name`: its own table, else
    /// the `"*"` fallback; `None` for unknown names (and the admin console's
    /// two names, which the fallback must never serve).
    pub fn database(&self, name: &str) -> Option<&DatabaseConfig> {
        if is_admin_database(name) {
            return None;
        }
        self.databases
            .get(name)
            .or_else(|| self.databases.get(FALLBACK_DATABASE))
    }
}

impl ListenConfig {
    /// Full path of the listening socket file, `<dir>/.s.PGSQL.<port>`, if the socket is on.
    pub fn unix_socket_path(&self) -> Option<PathBuf> {
        self.unix_socket_dir
            .as_ref()
            .map(|dir| dir.join(format!(".s.PGSQL.{}", self.port)))
    }
}

impl TlsConfig {
    /// True when a certificate and key are configured, so TLS can be offered.
    pub fn has_certificate(&self) -> bool {
        self.cert_file.is_some() && self.key_file.is_some()
    }
}

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
    /// `[users.NAME]`, by role name.
    pub users: BTreeMap<String, UserConfig>,
    /// `[service]`
    pub service: ServiceConfig,
    /// `[peers]`: where the other instances of the fleet take cancel
    /// requests, by instance id; this instance's own entry is left out.
    pub peers: BTreeMap<InstanceId, Peer>,
    /// The TOML it was parsed from, for [`Config::with_setting`].
    source: set::Source,
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
    /// Keepalive and user timeout of TCP client sockets (`tcp_keepalive`,
    /// `tcp_keepidle`, `tcp_keepintvl`, `tcp_keepcnt`, `tcp_user_timeout`).
    /// Default: keepalive on, system timings.
    pub tcp: TcpOptions,
    /// TCP_DEFER_ACCEPT on the TCP listeners: a connection is accepted
    /// once it has sent something (or after about a second). Default on,
    /// as PgBouncer's `tcp_defer_accept` on Linux.
    pub tcp_defer_accept: bool,
    /// SO_REUSEPORT on the TCP listeners, so a fleet shares the port. Default off.
    pub reuseport: bool,
    /// This instance's id in a fleet, carried by its cancel keys; `None`
    /// (config 0, the default) outside a fleet.
    pub instance_id: Option<InstanceId>,
    /// Peers whose TCP connections must open with a PROXY protocol header
    /// (a bare address is a one-address block). Default empty: off.
    pub proxy_protocol_from: Vec<ipnet::IpNet>,
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
    /// The TLS 1.3 suites offered, in the order the server chooses among
    /// those a client offers.
    pub tls13_ciphers: Vec<Tls13Suite>,
    /// CA certificates client certificates are checked against; when set,
    /// every TLS client is asked for one.
    pub ca_file: Option<PathBuf>,
    /// Revoked client certificates (PEM CRLs), checked with `ca_file`.
    pub crl_file: Option<PathBuf>,
    /// A directory of CRLs prepared with `openssl rehash`.
    pub crl_dir: Option<PathBuf>,
    /// The `auth.ident_file` map through which a verify-full policy lets a
    /// certificate's CN log in as a user; `None` = the CN must be the user.
    pub client_cert_map: Option<String>,
}

/// The TLS 1.3 cipher suites both TLS libraries pgharbor builds with have
/// (RFC 8446's three; OpenSSL's CCM suites are not in AWS-LC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls13Suite {
    /// `"TLS_AES_128_GCM_SHA256"`
    Aes128GcmSha256,
    /// `"TLS_AES_256_GCM_SHA384"`
    Aes256GcmSha384,
    /// `"TLS_CHACHA20_POLY1305_SHA256"`
    Chacha20Poly1305Sha256,
}

/// TLS protocol versions the front-end acceptor can pin as a minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// `"TLSv1"`
    Tls10,
    /// `"TLSv1.1"`
    Tls11,
    /// `"TLSv1.2"`
    Tls12,
    /// `"TLSv1.3"`
    Tls13,
}

/// `[auth]`: how clients prove who they are.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthConfig {
    /// Client authentication method. Default scram-sha-256.
    pub method: AuthMethod,
    /// PgBouncer-style userlist; required unless method is trust.
    pub auth_file: Option<PathBuf>,
    /// pg_hba.conf-format rules; when set they choose the method per login.
    pub hba_file: Option<PathBuf>,
    /// pg_ident.conf-format maps for the hba rules' `map=`.
    pub ident_file: Option<PathBuf>,
    /// Looking up users missing from the auth file in PostgreSQL.
    pub lookup: LookupConfig,
}

/// `auth.user`, `auth.query` and their bounds: PgBouncer's auth_query.
#[derive(Debug, Clone, PartialEq)]
pub struct LookupConfig {
    /// The role whose backends run the query; `None`: no lookups.
    pub user: Option<String>,
    /// Returns (name, secret) for `$1`; no row: no such user.
    pub query: String,
    /// The `[databases]` entry to run it in; `None`: the client's.
    pub dbname: Option<String>,
    /// How long an answer is reused.
    pub cache_ttl: Duration,
    /// Longest a login waits for its lookup.
    pub timeout: Duration,
    /// Lookups running at once.
    pub concurrency: usize,
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
    /// Limit on each of the pooler's own statements (check, reset, ROLLBACK,
    /// SETs, Parse and Close): past it the backend is closed and a waiting
    /// client gets an error. Default 30s.
    pub server_command_timeout: Duration,
    /// Run when a session is released; `""` skips it. Default `DISCARD ALL`.
    pub server_reset_query: String,
    /// How long SIGTERM waits for sessions to end. Default 30s.
    pub shutdown_timeout: Duration,
    /// Backends each pool keeps open ahead of demand (capped at the pool
    /// size). Default 0.
    pub min_pool_size: usize,
    /// Extra backends a pool may open for clients that waited
    /// `reserve_pool_timeout`. Default 0.
    pub reserve_pool_size: usize,
    /// How long a client waits before a reserve backend may serve it;
    /// zero turns the reserve off (as in PgBouncer). Default 5s.
    pub reserve_pool_timeout: Duration,
    /// Backends per database, all users together; 0 = no limit. Default 0.
    pub max_db_connections: usize,
    /// Backends per user, all databases together; 0 = no limit. Default 0.
    pub max_user_connections: usize,
    /// Idle backends unused this long are closed (down to `min_pool_size`);
    /// zero = never. Default 600s.
    pub server_idle_timeout: Duration,
    /// Backends older than this are closed when released, never while lent
    /// out; zero = never. Default 3600s.
    pub server_lifetime: Duration,
    /// A backend idle longer than this runs `server_check_query` before it
    /// is handed out; zero = always. Default 30s.
    pub server_check_delay: Duration,
    /// The check; `""` = no check. Default `SELECT 1`.
    pub server_check_query: String,
    /// A client that leaves while its statements still run: the backend
    /// finishes them (as PostgreSQL does for a vanished client) and is
    /// reused if it comes back clean within this time, else closed. Zero
    /// closes at once. Default 30s.
    pub server_drain_timeout: Duration,
    /// A client idle inside a transaction this long is disconnected; zero =
    /// never. Enforced by the client session. Default 0.
    pub idle_transaction_timeout: Duration,
    /// Protocol-level prepared statements kept per backend in transaction
    /// and statement mode; 0 = the pooler does not manage them. Default 200.
    pub max_prepared_statements: usize,
    /// Bytes of prepared-statement definitions the pooler keeps for all
    /// clients together (shared ones count once). Default 256 MiB.
    pub prepared_statement_bytes: usize,
    /// Bytes of prepared-statement names and definitions one client may
    /// hold: past it a Parse gets 53200. Default 4 MiB (10 000 clients
    /// with distinct statements stay within the pooler-wide budget).
    pub prepared_statement_bytes_per_client: usize,
    /// Startup parameters followed per client in transaction mode besides
    /// the built-in [`TRACKED_PARAMETERS`]; lower-cased. Default empty.
    pub track_parameters: Vec<String>,
}

/// `[admin]`: the admin console.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AdminConfig {
    /// Users allowed on the `pgharbor` virtual database.
    pub users: Vec<String>,
    /// Users allowed on the console for SHOW commands only (`stats_users`).
    pub stats_users: Vec<String>,
    /// Where the Prometheus metrics endpoint listens (HTTP); `None` turns it off.
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// `[databases.NAME]`: one database clients can ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseConfig {
    /// Where and how to reach PostgreSQL.
    pub conninfo: ConnInfo,
    /// Overrides `pool.default_pool_size`.
    pub pool_size: Option<usize>,
    /// Overrides `pool.mode` (a `[users.NAME]` pool_mode wins over it).
    pub pool_mode: Option<PoolMode>,
    /// Overrides `pool.min_pool_size`.
    pub min_pool_size: Option<usize>,
    /// Overrides `pool.reserve_pool_size`.
    pub reserve_pool_size: Option<usize>,
    /// Overrides `pool.max_db_connections` (0 = no limit).
    pub max_db_connections: Option<usize>,
}

/// `[users.NAME]`: settings for one role.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserConfig {
    /// Pool mode of clients logging in as this user; overrides the
    /// database's and `pool.mode`.
    pub pool_mode: Option<PoolMode>,
    /// Backends logging in to PostgreSQL as this user, all databases
    /// together; overrides `pool.max_user_connections` (0 = no limit).
    pub max_user_connections: Option<usize>,
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
///
/// `Debug` and `Display` never show the password (see `conninfo.rs`).
#[derive(Clone, PartialEq)]
pub struct ConnInfo {
    /// `host`, `hostaddr` and `port`, matched up into hosts (never empty);
    /// by default one: `/var/run/postgresql` as Debian's libpq, port 5432.
    pub hosts: Vec<HostSpec>,
    /// `target_session_attrs`: which of the hosts a backend may stay on.
    pub target_session_attrs: TargetSessionAttrs,
    /// `load_balance_hosts`: whether the hosts are tried in a random order.
    pub load_balance_hosts: LoadBalance,
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
    /// `sslnegotiation` (libpq 17): SSLRequest first (default) or direct TLS.
    pub sslnegotiation: SslNegotiation,
    /// `connect_timeout` (whole seconds in libpq, at least 2), if given.
    pub connect_timeout: Option<Duration>,
    /// The other TLS keywords (`sslcert`, `channel_binding`, ...).
    pub tls: TlsOptions,
    /// `keepalives*` and `tcp_user_timeout` (TCP backends only).
    pub tcp: TcpOptions,
    /// `application_name`, `options` and any other key libpq accepts that we pass through as startup parameters.
    pub extra: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests;
