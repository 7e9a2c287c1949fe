//! libpq connection strings, in both of libpq's forms:
//!
//! - keyword/value: `host=/tmp port=5432 dbname='my db'` — pairs separated
//!   by whitespace, spaces allowed around `=`, values optionally in single
//!   quotes, a backslash escaping the next character (quoted or not);
//! - URI: `postgresql://user:secret@[::1]:5432/app?sslmode=require`, every
//!   part percent-decoded, so `postgresql://%2Ftmp/app` names a socket dir.
//!
//! Both are first split into (key, value) pairs, then interpreted by one
//! function, so the two forms cannot drift apart. Host lists
//! (`host=a,b port=5432,5433`) are matched up in `hosts.rs`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use super::{BackendHost, ConnInfo};
use crate::config::SslMode;

mod hosts;
mod negotiation;
mod tcp;
#[cfg(test)]
pub(crate) use tcp::KEYWORDS as TCP_KEYWORDS;
mod tls;
mod unsupported;
mod uri;

pub use hosts::{HostSpec, LoadBalance, TargetSessionAttrs};
pub use negotiation::SslNegotiation;
pub use tls::{
    ChannelBinding, ClientCertMode, Compression, ServerName, Sni, TlsOptions, TlsProtocol,
};

/// Shown instead of a password in `Debug`, `Display` and `redacted()`.
const HIDDEN: &str = "********";

