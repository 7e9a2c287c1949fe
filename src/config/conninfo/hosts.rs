//! libpq's host lists and the keywords that choose among them, with
//! fe-connect.c's rules (connectOptions2): `host`, `hostaddr` and `port`
//! are comma-separated lists; there are as many hosts as `hostaddr` (else
//! `host`) entries; `host` must then match `hostaddr` one for one; `port`
//! gives one port for all hosts or one per host; an empty entry means the
//! default (socket directory, port 5432, or `host` when `hostaddr` is
//! empty). `target_session_attrs` says which server fits and
//! `load_balance_hosts` whether the list is tried in order.

use std::net::IpAddr;
use std::path::PathBuf;

use super::{ConnInfoError, ServerName};
use crate::config::{BackendHost, ConnInfo};

/// One host of a conninfo's list, with everything resolved but DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Where to connect: the `hostaddr` entry if given, else the `host`
    /// entry, else the default socket directory.
    pub host: BackendHost,
    /// Port (also the socket file's number).
    pub port: u16,
    /// Which name verify-full checks and SNI sends for this host.
    pub server_name: ServerName,
}

impl Default for HostSpec {
    fn default() -> Self {
        HostSpec {
            host: BackendHost::Unix(PathBuf::from(ConnInfo::DEFAULT_SOCKET_DIR)),
            port: ConnInfo::DEFAULT_PORT,
            server_name: ServerName::Host,
        }
    }
}

impl HostSpec {
    /// The name verify-full checks and SNI sends: `host`, also when
    /// `hostaddr` gives the address; None with `hostaddr` alone or a socket.
    pub fn tls_server_name(&self) -> Option<&str> {
        match (&self.server_name, &self.host) {
            (ServerName::Named(name), _) => Some(name),
            (ServerName::Host, BackendHost::Tcp(host)) => Some(host),
            (ServerName::Host, BackendHost::Unix(_)) | (ServerName::Unnamed, _) => None,
        }
    }

    /// `<dir>/.s.PGSQL.<port>` for a Unix-socket host, `None` for TCP.
    pub fn socket_path(&self) -> Option<PathBuf> {
        match &self.host {
            BackendHost::Unix(dir) => Some(dir.join(format!(".s.PGSQL.{}", self.port))),
            BackendHost::Tcp(_) => None,
        }
    }

    /// `host:port` or the socket path, for logs and SHOW.
    pub fn describe(&self) -> String {
        match (&self.host, self.socket_path()) {
            (_, Some(path)) => path.display().to_string(),
            (BackendHost::Tcp(h), None) => format!("{h}:{}", self.port),
            (BackendHost::Unix(dir), None) => dir.display().to_string(),
        }
    }
}

/// `target_session_attrs`: which server a new backend may stay on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TargetSessionAttrs {
    /// Any server (the default).
    #[default]
    Any,
    /// A server whose sessions can write (not in hot standby, and
    /// `default_transaction_read_only` off).
    ReadWrite,
    /// A server whose sessions cannot write.
    ReadOnly,
    /// A server not in hot standby.
    Primary,
    /// A server in hot standby.
    Standby,
    /// A standby if any host is one, else any server (a second pass).
    PreferStandby,
}

impl TargetSessionAttrs {
    const ALL: [TargetSessionAttrs; 6] = [
        TargetSessionAttrs::Any,
        TargetSessionAttrs::ReadWrite,
        TargetSessionAttrs::ReadOnly,
        TargetSessionAttrs::Primary,
        TargetSessionAttrs::Standby,
        TargetSessionAttrs::PreferStandby,
    ];

    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetSessionAttrs::Any => "any",
            TargetSessionAttrs::ReadWrite => "read-write",
            TargetSessionAttrs::ReadOnly => "read-only",
            TargetSessionAttrs::Primary => "primary",
            TargetSessionAttrs::Standby => "standby",
            TargetSessionAttrs::PreferStandby => "prefer-standby",
        }
    }
}

/// `load_balance_hosts`: the order in which the hosts are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LoadBalance {
    /// In the order given (the default).
    #[default]
    Disable,
    /// In a random order, drawn again for every new backend.
    Random,
}

impl LoadBalance {
    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadBalance::Disable => "disable",
            LoadBalance::Random => "random",
        }
    }
}

/// The keywords this module reads.
pub(super) const KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "target_session_attrs",
    "load_balance_hosts",
];

/// The lists as written, kept until every pair is read (a later keyword
/// overrides an earlier one, so nothing can be matched up before the end).
#[derive(Debug, Default)]
pub(super) struct RawHosts {
    host: String,
    hostaddr: String,
    port: String,
}

/// Records one of [`KEYWORDS`].
pub(super) fn set(
    info: &mut ConnInfo,
    raw: &mut RawHosts,
    key: &str,
    value: String,
) -> Result<(), ConnInfoError> {
    match key {
        "host" => raw.host = value,
        "hostaddr" => raw.hostaddr = value,
        "port" => raw.port = value,
        "target_session_attrs" => {
            info.target_session_attrs = TargetSessionAttrs::ALL
                .into_iter()
                .find(|t| t.as_str() == value)
                .ok_or_else(|| ConnInfoError::InvalidValue {
                    key: key.to_string(),
                    value,
                    reason:
                        "expected any, read-write, read-only, primary, standby or prefer-standby"
                            .to_string(),
                })?;
        }
        _ => {
            info.load_balance_hosts = match value.as_str() {
                "disable" => LoadBalance::Disable,
                "random" => LoadBalance::Random,
                _ => {
                    return Err(ConnInfoError::InvalidValue {
                        key: key.to_string(),
                        value,
                        reason: "expected disable or random".to_string(),
                    })
                }
            }
        }
    }
    Ok(())
}

