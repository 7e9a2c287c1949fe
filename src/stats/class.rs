//! The grouping key of the overhead report.

use std::fmt;

use crate::listener::Transport;

/// Which end of the pooler a connection is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// An application connected to pgharbor.
    Client,
    /// pgharbor connected to PostgreSQL.
    Backend,
}

/// How a client proved who it is: what a login cost depends on it as much
/// as on the transport (peer costs no cryptography, SCRAM a PBKDF2 check).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
// The names as a takeover sends them.
#[serde(rename_all = "kebab-case")]
pub enum AuthKind {
    /// No proof asked.
    Trust,
    /// The OS user at the other end of the Unix socket (SO_PEERCRED).
    Peer,
    /// A cleartext password.
    Password,
    /// An md5 challenge.
    Md5,
    /// SCRAM-SHA-256.
    Scram,
    /// SCRAM-SHA-256-PLUS: SCRAM bound to the TLS channel.
    ScramPlus,
    /// A verified client certificate.
    Cert,
}

impl AuthKind {
    /// The name in reports and metric labels (pg_hba.conf's words).
    pub fn as_str(self) -> &'static str {
        match self {
            AuthKind::Trust => "trust",
            AuthKind::Peer => "peer",
            AuthKind::Password => "password",
            AuthKind::Md5 => "md5",
            AuthKind::Scram => "scram-sha-256",
            AuthKind::ScramPlus => "scram-sha-256-plus",
            AuthKind::Cert => "cert",
        }
    }
}

/// Side × transport class × TLS × (clients) authentication method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Class {
    /// Client or backend.
    pub side: Side,
    /// Unix socket, loopback TCP or remote TCP.
    pub transport: Transport,
    /// Whether TLS was in use.
    pub tls: bool,
    /// How a client authenticated; None for backends, and for clients that
    /// failed before a method was settled.
    pub auth: Option<AuthKind>,
}

impl Class {
    /// A client class.
    pub fn client(transport: Transport, tls: bool, auth: Option<AuthKind>) -> Class {
        Class {
            side: Side::Client,
            transport,
            tls,
            auth,
        }
    }

    /// A backend class.
    pub fn backend(transport: Transport, tls: bool) -> Class {
        Class {
            side: Side::Backend,
            transport,
            tls,
            auth: None,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Client => "client",
            Side::Backend => "server",
        })
    }
}
