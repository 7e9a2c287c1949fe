//! The pooler's state as metric families: a [`Collector`] that copies it
//! out at scrape time, and the conversion of the stats' hdrhistograms into
//! Prometheus histograms.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hdrhistogram::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
    NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::pool::ServerState;
use crate::pooler::Pooler;
use crate::registry::ClientState;
use crate::stats::{Class, ClassStats, Side, BACKEND_PHASES, CLIENT_PHASES};

/// Bucket bounds of the phase histograms, µs: 10 µs .. 10 s.
const PHASE_BOUNDS_US: [u64; 19] = [
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
struct PoolRow {
    database: String,
    user: String,
    /// Backends by state: active, idle, used.
    servers: [u64; 3],
    max: usize,
    waiting: usize,
    paused: bool,
}

/// What one scrape reports, copied out of the pooler.
#[derive(Debug)]
struct Snapshot {
    classes: BTreeMap<Class, ClassStats>,
    logins: u64,
    reused_logins: u64,
    pools: Vec<PoolRow>,
    /// Logged-in clients, in [`CLIENT_STATES`] order.
    clients: [u64; 6],
}

impl Snapshot {
    fn take(pooler: &Pooler) -> Snapshot {
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
        self.encode_pools(&mut d)
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
            let [t, tls] = class_labels(c);
            phases
                .iter()
                .zip(&s.phases)
                .map(move |(p, h)| ([t, tls, ("phase", *p)], h))
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
            let [t, tls] = class_labels(c);
            [("side", side_str(c.side)), t, tls, (key, value)]
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

fn class_labels(c: &Class) -> [Label; 2] {
    [
        ("transport", c.transport.as_str()),
        ("tls", if c.tls { "true" } else { "false" }),
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

/// One counter family (`_total` is appended to `name`).
fn counters<L: EncodeLabelSet, N: EncodeCounterValue>(
    d: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, N)>,
) -> fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One gauge family.
fn gauges<L: EncodeLabelSet, N: EncodeGaugeValue>(
    d: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, N)>,
) -> fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in series {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One histogram family from hdrhistograms; `bounds` and the recorded
/// values are in units of 1/`per_unit` of the exposed unit.
fn histograms<'h, L: EncodeLabelSet>(
    d: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, &'h Histogram<u64>)>,
    bounds: &[u64],
    per_unit: f64,
) -> fmt::Result {
    let mut m = d.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in series {
        let (buckets, sum) = buckets(h, bounds, per_unit);
        m.encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(sum, h.len(), &buckets, None)?;
    }
    Ok(())
}

/// Per-bucket (not cumulative: the encoder adds them up) counts for each
/// bound, and the sum of the values, scaled by 1/`per_unit`. Values above
/// the last bound count only in `+Inf`, which the encoder adds as `h.len()`.
fn buckets(h: &Histogram<u64>, bounds: &[u64], per_unit: f64) -> (Vec<(f64, u64)>, f64) {
    let mut counts = vec![0u64; bounds.len()];
    let mut sum = 0.0;
    for v in h.iter_recorded() {
        let value = v.value_iterated_to();
        sum += h.median_equivalent(value) as f64 * v.count_at_value() as f64;
        let low = h.lowest_equivalent(value);
        if let Some(i) = bounds.iter().position(|b| low <= *b) {
            counts[i] += v.count_at_value();
        }
    }
    let buckets = bounds.iter().map(|b| *b as f64 / per_unit).zip(counts);
    (buckets.collect(), sum / per_unit)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::listener::Transport;
    use crate::stats::{BackendConnect, ClientLogin, SessionTransfer, Stats, BULK_BYTES};
    use prometheus_parse::{Sample, Scrape, Value};
    use std::time::Duration;

    /// A workload: 3 plain socket logins (2 on reused backends), 1 TLS
    /// loopback login, failures on both sides, 2 backend connects, traffic.
    fn snapshot() -> Snapshot {
        let stats = Stats::new();
        let unix = Class::client(Transport::Unix, false);
        let tls = Class::client(Transport::LoopbackTcp, true);
        let server = Class::backend(Transport::Unix, false);
        let plain = ClientLogin {
            phases_us: [30, 0, 120, 2_000, 80, 2_300],
        };
        for i in 0..3 {
            stats.client_login(unix, &plain, i > 0);
        }
        let login = ClientLogin {
            phases_us: [40, 700, 300, 50, 60, 5_000],
        };
        stats.client_login(tls, &login, false);
        stats.client_failed(tls);
        let connect = BackendConnect {
            phases_us: [100, 0, 900, 1_000, 2_000],
        };
        stats.backend_connect(server, &connect);
        stats.backend_connect(server, &connect);
        stats.backend_failed(Class::backend(Transport::RemoteTcp, true));
        stats.backend_closed(server, 3);
        let mut t = SessionTransfer {
            bytes_in: 10,
            ..Default::default()
        };
        t.exchange(100, Duration::from_micros(50));
        t.exchange(3 * BULK_BYTES, Duration::from_millis(30));
        t.bytes_out = 100 + 3 * BULK_BYTES;
        stats.transfer(unix, &t);
        stats.transfer(server, &t);
        Snapshot {
            classes: stats.snapshot(),
            logins: stats.logins.load(Ordering::Relaxed),
            reused_logins: stats.reused_logins.load(Ordering::Relaxed),
            pools: vec![PoolRow {
                database: "app".into(),
                user: "alice".into(),
                servers: [1, 2, 0],
                max: 20,
                waiting: 3,
                paused: true,
            }],
            clients: [0, 0, 1, 2, 0, 0],
        }
    }

    fn encode(s: Snapshot) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(s));
        let mut text = String::new();
        prometheus_text::encode(&mut text, &registry).unwrap();
        text
    }

    fn parse(text: &str) -> Scrape {
        let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        // The parser skips lines it cannot read: make sure it skipped none.
        let parsed: usize = scrape
            .samples
            .iter()
            .map(|s| match &s.value {
                Value::Histogram(b) => b.len(),
                _ => 1,
            })
            .sum();
        let lines = text.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(parsed, lines, "unparsed lines in\n{text}");
        scrape
    }

    fn find<'s>(scrape: &'s Scrape, name: &str, labels: &[(&str, &str)]) -> &'s Sample {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == name
                    && s.labels.len() == labels.len()
                    && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
            })
            .unwrap_or_else(|| panic!("no {name}{labels:?}"))
    }

    fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
        match find(scrape, name, labels).value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            ref other => panic!("{name} is {other:?}"),
        }
    }

    fn class(transport: &'static str, tls: &'static str) -> Vec<(&'static str, &'static str)> {
        vec![("transport", transport), ("tls", tls)]
    }

    #[test]
    fn every_documented_family_is_exposed_and_nothing_else() {
        let text = encode(snapshot());
        let exposed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let documented: Vec<&str> = include_str!("mod.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! | `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        assert_eq!(exposed, documented);
    }

    #[test]
    fn counters_and_gauges_carry_the_workload() {
        let s = parse(&encode(snapshot()));
        let unix = class("unix", "false");
        let tls = class("tcp-loopback", "true");
        assert_eq!(value(&s, "pgharbor_client_logins_total", &unix), 3.0);
        assert_eq!(value(&s, "pgharbor_client_logins_total", &tls), 1.0);
        assert_eq!(value(&s, "pgharbor_client_login_failures_total", &tls), 1.0);
        assert_eq!(value(&s, "pgharbor_server_connects_total", &unix), 2.0);
        let remote = class("tcp", "true");
        assert_eq!(
            value(&s, "pgharbor_server_connect_failures_total", &remote),
            1.0
        );
        assert_eq!(value(&s, "pgharbor_client_logins_all_total", &[]), 4.0);
        assert_eq!(
            value(&s, "pgharbor_backend_handshakes_avoided_total", &[]),
            2.0
        );
        let saved = value(&s, "pgharbor_backend_handshake_time_saved_seconds", &[]);
        assert!((saved - 0.004).abs() < 0.0001, "{saved}");

        for side in ["client", "server"] {
            let l = |k, v| [("side", side), unix[0], unix[1], (k, v)];
            let bulk = 3.0 * BULK_BYTES as f64;
            assert_eq!(
                value(&s, "pgharbor_transfer_bytes_total", &l("direction", "in")),
                10.0
            );
            assert_eq!(
                value(&s, "pgharbor_transfer_bytes_total", &l("direction", "out")),
                bulk + 100.0
            );
            let by_kind = "pgharbor_transfer_bytes_by_kind_total";
            assert_eq!(value(&s, by_kind, &l("kind", "bulk")), bulk);
            assert_eq!(value(&s, by_kind, &l("kind", "chatty")), 100.0);
            let ex = "pgharbor_transfer_exchanges_total";
            assert_eq!(value(&s, ex, &l("kind", "chatty")), 1.0);
            let busy = value(
                &s,
                "pgharbor_transfer_busy_seconds_total",
                &l("kind", "bulk"),
            );
            assert!((busy - 0.03).abs() < 1e-9, "{busy}");
        }

        let pool = |extra: Option<(&'static str, &'static str)>| {
            let mut l = vec![("database", "app"), ("user", "alice")];
            l.extend(extra);
            l
        };
        assert_eq!(
            value(&s, "pgharbor_pool_servers", &pool(Some(("state", "idle")))),
            2.0
        );
        assert_eq!(
            value(
                &s,
                "pgharbor_pool_servers",
                &pool(Some(("state", "active")))
            ),
            1.0
        );
        assert_eq!(value(&s, "pgharbor_pool_max_servers", &pool(None)), 20.0);
        assert_eq!(value(&s, "pgharbor_pool_clients_waiting", &pool(None)), 3.0);
        assert_eq!(value(&s, "pgharbor_pool_paused", &pool(None)), 1.0);
        assert_eq!(value(&s, "pgharbor_clients", &[("state", "active")]), 2.0);
        assert_eq!(
            value(&s, "pgharbor_clients", &[("state", "negotiating")]),
            0.0
        );
    }

    #[test]
    fn histograms_are_cumulative_and_end_at_their_count() {
        let s = parse(&encode(snapshot()));
        let mut seen = 0;
        for sample in &s.samples {
            let Value::Histogram(buckets) = &sample.value else {
                continue;
            };
            seen += 1;
            let labels: Vec<(&str, &str)> = sample
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let count = value(&s, &format!("{}_count", sample.metric), &labels);
            assert!(buckets.windows(2).all(|w| w[0].less_than < w[1].less_than));
            assert!(buckets.windows(2).all(|w| w[0].count <= w[1].count));
            let last = buckets.last().unwrap();
            assert_eq!((last.less_than, last.count), (f64::INFINITY, count));
        }
        // 6 phases × 2 client classes; 5 phases and logins served × 2 server
        // classes (one seen only failing: empty histograms).
        assert_eq!(seen, 6 * 2 + (5 + 1) * 2);

        let tls = find(
            &s,
            "pgharbor_client_login_phase_seconds",
            &[
                ("transport", "tcp-loopback"),
                ("tls", "true"),
                ("phase", "tls_handshake"),
            ],
        );
        let Value::Histogram(b) = &tls.value else {
            unreachable!()
        };
        let at = |le: f64| b.iter().find(|h| h.less_than == le).unwrap().count;
        assert_eq!((at(0.0005), at(0.001)), (0.0, 1.0));
        let plain = [("transport", "unix"), ("tls", "false"), ("phase", "auth")];
        let sum = value(&s, "pgharbor_client_login_phase_seconds_sum", &plain);
        assert!((sum - 3.0 * 120e-6).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn buckets_take_values_at_their_bound_and_leave_the_rest_to_inf() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 2).unwrap();
        for v in [0, 250, 1_000, 1_000, 12_000_000] {
            h.record(v).unwrap();
        }
        let (b, sum) = buckets(&h, &PHASE_BOUNDS_US, 1e6);
        let count = |le: f64| b.iter().find(|(bound, _)| *bound == le).unwrap().1;
        assert_eq!((count(0.00001), count(0.00025), count(0.001)), (1, 1, 2));
        assert_eq!(b.iter().map(|(_, n)| n).sum::<u64>(), 4);
        assert!((sum - 12.00225).abs() < 0.12, "{sum}");
    }
}