/// libpq's split: an empty string is no list at all, otherwise every comma
/// separates two entries (so `a,` is `a` and an empty entry).
fn entries(list: &str) -> Vec<&str> {
    if list.is_empty() {
        Vec::new()
    } else {
        list.split(',').collect()
    }
}

impl RawHosts {
    /// Matches the lists up into hosts, as libpq's connectOptions2.
    pub(super) fn resolve(self) -> Result<Vec<HostSpec>, ConnInfoError> {
        let hosts = entries(&self.host);
        let addrs = entries(&self.hostaddr);
        let ports = entries(&self.port);
        let count = match (addrs.len(), hosts.len()) {
            (0, 0) => 1,
            (0, h) => h,
            (a, 0) => a,
            (a, h) if a == h => a,
            (a, h) => {
                return Err(ConnInfoError::ListMismatch {
                    key: "host",
                    value: self.host.clone(),
                    reason: format!("{h} host names for {a} hostaddr values"),
                })
            }
        };
        if ports.len() > 1 && ports.len() != count {
            return Err(ConnInfoError::ListMismatch {
                key: "port",
                value: self.port.clone(),
                reason: format!("{} port numbers for {count} hosts", ports.len()),
            });
        }
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let host = parse_host(hosts.get(i).copied().unwrap_or(""))?;
            let addr = parse_hostaddr(addrs.get(i).copied().unwrap_or(""))?;
            // One port for all hosts, or this host's own.
            let port = match ports.len() {
                0 => "",
                1 => ports[0],
                _ => ports[i],
            };
            let port = parse_port(port, &self.port)?;
            // As in libpq, hostaddr is where we connect; host then names the
            // server for verify-full and SNI.
            let spec = match (addr, host) {
                (Some(addr), host) => HostSpec {
                    host: addr,
                    port,
                    server_name: match host {
                        Some(BackendHost::Tcp(name)) => ServerName::Named(name),
                        _ => ServerName::Unnamed,
                    },
                },
                (None, Some(host)) => HostSpec {
                    host,
                    port,
                    server_name: ServerName::Host,
                },
                (None, None) => HostSpec {
                    port,
                    ..HostSpec::default()
                },
            };
            out.push(spec);
        }
        Ok(out)
    }
}

/// One `host` entry; empty means the default.
fn parse_host(value: &str) -> Result<Option<BackendHost>, ConnInfoError> {
    if value.is_empty() {
        return Ok(None);
    }
    if value.starts_with('@') {
        return Err(ConnInfoError::AbstractSocket(value.to_string()));
    }
    if value.starts_with('/') {
        return Ok(Some(BackendHost::Unix(PathBuf::from(value))));
    }
    Ok(Some(BackendHost::Tcp(value.to_string())))
}

/// One `hostaddr` entry: a numeric address, or empty for "use host".
fn parse_hostaddr(value: &str) -> Result<Option<BackendHost>, ConnInfoError> {
    if value.is_empty() {
        return Ok(None);
    }
    if value.parse::<IpAddr>().is_ok() {
        return Ok(Some(BackendHost::Tcp(value.to_string())));
    }
    let reason = if value.starts_with('/') {
        "a socket directory belongs in host, not hostaddr"
    } else {
        "expected a numeric IPv4 or IPv6 address"
    };
    Err(ConnInfoError::InvalidValue {
        key: "hostaddr".to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    })
}

/// One `port` entry; empty means the default, as in libpq. `list` is the
/// whole value, named in the error when the entry is one of several.
fn parse_port(value: &str, list: &str) -> Result<u16, ConnInfoError> {
    if value.is_empty() {
        return Ok(ConnInfo::DEFAULT_PORT);
    }
    match value.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ if list.contains(',') => Err(ConnInfoError::InvalidValue {
            key: "port".to_string(),
            value: list.to_string(),
            reason: format!("\"{value}\" is not a number from 1 to 65535"),
        }),
        _ => Err(ConnInfoError::InvalidPort(value.to_string())),
    }
}

/// Writes `host`, `hostaddr` and `port` back as lists libpq reads the
/// same way: `hostaddr` only when some host has one, `port` once when
/// every host has the same.
pub(super) fn pairs(hosts: &[HostSpec]) -> Vec<(&'static str, String)> {
    let join = |f: &dyn Fn(&HostSpec) -> String| hosts.iter().map(f).collect::<Vec<_>>().join(",");
    let place = |h: &HostSpec| match &h.host {
        BackendHost::Tcp(name) => name.clone(),
        BackendHost::Unix(dir) => dir.display().to_string(),
    };
    let mut out = Vec::new();
    if hosts.iter().all(|h| h.server_name == ServerName::Host) {
        out.push(("host", join(&place)));
    } else {
        let names = join(&|h| match &h.server_name {
            ServerName::Host => place(h),
            ServerName::Named(name) => name.clone(),
            ServerName::Unnamed => String::new(),
        });
        if names.chars().any(|c| c != ',') {
            out.push(("host", names));
        }
        let addrs = join(&|h| match h.server_name {
            ServerName::Host => String::new(),
            _ => place(h),
        });
        out.push(("hostaddr", addrs));
    }
    let first = hosts.first().map_or(ConnInfo::DEFAULT_PORT, |h| h.port);
    if hosts.iter().all(|h| h.port == first) {
        out.push(("port", first.to_string()));
    } else {
        out.push(("port", join(&|h| h.port.to_string())));
    }
    out
}

#[cfg(test)]
mod tests;
