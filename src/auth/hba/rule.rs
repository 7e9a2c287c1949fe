//! The typed form of a pg_hba.conf line: what [`super::parse`] produces
//! and [`super::matcher`] matches.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use ipnet::IpNet;
use regex::Regex;

/// The first field of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnType {
    /// `local`: Unix-domain sockets.
    Local,
    /// `host`: TCP, with or without TLS.
    Host,
    /// `hostssl`: TCP with TLS.
    HostSsl,
    /// `hostnossl`: TCP without TLS.
    HostNoSsl,
}

impl ConnType {
    /// The keyword as written in the file.
    pub fn keyword(self) -> &'static str {
        match self {
            ConnType::Local => "local",
            ConnType::Host => "host",
            ConnType::HostSsl => "hostssl",
            ConnType::HostNoSsl => "hostnossl",
        }
    }
}

/// A `/regex` database or user name: the source (without the slash) and
/// the compiled expression, searched unanchored as PostgreSQL does.
#[derive(Clone)]
pub struct NameRegex {
    /// The expression as written, without the leading `/`.
    pub source: String,
    /// The compiled expression.
    pub regex: Regex,
}

impl NameRegex {
    /// Compiles `source`, with PostgreSQL's message on failure.
    pub fn new(source: &str) -> Result<NameRegex, String> {
        let regex = Regex::new(source).map_err(|e| {
            // The crate's message is a multi-line picture; keep its verdict.
            let text = e.to_string();
            let verdict = (text.lines().rev())
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .trim_start_matches("error: ")
                .to_owned();
            format!("invalid regular expression \"{source}\": {verdict}")
        })?;
        Ok(NameRegex {
            source: source.to_owned(),
            regex,
        })
    }
}

impl fmt::Debug for NameRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}", self.source)
    }
}

impl PartialEq for NameRegex {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// One entry of the database field.
#[derive(Debug, Clone, PartialEq)]
pub enum DatabaseMatch {
    /// `all`: every database.
    All,
    /// `sameuser`: the database named as the user.
    SameUser,
    /// `replication`: physical replication, which pgharbor does not pool,
    /// so it never matches (as for any non-replication connection).
    Replication,
    /// A database name (a quoted keyword lands here).
    Name(String),
    /// `/regex`.
    Regex(NameRegex),
}

/// One entry of the user field.
#[derive(Debug, Clone, PartialEq)]
pub enum UserMatch {
    /// `all`: every user.
    All,
    /// A user name.
    Name(String),
    /// `/regex`.
    Regex(NameRegex),
}

/// The address field of a non-`local` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `all`: any address.
    All,
    /// `samehost`: any of this machine's own addresses.
    SameHost,
    /// `samenet`: any address on a subnet this machine is directly on.
    SameNet,
    /// `ADDR/BITS`; host bits may be set, as PostgreSQL allows.
    Cidr(IpNet),
    /// `ADDR MASK`, the mask in its own field (need not be contiguous).
    Masked {
        /// The address.
        addr: IpAddr,
        /// The mask, of the same family.
        mask: IpAddr,
    },
}

/// The authentication method of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Let the client in without credentials.
    Trust,
    /// Refuse the connection.
    Reject,
    /// md5 challenge (or SCRAM when the secret is SCRAM, as PostgreSQL).
    Md5,
    /// SCRAM-SHA-256.
    ScramSha256,
    /// Cleartext password.
    Password,
    /// The OS user of the peer process (Unix sockets only).
    Peer,
    /// The TLS client certificate (hostssl only).
    Cert,
}

impl Method {
    /// The keyword as written in the file.
    pub fn keyword(self) -> &'static str {
        match self {
            Method::Trust => "trust",
            Method::Reject => "reject",
            Method::Md5 => "md5",
            Method::ScramSha256 => "scram-sha-256",
            Method::Password => "password",
            Method::Peer => "peer",
            Method::Cert => "cert",
        }
    }
}

/// The `clientcert=` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCert {
    /// A certificate signed by a trusted CA.
    VerifyCa,
    /// That, and its CN matches the user name (or the map allows it).
    VerifyFull,
}

/// One pg_hba.conf line.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The file the line is in.
    pub file: Arc<Path>,
    /// Its 1-based line number.
    pub line: usize,
    /// Which connections it is for.
    pub conn_type: ConnType,
    /// Matches if any entry does.
    pub databases: Vec<DatabaseMatch>,
    /// Matches if any entry does.
    pub users: Vec<UserMatch>,
    /// The client addresses; `None` for `local`.
    pub address: Option<Address>,
    /// How to authenticate a client it matches.
    pub method: Method,
    /// Client certificate required (always `VerifyFull` for `cert`).
    pub client_cert: Option<ClientCert>,
    /// The ident map (`map=`) for peer and cert.
    pub map: Option<String>,
}
