//! Who is connected and what each client is doing, for SHOW CLIENTS.
//! Updated at login, when a backend is attached, and at the end — never per message.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::ClientState;
use crate::tls::Transport;

/// One logged-in client.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    /// Connection id.
    pub id: u64,
    /// Role it logged in as.
    pub user: String,
    /// Database it asked for.
    pub database: String,
    /// How it reached the pooler.
    pub transport: Transport,
    /// Whether TLS is in use.
    pub tls: bool,
    /// Peer address or socket path.
    pub peer: String,
    /// When it logged in.
    pub connected_at: SystemTime,
    /// What it is doing.
    pub state: ClientState,
    /// The backend it holds, if any.
    pub backend: Option<u64>,
}

/// Every logged-in client.
#[derive(Debug, Default)]
pub struct ClientRegistry(Mutex<BTreeMap<u64, ClientInfo>>);

impl ClientRegistry {
    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<u64, ClientInfo>) -> R) -> R {
        match self.0.lock() {
            Ok(mut m) => f(&mut m),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    /// Adds a client; it is removed when the returned entry is dropped.
    pub fn register(self: &Arc<Self>, info: ClientInfo) -> ClientEntry {
        let id = info.id;
        self.with(|m| m.insert(id, info));
        ClientEntry {
            registry: self.clone(),
            id,
        }
    }

    /// A copy of every entry.
    pub fn list(&self) -> Vec<ClientInfo> {
        self.with(|m| m.values().cloned().collect())
    }
}

/// A client's place in the registry, for as long as the session lives.
pub struct ClientEntry {
    registry: Arc<ClientRegistry>,
    id: u64,
}

impl ClientEntry {
    /// Records what the client is doing now.
    pub fn set(&self, state: ClientState, backend: Option<u64>) {
        self.registry.with(|m| {
            if let Some(c) = m.get_mut(&self.id) {
                c.state = state;
                c.backend = backend;
            }
        });
    }
}

impl Drop for ClientEntry {
    fn drop(&mut self) {
        self.registry.with(|m| m.remove(&self.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_update_and_vanish_with_the_session() {
        let r = Arc::new(ClientRegistry::default());
        let entry = r.register(ClientInfo {
            id: 3,
            user: "u".into(),
            database: "d".into(),
            transport: Transport::Unix,
            tls: false,
            peer: "/tmp/.s.PGSQL.6432".into(),
            connected_at: SystemTime::now(),
            state: ClientState::WaitingForBackend,
            backend: None,
        });
        entry.set(ClientState::Active, Some(9));
        assert_eq!(r.list()[0].backend, Some(9));
        drop(entry);
        assert!(r.list().is_empty());
    }
}
