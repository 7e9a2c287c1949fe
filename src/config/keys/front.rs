//! The rows of `[listen]`, `[tls]`, `[auth]` and `[admin]`: what clients
//! connect to and how they prove who they are.

use super::DefaultValue::{Bool, IfCertificate, Inherit, Int, List, Str, Unset};
use super::Reload::{Immediate, NewLogins, Restart};
use super::Section::{Admin, Auth, Listen, Service, Tls};
use super::{dur, opt, opt_dur, opt_path, Get, Key, Kind};
use crate::config::tcp::{MAX_KEEPALIVE_COUNT, MAX_KEEPALIVE_SECS};
use crate::config::{AuthMethod, Keepalive, TlsVersion};

/// The front-end TLS policies: verify-ca and verify-full need client
/// certificates, which the pooler does not request yet.
const FRONT_END_SSLMODES: &[&str] = &["disable", "allow", "prefer", "require"];

/// The rows, in file order.
pub(super) const KEYS: &[Key] = &[
    Key {
        section: Listen,
        name: "addresses",
        kind: Kind::Addresses,
        default: List(&["127.0.0.1"]),
        reload: Restart,
        doc: "TCP addresses to accept clients on; \"*\" is every address, [] turns TCP off.",
        get: Get::Global(|c| {
            let shown: Vec<String> = c.listen.addresses.iter().map(|a| a.to_string()).collect();
            shown.join(", ")
        }),
    },
    Key {
        section: Listen,
        name: "port",
        kind: Kind::Count { min: 1, max: 65535 },
        default: Int(6432),
        reload: Restart,
        doc: "TCP port, and the number in the Unix socket's name, `.s.PGSQL.PORT`.",
        get: Get::Global(|c| c.listen.port.to_string()),
    },
    Key {
        section: Listen,
        name: "unix_socket_dir",
        kind: Kind::Path,
        default: Str("/tmp"),
        reload: Restart,
        doc: "Directory of the Unix socket file; \"\" turns the Unix socket off.",
        get: Get::Global(|c| opt_path(c.listen.unix_socket_dir.as_deref())),
    },
    Key {
        section: Listen,
        name: "unix_socket_mode",
        kind: Kind::Mode,
        default: Str("0777"),
        reload: Restart,
        doc: "Permission bits of the socket file, as PostgreSQL's unix_socket_permissions.",
        get: Get::Global(|c| format!("{:04o}", c.listen.unix_socket_mode)),
    },
    Key {
        section: Listen,
        name: "client_login_timeout",
        kind: Kind::Duration { zero: false },
        default: Str("15s"),
        reload: NewLogins,
        doc: "A client that has not finished logging in within this time is closed.",
        get: Get::Global(|c| dur(c.listen.client_login_timeout)),
    },
    Key {
        section: Listen,
        name: "tcp_keepalive",
        kind: Kind::Bool,
        default: Bool(true),
        reload: NewLogins,
        doc: "TCP keepalive on client sockets, so a vanished client's machine is noticed.",
        get: Get::Global(|c| (c.listen.tcp.keepalive == Keepalive::On).to_string()),
    },
    Key {
        section: Listen,
        name: "tcp_keepidle",
        kind: Kind::Seconds {
            max: MAX_KEEPALIVE_SECS,
        },
        default: Str("0s"),
        reload: NewLogins,
        doc: "Idle time before the first keepalive probe; \"0s\" = the system default.",
        get: Get::Global(|c| opt_dur(c.listen.tcp.keepalive_idle)),
    },
    Key {
        section: Listen,
        name: "tcp_keepintvl",
        kind: Kind::Seconds {
            max: MAX_KEEPALIVE_SECS,
        },
        default: Str("0s"),
        reload: NewLogins,
        doc: "Time between keepalive probes; \"0s\" = the system default.",
        get: Get::Global(|c| opt_dur(c.listen.tcp.keepalive_interval)),
    },
    Key {
        section: Listen,
        name: "tcp_keepcnt",
        kind: Kind::Count {
            min: 0,
            max: MAX_KEEPALIVE_COUNT as i64,
        },
        default: Int(0),
        reload: NewLogins,
        doc: "Unanswered probes before the connection is dropped; 0 = the system default.",
        get: Get::Global(|c| c.listen.tcp.keepalive_count.unwrap_or(0).to_string()),
    },
    Key {
        section: Listen,
        name: "tcp_user_timeout",
        kind: Kind::Duration { zero: true },
        default: Str("0s"),
        reload: NewLogins,
        doc: "TCP_USER_TIMEOUT: how long sent data may stay unacknowledged; \"0s\" = the system default.",
        get: Get::Global(|c| opt_dur(c.listen.tcp.user_timeout)),
    },
    Key {
        section: Tls,
        name: "cert_file",
        kind: Kind::Path,
        default: Unset,
        reload: NewLogins,
        doc: "PEM certificate chain offered to clients; set with key_file, or neither.",
        get: Get::Global(|c| opt_path(c.tls.cert_file.as_deref())),
    },
    Key {
        section: Tls,
        name: "key_file",
        kind: Kind::Path,
        default: Unset,
        reload: NewLogins,
        doc: "PEM private key of cert_file.",
        get: Get::Global(|c| opt_path(c.tls.key_file.as_deref())),
    },
    Key {
        section: Tls,
        name: "sslmode",
        kind: Kind::Choice(FRONT_END_SSLMODES),
        default: IfCertificate {
            with: "prefer",
            without: "disable",
        },
        reload: NewLogins,
        doc: "TLS policy for TCP clients.",
        get: Get::Global(|c| c.tls.sslmode.to_string()),
    },
    Key {
        section: Tls,
        name: "socketsslmode",
        kind: Kind::Choice(FRONT_END_SSLMODES),
        default: Str("disable"),
        reload: NewLogins,
        doc: "TLS policy for Unix-socket clients (the file system already protects them).",
        get: Get::Global(|c| c.tls.socketsslmode.to_string()),
    },
    Key {
        section: Tls,
        name: "loopbacksslmode",
        kind: Kind::Choice(FRONT_END_SSLMODES),
        default: Inherit("tls.sslmode"),
        reload: NewLogins,
        doc: "TLS policy for TCP clients from loopback addresses (127.0.0.0/8, ::1).",
        get: Get::Global(|c| opt(c.tls.loopbacksslmode)),
    },
    Key {
        section: Tls,
        name: "min_protocol_version",
        kind: Kind::Choice(TlsVersion::NAMES),
        default: Str("TLSv1.2"),
        reload: NewLogins,
        doc: "Lowest TLS version a client may negotiate.",
        get: Get::Global(|c| c.tls.min_protocol_version.to_string()),
    },
    Key {
        section: Auth,
        name: "method",
        kind: Kind::Choice(AuthMethod::NAMES),
        default: Str("scram-sha-256"),
        reload: NewLogins,
        doc: "How clients authenticate.",
        get: Get::Global(|c| c.auth.method.to_string()),
    },
    Key {
        section: Auth,
        name: "auth_file",
        kind: Kind::Path,
        default: Unset,
        reload: NewLogins,
        doc: "PgBouncer-style user list (\"user\" \"secret\" per line); required unless method is trust.",
        get: Get::Global(|c| opt_path(c.auth.auth_file.as_deref())),
    },
    Key {
        section: Admin,
        name: "users",
        kind: Kind::Names,
        default: List(&[]),
        reload: Immediate,
        doc: "Users allowed on the admin console (the virtual database \"pgharbor\").",
        get: Get::Global(|c| c.admin.users.join(", ")),
    },
    Key {
        section: Admin,
        name: "metrics_listen",
        kind: Kind::SocketAddr,
        default: Unset,
        reload: Restart,
        doc: "HTTP address of the Prometheus metrics endpoint (GET /metrics, GET /health).",
        get: Get::Global(|c| opt(c.admin.metrics_listen)),
    },
    Key {
        section: Service,
        name: "user",
        kind: Kind::Text,
        default: Unset,
        reload: Restart,
        doc: "Unix user to become once the listening sockets are bound (`--user` wins).",
        get: Get::Global(|c| opt(c.service.user.as_deref())),
    },
];
