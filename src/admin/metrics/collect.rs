//! The pooler's state as metric families: a [`Collector`] that copies it
//! out at scrape time, and the conversion of the stats' hdrhistograms into
//! Prometheus histograms.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use super::encode::{counters, gauges, histograms};
use super::process::Process;
use crate::admin::show::{clients_by_pool, stats_by_database};
use crate::pool::ServerState;
use crate::pooler::Pooler;
use crate::registry::ClientState;
use crate::stats::{
    AuthKind, Class, ClassStats, SessionTransfer, Side, BACKEND_PHASES, CLIENT_PHASES,
};

/// Bucket bounds of the phase histograms, µs: 10 µs .. 10 s.
pub(super) const PHASE_BOUNDS_US: [u64; 19] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
];
/// Bucket bounds of `pgharbor_server_logins_served`.
const LOGINS_SERVED_BOUNDS: [u64; 10] = [1, 2, 5, 10, 25, 50, 100, 250, 1_000, 10_000];
/// Every client state, in the order `pgharbor_clients` lists them.
const CLIENT_STATES: [ClientState; 6] = ClientState::ALL;

/// The metrics of one pooler, read afresh by every [`Metrics::encode`].
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// The metrics of `pooler`.
    pub fn new(pooler: Arc<Pooler>) -> Metrics {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(PoolerCollector(pooler)));
        Metrics { registry }
    }

    /// The Prometheus text (content type [`prometheus_text::CONTENT_TYPE`]).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::new();
        prometheus_text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

struct PoolerCollector(Arc<Pooler>);

impl fmt::Debug for PoolerCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PoolerCollector")
    }
}

impl Collector for PoolerCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        Collector::encode(&Snapshot::take(&self.0), encoder)
    }
}

/// One pool's gauges.
#[derive(Debug, Clone)]
pub(super) struct PoolRow {
    database: String,
    user: String,
    /// Backends by state: active, idle, used.
    servers: [u64; 3],
    max: usize,
    waiting: usize,
    paused: bool,
    /// The oldest current waiter's wait, seconds.
    max_wait_s: f64,
}

/// What one scrape reports, copied out of the pooler.
#[derive(Debug)]
pub(super) struct Snapshot {
    pub(super) classes: BTreeMap<Class, ClassStats>,
    pub(super) logins: u64,
    pub(super) reused_logins: u64,
    pub(super) pools: Vec<PoolRow>,
    /// Logged-in clients, in [`CLIENT_STATES`] order.
    pub(super) clients: [u64; 6],
    /// Per database: SHOW STATS's counters.
    pub(super) databases: BTreeMap<String, SessionTransfer>,
    /// The client-facing certificate's notAfter, Unix time.
    pub(super) cert_not_after: Option<i64>,
    pub(super) process: Process,
}

impl Snapshot {
    fn take(pooler: &Pooler) -> Snapshot {
        let waits = clients_by_pool(pooler);
        let mut pools: Vec<PoolRow> = pooler
            .pools
            .all()
            .iter()
            .map(|p| {
                let mut servers = [0; 3];
                for s in p.servers().list() {
                    servers[match s.state {
                        ServerState::Active => 0,
                        ServerState::Idle => 1,
                        ServerState::Resetting => 2,
                    }] += 1;
                }
                PoolRow {
                    database: p.key.database.clone(),
                    user: p.key.user.clone(),
                    servers,
                    max: p.status().2,
                    waiting: p.waiting(),
                    paused: p.is_paused(),
                    max_wait_s: waits.get(&p.key).map_or(0.0, |c| c.max_wait.as_secs_f64()),
                }
            })
            .collect();
        pools.sort_by(|a, b| (&a.database, &a.user).cmp(&(&b.database, &b.user)));
        let mut clients = [0; 6];
        for c in pooler.clients.list() {
            if let Some(i) = CLIENT_STATES.iter().position(|s| *s == c.state) {
                clients[i] += 1;
            }
        }
        Snapshot {
            classes: pooler.stats.snapshot(),
            logins: pooler.stats.logins.load(Ordering::Relaxed),
            reused_logins: pooler.stats.reused_logins.load(Ordering::Relaxed),
            pools,
            clients,
            databases: stats_by_database(pooler),
            cert_not_after: pooler.snapshot().cert_not_after,
            process: Process::read(),
        }
    }

