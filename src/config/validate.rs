//! From the raw file to the validated [`Config`]: defaults, ranges, paths
//! resolved against the config file's directory, and the cross-key rules
//! (auth needs an auth file; `[tls]` has its own file, `front_tls`). No I/O.
//!
//! Every error names its dotted key, so `pgharbor check` can point at the
//! line to fix.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use super::keys::{self, Section};
use super::raw::{key_part, RawAuth, RawConfig, RawDatabase, RawListen};
use super::{
    pool, AdminConfig, AuthConfig, AuthMethod, Config, ConfigError, ConnInfo, DatabaseConfig,
    ListenConfig, LookupConfig, PoolMode, Tls13Suite, TlsVersion, FALLBACK_DATABASE,
};
use crate::config::{is_admin_database, InstanceId, SslMode};

/// A `sockaddr_un` holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

pub(super) fn validate(raw: RawConfig, path: &Path) -> Result<Config, ConfigError> {
    let base = path.parent().filter(|p| !p.as_os_str().is_empty());
    let resolve = |p: String| match base {
        Some(base) if Path::new(&p).is_relative() => base.join(p),
        _ => PathBuf::from(p),
    };
    // In file order, so the first error reported is the first in the file.
    let listen = listen(raw.listen, &resolve)?;
    let tls = super::front_tls::tls(raw.tls, &resolve)?;
    let auth = auth(raw.auth, &resolve)?;
    super::front_tls::check_cert_map(&tls, &auth)?;
    let pool = pool::pool(raw.pool)?;
    let metrics_listen = match raw.admin.metrics_listen.as_deref() {
        None | Some("") => None,
        Some(addr) => Some(addr.parse::<std::net::SocketAddr>().map_err(|_| {
            ConfigError::invalid(
                "admin.metrics_listen",
                format!("{addr:?} is not an address:port such as \"127.0.0.1:9930\""),
            )
        })?),
    };
    let admin = AdminConfig {
        users: admin_users(
            "admin.users",
            keys::key(Section::Admin, "users")?.names(raw.admin.users),
        )?,
        stats_users: admin_users(
            "admin.stats_users",
            keys::key(Section::Admin, "stats_users")?.names(raw.admin.stats_users),
        )?,
        metrics_listen,
    };
    let mut databases = BTreeMap::new();
    for (name, db) in raw.databases {
        let validated = database(&name, db, &resolve)?;
        databases.insert(name, validated);
    }
    let users = pool::users(raw.users)?;
    let peers = super::fleet::peers(raw.peers, listen.instance_id)?;
    Ok(Config {
        path: path.to_path_buf(),
        listen,
        tls,
        auth,
        pool,
        admin,
        databases,
        users,
        service: super::service::validate(raw.service)?,
        peers,
        source: Default::default(),
    })
}

fn listen(
    raw: RawListen,
    resolve: &impl Fn(String) -> PathBuf,
) -> Result<ListenConfig, ConfigError> {
    let tcp = super::tcp::listen_options(&raw)?;
    let k = |name: &str| keys::key(Section::Listen, name);
    let mut addresses = Vec::new();
    let given = k("addresses")?.names(raw.addresses);
    for (i, text) in given.iter().enumerate() {
        let found: Vec<IpAddr> = match text.as_str() {
            "*" => vec![Ipv4Addr::UNSPECIFIED.into(), Ipv6Addr::UNSPECIFIED.into()],
            "localhost" => vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()],
            other => match other.parse() {
                Ok(ip) => vec![ip],
                Err(_) => {
                    return Err(ConfigError::invalid(
                        format!("listen.addresses[{i}]"),
                        format!(
                            "invalid address {text:?} (expected an IPv4 or IPv6 address, \"*\" or \"localhost\")"
                        ),
                    ))
                }
            },
        };
        for ip in found {
            if !addresses.contains(&ip) {
                addresses.push(ip);
            }
        }
    }
    let port = u16::try_from(k("port")?.count(raw.port)?)
        .map_err(|_| ConfigError::invalid("listen.port", "must be from 1 to 65535"))?;
    let unix_socket_dir = k("unix_socket_dir")?
        .text(raw.unix_socket_dir)
        .filter(|dir| !dir.is_empty())
        .map(resolve);
    if let Some(dir) = &unix_socket_dir {
        let socket = dir.join(format!(".s.PGSQL.{port}"));
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(ConfigError::invalid(
                "listen.unix_socket_dir",
                format!(
                    "socket path {} is {len} bytes, more than the {MAX_SOCKET_PATH} a Unix socket address holds",
                    socket.display()
                ),
            ));
        }
    }
    if addresses.is_empty() && unix_socket_dir.is_none() {
        return Err(ConfigError::invalid(
            "listen.addresses",
            "no TCP addresses and no listen.unix_socket_dir: clients could not connect at all",
        ));
    }
    let tcp_defer_accept = k("tcp_defer_accept")?.flag(raw.tcp_defer_accept)?;
    let reuseport = k("reuseport")?.flag(raw.reuseport)?;
    let instance_id = u8::try_from(k("instance_id")?.count(raw.instance_id)?)
        .map_err(|_| ConfigError::invalid("listen.instance_id", "must be from 0 to 255"))?;
    let instance_id = InstanceId::new(instance_id);
    super::fleet::check_reuseport(reuseport, instance_id)?;
    Ok(ListenConfig {
        tcp,
        tcp_defer_accept,
        reuseport,
        instance_id,
        addresses,
        port,
        unix_socket_dir,
        unix_socket_mode: socket_mode(
            &k("unix_socket_mode")?
                .text(raw.unix_socket_mode)
                .unwrap_or_default(),
        )?,
        client_login_timeout: k("client_login_timeout")?.duration(raw.client_login_timeout)?,
        proxy_protocol_from: cidrs(
            "listen.proxy_protocol_from",
            k("proxy_protocol_from")?.names(raw.proxy_protocol_from),
        )?,
    })
}

