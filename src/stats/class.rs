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

/// Side × transport class × TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Class {
    /// Client or backend.
    pub side: Side,
    /// Unix socket, loopback TCP or remote TCP.
    pub transport: Transport,
    /// Whether TLS was in use.
    pub tls: bool,
}

impl Class {
    /// A client class.
    pub fn client(transport: Transport, tls: bool) -> Class {
        Class {
            side: Side::Client,
            transport,
            tls,
        }
    }

    /// A backend class.
    pub fn backend(transport: Transport, tls: bool) -> Class {
        Class {
            side: Side::Backend,
            transport,
            tls,
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
