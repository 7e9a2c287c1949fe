//! `SHOW CLIENTS` and `SHOW SERVERS`, with PgBouncer's (1.24) socket
//! columns, from the client registry and each pool's server registry.
//!
//! - `ptr` and `link` are `c<id>` / `s<id>` (pgharbor's connection ids)
//!   instead of memory addresses: a client's `link` is the `ptr` of the
//!   backend it holds and that backend's `link` is the client's `ptr`, NULL
//!   when there is none; `id` is the same number.
//! - `wait` / `wait_us` (clients): how long the client has been waiting for
//!   a backend, in whole seconds and the microseconds beyond them; 0 when
//!   it is not waiting. Computed when SHOW runs from the time the client
//!   recorded when its wait began.
//! - `application_name`: the one the client sent in its startup packet
//!   (a later `SET application_name` is not followed), empty when it sent
//!   none, as PgBouncer shows it; on a server row, that of the client
//!   holding it, empty when none does.
//!
//! - `tls`: what the connection's TLS session negotiated, in PgBouncer's
//!   form (`TLSv1.3/TLS_AES_128_GCM_SHA256/ECDH=X25519`), empty without TLS.
//!
//! What differs from PgBouncer: times are UTC. Not recorded, so NULL:
//! `local_addr`, `local_port`, `request_time`; `close_needed` and
//! `prepared_statements` are 0.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::rows::{ResultSet, Type, Value};
use super::show::seconds_and_us;
use super::Authorized;
use crate::config::{BackendHost, Config};
use crate::listener::Transport;
use crate::pooler::Pooler;
use crate::registry::ClientState;
use crate::tls::label::Label;

const COLUMNS: [(&str, Type); 21] = [
    ("type", Type::Text),
    ("user", Type::Text),
    ("database", Type::Text),
    ("replication", Type::Text),
    ("state", Type::Text),
    ("addr", Type::Text),
    ("port", Type::Int8),
    ("local_addr", Type::Text),
    ("local_port", Type::Int8),
    ("connect_time", Type::Text),
    ("request_time", Type::Text),
    ("wait", Type::Int8),
    ("wait_us", Type::Int8),
    ("close_needed", Type::Int8),
    ("ptr", Type::Text),
    ("link", Type::Text),
    ("remote_pid", Type::Int8),
    ("tls", Type::Text),
    ("application_name", Type::Text),
    ("prepared_statements", Type::Int8),
    ("id", Type::Int8),
];

/// One socket row: the parts that vary between clients and servers.
struct Socket {
    kind: &'static str,
    user: String,
    database: String,
    state: &'static str,
    addr: String,
    port: Option<u16>,
    connected_at: SystemTime,
    ptr: String,
    link: Option<String>,
    remote_pid: i64,
    tls: Option<Label>,
    wait: Duration,
    application_name: String,
    id: u64,
}

impl Socket {
    fn row(self) -> Vec<Value> {
        let (wait, wait_us) = seconds_and_us(self.wait);
        vec![
            self.kind.into(),
            self.user.into(),
            self.database.into(),
            "none".into(),
            self.state.into(),
            self.addr.into(),
            self.port.map_or(Value::Null, |p| Value::Int(p.into())),
            Value::Null,
            Value::Null,
            timestamp(self.connected_at).into(),
            Value::Null,
            wait,
            wait_us,
            Value::Int(0),
            self.ptr.into(),
            Value::opt_text(self.link),
            Value::Int(self.remote_pid),
            // PgBouncer's form (`TLSv1.3/suite/ECDH=group`); empty without TLS.
            self.tls.map_or_else(String::new, |l| l.to_string()).into(),
            self.application_name.into(),
            Value::Int(0),
            Value::uint(self.id),
        ]
    }
}

/// `2026-11-30 14:35:44 UTC`, PgBouncer's layout.
fn timestamp(t: SystemTime) -> String {
    let rfc = humantime::format_rfc3339_seconds(t).to_string();
    format!("{} UTC", rfc.trim_end_matches('Z').replacen('T', " ", 1))
}