    fn side(&self, side: Side) -> impl Iterator<Item = (&Class, &ClassStats)> + '_ {
        self.classes.iter().filter(move |(c, _)| c.side == side)
    }

    /// Handshakes avoided × the mean backend `total` phase over all classes, s.
    fn time_saved_s(&self) -> f64 {
        let (mut sum_us, mut n) = (0.0, 0u64);
        for (_, s) in self.side(Side::Backend) {
            let total = BACKEND_PHASES.iter().position(|p| *p == "total");
            if let Some(h) = total.and_then(|i| s.phases.get(i)) {
                sum_us += h.mean() * h.len() as f64;
                n += h.len();
            }
        }
        if n == 0 {
            0.0
        } else {
            self.reused_logins as f64 * sum_us / n as f64 / 1e6
        }
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut d: DescriptorEncoder) -> fmt::Result {
        for (side, what) in [
            (Side::Client, "client_login"),
            (Side::Backend, "server_connect"),
        ] {
            self.encode_side(&mut d, side, what)?;
        }
        histograms(
            &mut d,
            "pgharbor_server_logins_served",
            "Client logins a backend served before it was closed",
            self.side(Side::Backend)
                .map(|(c, s)| (class_labels(c), &s.logins_per_backend)),
            &LOGINS_SERVED_BOUNDS,
            1.0,
        )?;
        self.encode_transfer(&mut d)?;
        counters(
            &mut d,
            "pgharbor_client_logins_all",
            "Client logins in all",
            [(NO_LABELS, self.logins)],
        )?;
        counters(
            &mut d,
            "pgharbor_backend_handshakes_avoided",
            "Client logins served by a backend an earlier client had used",
            [(NO_LABELS, self.reused_logins)],
        )?;
        gauges(
            &mut d,
            "pgharbor_backend_handshake_time_saved_seconds",
            "Estimated establishment time saved: handshakes avoided x mean backend total phase",
            [(NO_LABELS, self.time_saved_s())],
        )?;
        self.encode_pools(&mut d)?;
        self.encode_databases(&mut d)?;
        self.encode_process(&mut d)
    }
}

impl Snapshot {
    /// Logins or connects, failures and phase histograms of one side.
    fn encode_side(&self, d: &mut DescriptorEncoder, side: Side, what: &str) -> fmt::Result {
        let (done, phases) = match side {
            Side::Client => ("pgharbor_client_logins", &CLIENT_PHASES[..]),
            Side::Backend => ("pgharbor_server_connects", &BACKEND_PHASES[..]),
        };
        let noun = match side {
            Side::Client => "Client logins",
            Side::Backend => "Backend connections",
        };
        let series =
            |f: fn(&ClassStats) -> u64| self.side(side).map(move |(c, s)| (class_labels(c), f(s)));
        counters(
            d,
            done,
            &format!("{noun} established"),
            series(|s| s.established),
        )?;
        counters(
            d,
            &format!("pgharbor_{what}_failures"),
            &format!("{noun} that failed"),
            series(|s| s.failed),
        )?;
        let per_phase = self.side(side).flat_map(|(c, s)| {
            let [t, tls, auth] = class_labels(c);
            phases
                .iter()
                .zip(&s.phases)
                .map(move |(p, h)| ([t, tls, auth, ("phase", *p)], h))
        });
        histograms(
            d,
            &format!("pgharbor_{what}_phase_seconds"),
            &format!("{noun}: time of each establishment phase"),
            per_phase,
            &PHASE_BOUNDS_US,
            1e6,
        )
    }

