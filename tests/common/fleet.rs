//! Fleets of pgharbor instances for `tests/fleet_cancel.rs`: several on one
//! port with `listen.reuseport`, or each on its own port as on hosts of
//! their own, with a `[peers]` table; and the raw cancel-key handling those
//! tests need (which instance a key names, a forged key of another).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::util::{free_port, unique_temp_dir};
use super::wire::{cancel_packet, message};
use super::{Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Reply, SCRAM_USER, TEST_DB};

/// How long a cancel may take from its CancelRequest to the client's error.
pub const QUICK: Duration = Duration::from_secs(5);

/// A temp dir of socket directories, removed after the instances using it.
pub struct Dirs(PathBuf);

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Instances on one port; `members` drop (and stop) before `_dirs`.
pub struct Fleet {
    pub members: Vec<Pooler>,
    pub port: u16,
    _dirs: Dirs,
}

/// The socket directory of instance `id` under `root`.
pub fn sock_dir(root: &Path, id: u8) -> PathBuf {
    root.join(format!("i{id}"))
}

/// Starts instances `ids` on one fresh port in `mode`, with `peers` as the
/// shared `[peers]` table's lines.
pub fn fleet(
    pg: &PgCluster,
    ids: &[u8],
    mode: &str,
    peers: impl Fn(&Path, u16) -> String,
) -> Fleet {
    let root = unique_temp_dir("fleet");
    let dirs = Dirs(root.clone());
    let port = free_port();
    let table = format!("\n[peers]\n{}", peers(&root, port));
    let members = ids
        .iter()
        .map(|&id| {
            let dir = sock_dir(&root, id);
            std::fs::create_dir(&dir).expect("mkdir socket dir");
            let mut opts = PoolerOpts::default()
                .mode(mode)
                .listen_toml(&format!("reuseport = true\ninstance_id = {id}\n"));
            opts.port = Some(port);
            opts.socket_dir = Some(dir);
            opts.extra_toml = table.clone();
            Pooler::start(pg, opts)
        })
        .collect();
    Fleet {
        members,
        port,
        _dirs: dirs,
    }
}

/// Every instance of 1..=n listed by its own socket directory, as
/// PgBouncer's peers are.
pub fn socket_peers(n: u8) -> impl Fn(&Path, u16) -> String {
    move |root, port| {
        (1..=n)
            .map(|id| {
                format!(
                    "{id} = \"host={} port={port}\"\n",
                    sock_dir(root, id).display()
                )
            })
            .collect()
    }
}

pub fn login(ep: &Endpoint) -> (RawConn, (i32, i32)) {
    let mut c = RawConn::connect(ep);
    let s = c
        .login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap_or_else(|e| panic!("login: {e:?}"));
    let key = s.key.expect("BackendKeyData");
    (c, key)
}

/// Sends a simple query without waiting for its answer.
pub fn send_query(c: &mut RawConn, sql: &str) {
    let mut body = sql.as_bytes().to_vec();
    body.push(0);
    c.send(&message(b'Q', &body)).expect("send query");
}

/// The instance id a secret carries.
pub fn instance_of(secret: i32) -> u8 {
    secret.to_be_bytes()[0]
}

/// `secret` with another instance id and hop count, as a forger would write it.
pub fn with_owner(secret: i32, id: u8, hops: u8) -> i32 {
    let mut b = secret.to_be_bytes();
    b[0] = id;
    b[1] = (b[1] & 0x3f) | (hops << 6);
    i32::from_be_bytes(b)
}

/// Sends a CancelRequest to `ep` and waits (up to `limit`) for the close;
/// how long that took.
pub fn cancel_and_wait_close(ep: &Endpoint, pid: i32, secret: i32, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut c = RawConn::connect(ep);
    c.send(&cancel_packet(pid, secret))
        .expect("send CancelRequest");
    let reply = c.read_msg(limit);
    assert_eq!(
        reply,
        Reply::Closed,
        "cancel connection: {}",
        reply.summary()
    );
    started.elapsed()
}

/// Instance `id` on its own port, as on a host of its own: TCP on
/// 127.0.0.1 and `extra` (e.g. 127.0.0.2), with `peers` as its `[peers]`.
pub fn host(pg: &PgCluster, id: u8, port: u16, extra: &[&str], peers: &str) -> Pooler {
    let mut opts = PoolerOpts::default()
        .listen_toml(&format!("instance_id = {id}\n"))
        .admin_users(&[SCRAM_USER.0]);
    opts.port = Some(port);
    opts.extra_addresses = extra.iter().map(|a| a.to_string()).collect();
    opts.extra_toml = format!("\n[peers]\n{peers}");
    Pooler::start(pg, opts)
}

/// Rewrites the `[peers]` lines of `p`'s config file and sends SIGHUP.
pub fn reload_peers(p: &Pooler, peers: &str, reloads_before: usize) {
    let text = std::fs::read_to_string(p.config_path()).expect("read config");
    let (head, _) = text.split_once("\n[peers]\n").expect("[peers] table");
    std::fs::write(p.config_path(), format!("{head}\n[peers]\n{peers}")).expect("write config");
    p.signal(libc::SIGHUP);
    assert!(
        p.wait_for_log("configuration reloaded", reloads_before + 1, QUICK),
        "no reload: {}",
        p.log_text()
    );
}
