//! A fleet of pgharbor processes sharing one TCP port (`listen.reuseport`):
//! this instance's id (`listen.instance_id`) and the `[peers]` table that
//! says where every other instance takes the cancel requests for its keys.
//! Validation only; no I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU8;
use std::time::Duration;

use super::{ConfigError, ConnInfo, HostSpec};

/// The id of one instance of a fleet, 1 to 255 (`listen.instance_id`);
/// every cancel key the instance hands out carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstanceId(NonZeroU8);

impl InstanceId {
    /// The largest id a cancel key has room for.
    pub const MAX: u8 = u8::MAX;

    /// The id `n`, if it is one (0 is not).
    pub fn new(n: u8) -> Option<InstanceId> {
        NonZeroU8::new(n).map(InstanceId)
    }

    /// The id as the cancel key writes it.
    pub fn get(self) -> u8 {
        self.0.get()
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a peer instance takes cancel requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The peer's TCP address or Unix socket directory, with its port.
    pub host: HostSpec,
    /// How long connecting to it may take (the conninfo's `connect_timeout`).
    pub connect_timeout: Duration,
}

/// How long a forwarded cancel may wait for a peer's socket when its
/// conninfo gives no `connect_timeout`: a cancel is worth a short wait,
/// never a stuck connection.
pub const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Checks `listen.reuseport` against `listen.instance_id`.
pub(super) fn check_reuseport(
    reuseport: bool,
    instance_id: Option<InstanceId>,
) -> Result<(), ConfigError> {
    if reuseport && instance_id.is_none() {
        return Err(ConfigError::invalid(
            "listen.reuseport",
            "needs listen.instance_id (1 to 255): the kernel hands a cancel request to any \
             instance on the port, and only the id in its key says which one runs the query",
        ));
    }
    Ok(())
}

/// The `[peers]` table, id → conninfo, without this instance's own entry
/// (so a whole fleet can share one file, as PgBouncer's `[peers]` allows).
pub(super) fn peers(
    raw: BTreeMap<String, String>,
    me: Option<InstanceId>,
) -> Result<BTreeMap<InstanceId, Peer>, ConfigError> {
    let mut out = BTreeMap::new();
    if raw.is_empty() {
        return Ok(out);
    }
    let Some(me) = me else {
        return Err(ConfigError::invalid(
            "peers",
            "needs listen.instance_id: cancel keys carry no instance id to route by without it",
        ));
    };
    for (name, conninfo) in raw {
        let key = format!("peers.{}", super::toml_key(&name));
        let id = name
            .parse::<u8>()
            .ok()
            .and_then(InstanceId::new)
            .ok_or_else(|| {
                ConfigError::invalid(
                    &key,
                    format!(
                        "{name:?} is not an instance id (expected 1 to {})",
                        InstanceId::MAX
                    ),
                )
            })?;
        let peer = peer(&key, &conninfo)?;
        if id != me {
            out.insert(id, peer);
        }
    }
    Ok(out)
}

/// One peer's conninfo: one host (TCP or a socket directory) with its port,
/// and optionally `connect_timeout`; nothing else means anything to a
/// CancelRequest, so anything else is refused rather than ignored.
fn peer(key: &str, conninfo: &str) -> Result<Peer, ConfigError> {
    if conninfo.trim().is_empty() {
        return Err(ConfigError::invalid(
            key,
            "empty: give the peer's host (or socket directory) and port",
        ));
    }
    let info = ConnInfo::parse(conninfo).map_err(|e| ConfigError::invalid(key, e.to_string()))?;
    if info.hosts.len() != 1 {
        return Err(ConfigError::invalid(key, "a peer has exactly one host"));
    }
    // Anything besides the host and the timeout (a database, a user, TLS
    // or keepalive keywords) would be given and have no effect.
    let bare = ConnInfo {
        hosts: info.hosts.clone(),
        connect_timeout: info.connect_timeout,
        ..ConnInfo::default()
    };
    if bare != info {
        return Err(ConfigError::invalid(
            key,
            "a peer takes host (or hostaddr), port and connect_timeout only: a cancel request \
             carries no database, user or password, and goes to a peer in plain text",
        ));
    }
    Ok(Peer {
        host: info.first_host().clone(),
        connect_timeout: info.connect_timeout.unwrap_or(PEER_CONNECT_TIMEOUT),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BackendHost;

    fn table(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn own_entry_is_left_out_so_a_fleet_shares_one_file() {
        let raw = table(&[
            ("1", "host=/run/pgh1 port=6432"),
            ("2", "host=127.0.0.2 port=6433 connect_timeout=5"),
            ("3", "postgresql://127.0.0.3:6434"),
        ]);
        let got = peers(raw, InstanceId::new(1)).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[&InstanceId::new(3).unwrap()].host.describe(),
            "127.0.0.3:6434"
        );
        let two = &got[&InstanceId::new(2).unwrap()];
        assert_eq!(two.host.host, BackendHost::Tcp("127.0.0.2".into()));
        assert_eq!(two.host.port, 6433);
        assert_eq!(two.connect_timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_socket_directory_peer_gets_the_default_timeout() {
        let got = peers(
            table(&[("7", "host=/run/pgh7 port=7000")]),
            InstanceId::new(1),
        )
        .unwrap();
        let seven = &got[&InstanceId::new(7).unwrap()];
        assert_eq!(seven.host.host, BackendHost::Unix("/run/pgh7".into()));
        assert_eq!(seven.connect_timeout, PEER_CONNECT_TIMEOUT);
    }

    #[test]
    fn bad_entries_name_the_key() {
        let me = InstanceId::new(1);
        let cases = [
            (
                "0",
                "host=/x port=1",
                "peers.0: \"0\" is not an instance id (expected 1 to 255)",
            ),
            (
                "256",
                "host=/x port=1",
                "peers.256: \"256\" is not an instance id",
            ),
            (
                "a",
                "host=/x port=1",
                "peers.a: \"a\" is not an instance id",
            ),
            ("2", "", "peers.2: empty"),
            (
                "2",
                "host=a,b port=1",
                "peers.2: a peer has exactly one host",
            ),
            (
                "2",
                "host=/x port=1 dbname=app",
                "peers.2: a peer takes host",
            ),
            ("2", "host=/x nonsense=1", "peers.2:"),
        ];
        for (id, conninfo, want) in cases {
            let e = peers(table(&[(id, conninfo)]), me).unwrap_err().to_string();
            assert!(e.starts_with(want), "{id} = {conninfo:?}: {e}");
        }
    }

    #[test]
    fn peers_and_reuseport_need_an_instance_id() {
        let e = peers(table(&[("2", "host=/x port=1")]), None).unwrap_err();
        assert!(
            e.to_string().starts_with("peers: needs listen.instance_id"),
            "{e}"
        );
        let e = check_reuseport(true, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("listen.reuseport: needs listen.instance_id"),
            "{e}"
        );
        assert!(check_reuseport(true, InstanceId::new(3)).is_ok());
        assert!(check_reuseport(false, None).is_ok());
        assert!(peers(BTreeMap::new(), None).unwrap().is_empty());
    }
}