/// PgBouncer's state names where it has one.
fn client_state(s: ClientState) -> &'static str {
    match s {
        // PgBouncer counts a client between transactions as active too.
        ClientState::Active | ClientState::Idle => "active",
        ClientState::WaitingForBackend => "waiting",
        ClientState::Negotiating | ClientState::Authenticating => "login",
        ClientState::Closing => "closing",
    }
}

/// Address and port of a client: `unix` and the listening port for the
/// socket (as PgBouncer shows it), else the peer's address and port.
fn client_addr(peer: &str, transport: Transport, config: &Config) -> (String, Option<u16>) {
    if transport == Transport::Unix {
        return ("unix".to_string(), Some(config.listen.port));
    }
    match peer.rsplit_once(':') {
        Some((host, port)) => (
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port.parse().ok(),
        ),
        None => (peer.to_string(), None),
    }
}

/// `SHOW CLIENTS`: logged-in clients (not the console sessions).
pub fn clients(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let config = pooler.config();
    let mut rs = ResultSet::new(COLUMNS);
    for c in pooler.clients.list() {
        let (addr, port) = client_addr(&c.peer, c.transport, &config);
        let socket = Socket {
            kind: "C",
            user: c.user,
            database: c.database,
            state: client_state(c.state),
            addr,
            port,
            connected_at: c.connected_at,
            ptr: format!("c{}", c.id),
            link: c.backend.map(|b| format!("s{b}")),
            remote_pid: 0,
            tls: c.tls,
            wait: c.wait.unwrap_or_default(),
            application_name: c.application_name.unwrap_or_default(),
            id: c.id,
        };
        rs.push(socket.row());
    }
    rs
}

/// `SHOW SERVERS`: every open backend of every pool, each with the host
/// of its conninfo's list that it is on (`unix` for a socket, as PgBouncer).
pub fn servers(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let mut rs = ResultSet::new(COLUMNS);
    let app_names: BTreeMap<u64, String> = pooler
        .clients
        .list()
        .into_iter()
        .filter_map(|c| Some((c.id, c.application_name?)))
        .collect();
    let mut pools = pooler.pools.all();
    pools.sort_by(|a, b| a.key.cmp(&b.key));
    for pool in pools {
        for s in pool.servers().list() {
            let (addr, port) = match s.host.as_deref() {
                Some(t) => match &t.host {
                    BackendHost::Tcp(h) => (h.clone(), Some(t.port)),
                    BackendHost::Unix(_) => ("unix".to_string(), Some(t.port)),
                },
                None => (String::new(), None),
            };
            let socket = Socket {
                kind: "S",
                user: pool.key.user.clone(),
                database: pool.key.database.clone(),
                state: s.state.as_str(),
                addr,
                port,
                connected_at: s.connected_at,
                ptr: format!("s{}", s.id),
                link: s.client.map(|c| format!("c{c}")),
                remote_pid: s.pid.into(),
                tls: s.tls,
                wait: Duration::ZERO,
                application_name: s
                    .client
                    .and_then(|c| app_names.get(&c).cloned())
                    .unwrap_or_default(),
                id: s.id,
            };
            rs.push(socket.row());
        }
    }
    rs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_and_addresses_look_like_pgbouncer_s() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(timestamp(t), "2023-11-14 22:13:20 UTC");
        let config = crate::config::Config::parse(
            "[auth]\nmethod = \"trust\"\n[listen]\nport = 7000\n",
            std::path::Path::new("/x/pgharbor.toml"),
        )
        .unwrap();
        let tcp = Transport::LoopbackTcp;
        let unix = Transport::Unix;
        assert_eq!(
            client_addr("127.0.0.1:5000", tcp, &config),
            ("127.0.0.1".into(), Some(5000))
        );
        assert_eq!(
            client_addr("[::1]:5001", tcp, &config),
            ("::1".into(), Some(5001))
        );
        assert_eq!(
            client_addr("/tmp/.s.PGSQL.7000", unix, &config),
            ("unix".into(), Some(7000))
        );
    }
}
