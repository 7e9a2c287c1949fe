//! What a link publishes about itself for SHOW SERVERS, SHOW POOLS and the
//! metrics: the link owns these atomics and is their only writer; readers
//! take a snapshot without any lock on the hot path.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use super::BackendTarget;
use crate::listener::Transport;
use crate::tls::label::Label;

/// Where a link is in its life in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ServerState {
    /// In the pool, clean.
    Idle = 0,
    /// Lent to a client.
    Active = 1,
    /// Being drained, rolled back or reset after a client was done with it.
    Resetting = 2,
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

    fn from_u8(v: u8) -> ServerState {
        match v {
            1 => ServerState::Active,
            2 => ServerState::Resetting,
            _ => ServerState::Idle,
        }
    }
}

/// One link's published state.
#[derive(Debug)]
pub struct LinkStatus {
    /// pgharbor's backend id.
    pub id: u64,
    /// PostgreSQL's process id.
    pub pid: i32,
    /// How it is reached.
    pub transport: Transport,
    /// What its TLS session negotiated, if it uses TLS.
    pub tls: Option<Label>,
    /// When it was opened.
    pub connected_at: SystemTime,
    /// The host of the conninfo's list it is on (None only in unit tests).
    pub host: Option<Arc<BackendTarget>>,
    state: AtomicU8,
    /// The client holding it, 0 for none (client ids start at 1).
    client: AtomicU64,
    served: AtomicU64,
}

/// A snapshot of one link's published state.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// pgharbor's backend id.
    pub id: u64,
    /// PostgreSQL's process id.
    pub pid: i32,
    /// How it is reached.
    pub transport: Transport,
    /// What its TLS session negotiated, if it uses TLS.
    pub tls: Option<Label>,
    /// When it was opened.
    pub connected_at: SystemTime,
    /// The host it is on.
    pub host: Option<Arc<BackendTarget>>,
    /// What it is doing.
    pub state: ServerState,
    /// The client holding it, if any.
    pub client: Option<u64>,
    /// Client logins it has served.
    pub logins_served: u64,
}

impl LinkStatus {
    /// The status of a link just opened (idle, no client yet).
    pub fn new(id: u64, pid: i32, transport: Transport, tls: Option<Label>) -> LinkStatus {
        LinkStatus {
            id,
            pid,
            transport,
            tls,
            connected_at: SystemTime::now(),
            host: None,
            state: AtomicU8::new(ServerState::Idle as u8),
            client: AtomicU64::new(0),
            served: AtomicU64::new(0),
        }
    }

    /// The same status, on `host`.
    pub fn on(mut self, host: Arc<BackendTarget>) -> LinkStatus {
        self.host = Some(host);
        self
    }

    pub(super) fn set(&self, state: ServerState, client: Option<u64>) {
        if state == ServerState::Active {
            self.served.fetch_add(1, Ordering::Relaxed);
        }
        self.client.store(client.unwrap_or(0), Ordering::Relaxed);
        self.state.store(state as u8, Ordering::Relaxed);
    }

    /// What the link is doing now.
    pub fn state(&self) -> ServerState {
        ServerState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Clients it has been lent to.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// A snapshot for SHOW and the metrics.
    pub fn snapshot(&self) -> ServerInfo {
        ServerInfo {
            id: self.id,
            pid: self.pid,
            transport: self.transport,
            tls: self.tls,
            connected_at: self.connected_at,
            host: self.host.clone(),
            state: self.state(),
            client: Some(self.client.load(Ordering::Relaxed)).filter(|c| *c != 0),
            logins_served: self.served(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_state_client_and_logins() {
        let s = LinkStatus::new(1, 101, Transport::Unix, None);
        s.set(ServerState::Active, Some(7));
        s.set(ServerState::Resetting, None);
        s.set(ServerState::Active, Some(8));
        let i = s.snapshot();
        assert_eq!(
            (i.state, i.client, i.logins_served),
            (ServerState::Active, Some(8), 2)
        );
        s.set(ServerState::Idle, None);
        assert_eq!(s.snapshot().client, None);
    }
}