/// Why a connection string could not be parsed. Never contains a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnInfoError {
    /// A keyword libpq does not know (libpq refuses these too).
    #[error("invalid connection option \"{0}\"")]
    UnknownKeyword(String),
    /// A keyword not followed by `=`.
    #[error("missing \"=\" after \"{0}\" in connection info string")]
    MissingEquals(String),
    /// `=value` with nothing before it.
    #[error("missing keyword before \"=\" in connection info string")]
    EmptyKey,
    /// A `'` value that never ends; holds the keyword.
    #[error("unterminated quoted string in connection info string (value of \"{0}\")")]
    UnterminatedQuote(String),
    /// `port` is not a number from 1 to 65535.
    #[error("invalid port \"{0}\" (expected a number from 1 to 65535)")]
    InvalidPort(String),
    /// A value that its keyword does not accept.
    #[error("invalid {key} \"{value}\": {reason}")]
    InvalidValue {
        /// The keyword.
        key: String,
        /// The rejected value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// `host`, `hostaddr` and `port` lists that do not match up (libpq's
    /// "could not match ..." errors).
    #[error("{key} list \"{value}\" does not match the other host lists: {reason}")]
    ListMismatch {
        /// `host` or `port`.
        key: &'static str,
        /// The list.
        value: String,
        /// The counts that differ.
        reason: String,
    },
    /// A Linux abstract-namespace socket (`host=@name`).
    #[error("abstract Unix socket \"{0}\" is not supported: give a socket directory starting with \"/\"")]
    AbstractSocket(String),
    /// A libpq keyword (or value) pgharbor does not implement; refused
    /// rather than accepted and ignored.
    #[error("\"{key}\" is not supported by pgharbor: {reason}")]
    Unsupported {
        /// The keyword.
        key: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A malformed `postgresql://` URI.
    #[error("invalid URI: {0}")]
    Uri(String),
    /// `sslnegotiation=direct` under a mode that allows plaintext (libpq
    /// 17's rule and message).
    #[error("weak {key} \"{mode}\" may not be used with sslnegotiation=direct (use \"require\", \"verify-ca\", or \"verify-full\")")]
    WeakSslMode {
        /// `sslmode` or `socketsslmode`.
        key: &'static str,
        /// Its value.
        mode: SslMode,
    },
}

impl Default for ConnInfo {
    fn default() -> Self {
        ConnInfo {
            hosts: vec![HostSpec::default()],
            target_session_attrs: TargetSessionAttrs::Any,
            load_balance_hosts: LoadBalance::Disable,
            dbname: None,
            user: None,
            password: None,
            sslmode: SslMode::Prefer,
            socketsslmode: SslMode::Disable,
            sslrootcert: None,
            sslnegotiation: SslNegotiation::Postgres,
            connect_timeout: None,
            tls: TlsOptions::default(),
            tcp: Default::default(),
            extra: BTreeMap::new(),
        }
    }
}

impl ConnInfo {
    /// Socket directory used when the string names no host (Debian's libpq default).
    pub const DEFAULT_SOCKET_DIR: &'static str = "/var/run/postgresql";
    /// Port used when the string names none.
    pub const DEFAULT_PORT: u16 = 5432;

    /// Parses a keyword/value string or a `postgresql://` / `postgres://` URI.
    pub fn parse(s: &str) -> Result<ConnInfo, ConnInfoError> {
        let s = s.trim();
        let pairs = match uri_rest(s) {
            Some(rest) => uri::uri_pairs(rest)?,
            None => keyword_pairs(s)?,
        };
        from_pairs(pairs)
    }

    /// Keyword/value form with the password replaced by `********`; safe to log.
    pub fn redacted(&self) -> String {
        let mut out = String::new();
        for (key, value) in hosts::pairs(&self.hosts) {
            push_pair(&mut out, key, &value);
        }
        if self.target_session_attrs != TargetSessionAttrs::Any {
            push_pair(
                &mut out,
                "target_session_attrs",
                self.target_session_attrs.as_str(),
            );
        }
        if self.load_balance_hosts != LoadBalance::Disable {
            push_pair(
                &mut out,
                "load_balance_hosts",
                self.load_balance_hosts.as_str(),
            );
        }
        let optional = [
            ("dbname", self.dbname.as_deref()),
            ("user", self.user.as_deref()),
            ("password", self.password.as_ref().map(|_| HIDDEN)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                push_pair(&mut out, key, value);
            }
        }
        push_pair(&mut out, "sslmode", self.sslmode.as_str());
        push_pair(&mut out, "socketsslmode", self.socketsslmode.as_str());
        if let Some(path) = &self.sslrootcert {
            push_pair(&mut out, "sslrootcert", &path.display().to_string());
        }
        if self.sslnegotiation != SslNegotiation::Postgres {
            push_pair(&mut out, "sslnegotiation", self.sslnegotiation.as_str());
        }
        tcp::push_pairs(self, &mut out);
        for (key, value) in self.tls.pairs() {
            push_pair(&mut out, key, &value);
        }
        for (key, value) in &self.extra {
            push_pair(&mut out, key, if is_secret(key) { HIDDEN } else { value });
        }
        out
    }

    /// The first host of the list (libpq's default when it has one entry).
    pub fn first_host(&self) -> &HostSpec {
        // Invariant: parse and Default always give at least one host.
        &self.hosts[0]
    }

    /// The startup parameters every backend gets from the conninfo, as
    /// libpq sends them: `application_name` (else
    /// `fallback_application_name`), `options`, `client_encoding`.
    pub fn startup_params(&self) -> Vec<(String, String)> {
        let application_name = self
            .extra
            .get("application_name")
            .or_else(|| self.extra.get("fallback_application_name"));
        let named = application_name.map(|v| ("application_name", v));
        let others = ["options", "client_encoding"]
            .into_iter()
            .filter_map(|k| self.extra.get(k).map(|v| (k, v)));
        named
            .into_iter()
            .chain(others)
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    /// The TLS policy toward one host: `socketsslmode` on a Unix socket, `sslmode` on TCP.
    pub fn tls_mode(&self, host: &HostSpec) -> SslMode {
        match host.host {
            BackendHost::Unix(_) => self.socketsslmode,
            BackendHost::Tcp(_) => self.sslmode,
        }
    }
}

impl fmt::Display for ConnInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for ConnInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let extra: BTreeMap<&str, &str> = self
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), if is_secret(k) { HIDDEN } else { v.as_str() }))
            .collect();
        f.debug_struct("ConnInfo")
            .field("hosts", &self.hosts)
            .field("target_session_attrs", &self.target_session_attrs)
            .field("load_balance_hosts", &self.load_balance_hosts)
            .field("dbname", &self.dbname)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| HIDDEN))
            .field("sslmode", &self.sslmode)
            .field("socketsslmode", &self.socketsslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("sslnegotiation", &self.sslnegotiation)
            .field("connect_timeout", &self.connect_timeout)
            .field("tls", &self.tls)
            .field("tcp", &self.tcp)
            .field("extra", &extra)
            .finish()
    }
}

/// Keys whose values are hidden (`password`, libpq's `sslpassword`, ...).
fn is_secret(key: &str) -> bool {
    key.contains("password")
}