    fn encode_transfer(&self, d: &mut DescriptorEncoder) -> fmt::Result {
        let all = || self.classes.iter().map(|(c, s)| (c, &s.transfer));
        let with = |c: &Class, key: &'static str, value: &'static str| {
            let [t, tls, auth] = class_labels(c);
            [("side", side_str(c.side)), t, tls, auth, (key, value)]
        };
        counters(
            d,
            "pgharbor_transfer_bytes",
            "Bytes relayed (in: client to server, out: server to client)",
            all().flat_map(|(c, t)| {
                [
                    (with(c, "direction", "in"), t.bytes_in),
                    (with(c, "direction", "out"), t.bytes_out),
                ]
            }),
        )?;
        let kinds = |f: fn(&crate::stats::Transfer) -> u64| {
            all().flat_map(move |(c, t)| {
                [
                    (with(c, "kind", "chatty"), f(&t.chatty)),
                    (with(c, "kind", "bulk"), f(&t.bulk)),
                ]
            })
        };
        counters(
            d,
            "pgharbor_transfer_exchanges",
            "Request/response exchanges (bulk: a response of at least 1 MiB)",
            kinds(|t| t.exchanges),
        )?;
        counters(
            d,
            "pgharbor_transfer_bytes_by_kind",
            "Response bytes of chatty and bulk exchanges",
            kinds(|t| t.bytes),
        )?;
        counters(
            d,
            "pgharbor_transfer_busy_seconds",
            "Time exchanges had data in flight",
            kinds(|t| t.busy_us).map(|(l, us)| (l, us as f64 / 1e6)),
        )
    }

    fn encode_pools(&self, d: &mut DescriptorEncoder) -> fmt::Result {
        let key = |p: &PoolRow| [("database", p.database.clone()), ("user", p.user.clone())];
        gauges(
            d,
            "pgharbor_pool_servers",
            "Open backends by state (active: lent out, idle, used: being reset)",
            self.pools.iter().flat_map(|p| {
                let [db, user] = key(p);
                ["active", "idle", "used"]
                    .into_iter()
                    .zip(p.servers)
                    .map(move |(st, n)| ([db.clone(), user.clone(), ("state", st.into())], n))
            }),
        )?;
        type PoolGauge = fn(&PoolRow) -> u64;
        let pool_gauges: [(&str, &str, PoolGauge); 3] = [
            (
                "pgharbor_pool_max_servers",
                "Most backends the pool opens",
                |p| p.max as u64,
            ),
            (
                "pgharbor_pool_clients_waiting",
                "Clients waiting for a backend",
                |p| p.waiting as u64,
            ),
            ("pgharbor_pool_paused", "1 while the pool is paused", |p| {
                u64::from(p.paused)
            }),
        ];
        for (name, help, f) in pool_gauges {
            gauges(d, name, help, self.pools.iter().map(|p| (key(p), f(p))))?;
        }
        gauges(
            d,
            "pgharbor_pool_maxwait_seconds",
            "How long the oldest client still waiting for a backend has waited",
            self.pools.iter().map(|p| (key(p), p.max_wait_s)),
        )?;
        gauges(
            d,
            "pgharbor_clients",
            "Logged-in clients by state",
            CLIENT_STATES
                .iter()
                .zip(self.clients)
                .map(|(s, n)| ([("state", client_state_str(*s))], n)),
        )
    }
}

type Label = (&'static str, &'static str);

const NO_LABELS: [Label; 0] = [];

/// A class's labels; `auth` is empty (the same as absent to Prometheus)
/// on backends and on logins that failed before a method was settled.
fn class_labels(c: &Class) -> [Label; 3] {
    [
        ("transport", c.transport.as_str()),
        ("tls", if c.tls { "true" } else { "false" }),
        ("auth", c.auth.map_or("", AuthKind::as_str)),
    ]
}

fn side_str(side: Side) -> &'static str {
    match side {
        Side::Client => "client",
        Side::Backend => "server",
    }
}

fn client_state_str(s: ClientState) -> &'static str {
    match s {
        ClientState::Negotiating => "negotiating",
        ClientState::Authenticating => "authenticating",
        ClientState::WaitingForBackend => "waiting",
        ClientState::Active => "active",
        ClientState::Idle => "idle",
        ClientState::Closing => "closing",
    }
}

#[cfg(test)]
#[path = "collect_tests.rs"]
mod tests;
