//! What each open backend is doing, for SHOW SERVERS. Updated at connect,
//! checkout, release and close — never per message.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::backend::Link;
use crate::tls::Transport;

/// What a backend is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// In the pool, clean.
    Idle,
    /// Lent to a client.
    Active,
    /// Being rolled back / reset after a client left.
    Resetting,
}

impl ServerState {
    /// PgBouncer-style state name.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Idle => "idle",
            ServerState::Active => "active",
            ServerState::Resetting => "used",
        }
    }
}

/// One open backend.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// pgharbor's backend id.
    pub id: u64,
    /// PostgreSQL's process id.
    pub pid: i32,
    /// How it is reached.
    pub transport: Transport,
    /// Whether TLS is in use.
    pub tls: bool,
    /// When it was opened.
    pub connected_at: SystemTime,
    /// What it is doing.
    pub state: ServerState,
    /// The client holding it, if any.
    pub client: Option<u64>,
    /// Client logins it has served.
    pub logins_served: u64,
}

/// The open backends of one pool.
#[derive(Debug, Default)]
pub struct ServerRegistry(Mutex<BTreeMap<u64, ServerInfo>>);

impl ServerRegistry {
    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<u64, ServerInfo>) -> R) -> R {
        match self.0.lock() {
            Ok(mut m) => f(&mut m),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    /// Records a newly opened backend.
    pub fn opened(&self, b: &Link) {
        let info = ServerInfo {
            id: b.id(),
            pid: b.cancel().pid,
            transport: b.transport(),
            tls: b.is_tls(),
            connected_at: SystemTime::now(),
            state: ServerState::Idle,
            client: None,
            logins_served: 0,
        };
        self.with(|m| m.insert(b.id(), info));
    }

    /// Records a state change; `client` is the new holder (Active only).
    pub fn set_state(&self, id: u64, state: ServerState, client: Option<u64>) {
        self.with(|m| {
            if let Some(s) = m.get_mut(&id) {
                if state == ServerState::Active {
                    s.logins_served += 1;
                }
                s.state = state;
                s.client = client;
            }
        });
    }

    /// Forgets a closed backend.
    pub fn closed(&self, id: u64) {
        self.with(|m| m.remove(&id));
    }

    /// A copy of every entry.
    pub fn list(&self) -> Vec<ServerInfo> {
        self.with(|m| m.values().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: u64) -> ServerInfo {
        ServerInfo {
            id,
            pid: 100 + id as i32,
            transport: Transport::Unix,
            tls: false,
            connected_at: SystemTime::now(),
            state: ServerState::Idle,
            client: None,
            logins_served: 0,
        }
    }

    #[test]
    fn tracks_state_and_logins_until_closed() {
        let r = ServerRegistry::default();
        r.with(|m| m.insert(1, info(1)));
        r.set_state(1, ServerState::Active, Some(7));
        r.set_state(1, ServerState::Resetting, None);
        r.set_state(1, ServerState::Active, Some(8));
        let s = &r.list()[0];
        assert_eq!(
            (s.state, s.client, s.logins_served),
            (ServerState::Active, Some(8), 2)
        );
        r.set_state(99, ServerState::Idle, None);
        r.closed(1);
        assert!(r.list().is_empty());
    }
}