/// CIDR blocks, a bare address standing for itself (`/32`, `/128`); host
/// bits are dropped (`10.0.0.1/8` is `10.0.0.0/8`), as PostgreSQL reads
/// an hba address.
fn cidrs(key: &str, given: Vec<String>) -> Result<Vec<ipnet::IpNet>, ConfigError> {
    given
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let text = text.trim();
            text.parse::<ipnet::IpNet>()
                .or_else(|_| text.parse::<IpAddr>().map(ipnet::IpNet::from))
                .map(|net| net.trunc())
                .map_err(|_| {
                    ConfigError::invalid(
                        format!("{key}[{i}]"),
                        format!("invalid CIDR {text:?} (expected e.g. \"10.0.0.0/8\", \"fd00::/8\" or one address)"),
                    )
                })
        })
        .collect()
}

/// An octal permission string such as `"0700"`; digits 0-7 only, at most 0777.
fn socket_mode(text: &str) -> Result<u32, ConfigError> {
    let key = "listen.unix_socket_mode";
    let octal =
        !text.is_empty() && text.len() <= 4 && text.bytes().all(|b| (b'0'..=b'7').contains(&b));
    match u32::from_str_radix(text, 8) {
        Ok(mode) if octal && mode <= 0o777 => Ok(mode),
        _ => Err(ConfigError::invalid(
            key,
            format!("invalid mode {text:?} (expected an octal string from \"0000\" to \"0777\", e.g. \"0700\")"),
        )),
    }
}

fn auth(raw: RawAuth, resolve: &impl Fn(String) -> PathBuf) -> Result<AuthConfig, ConfigError> {
    let method: AuthMethod = keys::key(Section::Auth, "method")?.choice(raw.method)?;
    let auth_file = raw.auth_file.filter(|s| !s.is_empty()).map(resolve);
    let hba_file = raw.hba_file.filter(|s| !s.is_empty()).map(resolve);
    let ident_file = raw.ident_file.filter(|s| !s.is_empty()).map(resolve);
    let k = |name| keys::key(Section::Auth, name);
    let lookup = LookupConfig {
        user: raw.user.filter(|s| !s.is_empty()),
        query: k("query")?.text(raw.query).unwrap_or_default(),
        dbname: raw.dbname.filter(|s| !s.is_empty()),
        cache_ttl: k("query_cache_ttl")?.duration(raw.query_cache_ttl)?,
        timeout: k("query_timeout")?.duration(raw.query_timeout)?,
        concurrency: k("query_concurrency")?.count(raw.query_concurrency)?,
    };
    if lookup.user.is_some() && !lookup.query.contains("$1") {
        return Err(ConfigError::invalid(
            "auth.query",
            "must use $1 for the user name being looked up",
        ));
    }
    // With an hba file the rules choose the method per login; a password
    // rule without an auth file then refuses every password, as PostgreSQL
    // does for a role without one.
    if auth_file.is_none()
        && hba_file.is_none()
        && lookup.user.is_none()
        && method != AuthMethod::Trust
    {
        return Err(ConfigError::invalid(
            "auth.auth_file",
            format!(
                "required when auth.method is {:?} (or set auth.user to look users up)",
                method.as_str()
            ),
        ));
    }
    Ok(AuthConfig {
        method,
        auth_file,
        hba_file,
        ident_file,
        lookup,
    })
}