/// Splits a keyword/value connection string into its pairs, as libpq does,
/// without interpreting them (for tools that rewrite connection strings).
pub fn split_keyword_pairs(s: &str) -> Result<Vec<(String, String)>, ConnInfoError> {
    keyword_pairs(s)
}

/// Joins pairs into a keyword/value connection string, quoted as libpq reads it.
pub fn join_keyword_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (key, value) in pairs {
        push_pair(&mut out, key, value);
    }
    out
}

/// Appends ` key=value`, quoting the value when libpq would need it.
fn push_pair(out: &mut String, key: &str, value: &str) {
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(key);
    out.push('=');
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_ascii_whitespace() || c == '\'' || c == '\\');
    if plain {
        out.push_str(value);
        return;
    }
    out.push('\'');
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
}

/// The part after `postgresql://` or `postgres://`, if `s` is a URI.
fn uri_rest(s: &str) -> Option<&str> {
    s.strip_prefix("postgresql://")
        .or_else(|| s.strip_prefix("postgres://"))
}

/// Splits the keyword/value form into pairs, as libpq's `conninfo_parse`.
fn keyword_pairs(s: &str) -> Result<Vec<(String, String)>, ConnInfoError> {
    let mut pairs = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_ascii_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(ConnInfoError::MissingEquals(key));
        }
        if key.is_empty() {
            return Err(ConnInfoError::EmptyKey);
        }
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return Err(ConnInfoError::UnterminatedQuote(key)),
                    },
                    Some(c) => value.push(c),
                    None => return Err(ConnInfoError::UnterminatedQuote(key)),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_ascii_whitespace()) {
                if c == '\\' {
                    if let Some(escaped) = chars.next() {
                        value.push(escaped);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

/// The other keywords libpq accepts, kept as given: `application_name`
/// (or, without it, `fallback_application_name`), `options` and
/// `client_encoding` become startup parameters of every backend. The
/// keywords pgharbor implements itself or refuses are read before these.
const LIBPQ_KEYWORDS: &[&str] = &[
    "application_name",
    "fallback_application_name",
    "options",
    "client_encoding",
];

/// Interprets the pairs of either form; a later key overrides an earlier one, as in libpq.
fn from_pairs(pairs: Vec<(String, String)>) -> Result<ConnInfo, ConnInfoError> {
    let mut info = ConnInfo::default();
    let mut raw = hosts::RawHosts::default();
    for (key, value) in pairs {
        // Ahead of LIBPQ_KEYWORDS, which may still name some of these.
        if tls::KEYWORDS.contains(&key.as_str()) {
            tls::apply(&mut info, &key, value)?;
            continue;
        }
        if unsupported::covers(&key) {
            unsupported::check(&key, &value)?;
            continue;
        }
        match key.as_str() {
            k if hosts::KEYWORDS.contains(&k) => hosts::set(&mut info, &mut raw, k, value)?,
            "dbname" => info.dbname = non_empty(value),
            "user" => info.user = non_empty(value),
            "password" => info.password = non_empty(value),
            "sslmode" => info.sslmode = parse_sslmode(&key, value)?,
            "socketsslmode" => info.socketsslmode = parse_sslmode(&key, value)?,
            "sslrootcert" => info.sslrootcert = non_empty(value).map(PathBuf::from),
            "sslnegotiation" => info.sslnegotiation = negotiation::parse(&key, value)?,
            k if tcp::KEYWORDS.contains(&k) => tcp::set(&mut info, k, value)?,
            "" => return Err(ConnInfoError::EmptyKey),
            k if LIBPQ_KEYWORDS.contains(&k) => {
                info.extra.insert(key, value);
            }
            _ => return Err(ConnInfoError::UnknownKeyword(key)),
        }
    }
    tls::finish(&info.tls)?;
    info.hosts = raw.resolve()?;
    negotiation::check(&info)?;
    Ok(info)
}

fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

fn parse_sslmode(key: &str, value: String) -> Result<SslMode, ConnInfoError> {
    value.parse().map_err(|_| ConnInfoError::InvalidValue {
        key: key.to_string(),
        value,
        reason: "expected disable, allow, prefer, require, verify-ca or verify-full".to_string(),
    })
}

#[cfg(test)]
mod tests;