fn admin_users(key: &str, users: Vec<String>) -> Result<Vec<String>, ConfigError> {
    if let Some(i) = users.iter().position(|u| u.is_empty()) {
        return Err(ConfigError::invalid(
            format!("{key}[{i}]"),
            "must not be empty",
        ));
    }
    Ok(users)
}

fn database(
    name: &str,
    raw: RawDatabase,
    resolve: &impl Fn(String) -> PathBuf,
) -> Result<DatabaseConfig, ConfigError> {
    let key = format!("databases.{}", key_part(name));
    if name.is_empty() {
        return Err(ConfigError::invalid(key, "database name must not be empty"));
    }
    if is_admin_database(name) {
        return Err(ConfigError::invalid(
            key,
            format!("the name {name:?} is reserved for the admin console"),
        ));
    }
    let conninfo_key = format!("{key}.conninfo");
    let text = raw
        .conninfo
        .as_deref()
        .ok_or_else(|| ConfigError::invalid(&conninfo_key, "required"))?;
    let mut conninfo =
        ConnInfo::parse(text).map_err(|e| ConfigError::invalid(&conninfo_key, e.to_string()))?;
    // The fallback's dbname stays unset: each client's database name fills it.
    if conninfo.dbname.is_none() && name != FALLBACK_DATABASE {
        conninfo.dbname = Some(name.to_string());
    }
    // Relative to the config file like every other path (libpq would use the cwd).
    conninfo.sslrootcert = conninfo
        .sslrootcert
        .map(|p| resolve(p.to_string_lossy().into_owned()));
    conninfo.tls.resolve_paths(resolve);
    conninfo
        .check_tls()
        .map_err(|e| ConfigError::invalid(&conninfo_key, e))?;
    // libpq falls back to ~/.postgresql/root.crt; a pooler should not depend
    // on its service account's home directory, so the CA must be named.
    let verifying = conninfo
        .hosts
        .iter()
        .map(|h| conninfo.tls_mode(h))
        .find(|m| matches!(m, SslMode::VerifyCa | SslMode::VerifyFull));
    if let (Some(mode), None) = (verifying, &conninfo.sslrootcert) {
        return Err(ConfigError::invalid(
            &conninfo_key,
            format!(
                "sslmode={mode} needs sslrootcert (the CA that signed the server's certificate)"
            ),
        ));
    }
    pool::database(&key, conninfo, &raw)
}

/// Parses one of the config's named values, naming the key and the choices on error.
pub(super) fn parse_named<T: Named>(key: &str, text: &str) -> Result<T, ConfigError> {
    T::ALL
        .iter()
        .copied()
        .find(|v| v.as_str() == text)
        .ok_or_else(|| {
            let choices: Vec<String> = T::ALL.iter().map(|v| format!("{:?}", v.as_str())).collect();
            ConfigError::invalid(
                key,
                format!(
                    "invalid value {text:?} (expected one of {})",
                    choices.join(", ")
                ),
            )
        })
}

/// Config enums written as fixed strings.
pub(super) trait Named: Copy + 'static {
    const ALL: &'static [Self];
    fn as_str(self) -> &'static str;
}

macro_rules! named {
    ($ty:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl Named for $ty {
            const ALL: &'static [Self] = &[$($ty::$variant),+];
            fn as_str(self) -> &'static str {
                $ty::as_str(self)
            }
        }

        impl $ty {
            /// Every spelling the config file accepts, for the key table.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The spelling used in the config file.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named!(PoolMode { Session => "session", Transaction => "transaction", Statement => "statement" });
named!(AuthMethod { Trust => "trust", Md5 => "md5", ScramSha256 => "scram-sha-256" });
named!(Tls13Suite {
    Aes128GcmSha256 => "TLS_AES_128_GCM_SHA256",
    Aes256GcmSha384 => "TLS_AES_256_GCM_SHA384",
    Chacha20Poly1305Sha256 => "TLS_CHACHA20_POLY1305_SHA256",
});
named!(TlsVersion { Tls10 => "TLSv1", Tls11 => "TLSv1.1", Tls12 => "TLSv1.2", Tls13 => "TLSv1.3" });
