//! `SHOW OVERHEAD`: where connection cost goes, one row per class of
//! connections (side × transport × TLS × authentication method), then one `total` row with the
//! amortisation figure. No PgBouncer equivalent; the columns are:
//!
//! - `side` (`client` | `server` | `total`), `transport` (`unix` |
//!   `tcp-loopback` | `tcp`), `tls` (bool), `auth` (client rows: how the
//!   clients authenticated, `trust` | `peer` | `password` | `md5` |
//!   `scram-sha-256` | `scram-sha-256-plus` | `cert`; NULL on server rows
//!   and for logins that failed before a method was settled),
//!   `established`, `failed`;
//! - for each establishment phase in [`PHASES`] (client phases: first_packet,
//!   tls_handshake, auth, backend_wait, first_ready, total; server phases:
//!   connect, tls_handshake, auth, first_ready, total):
//!   `<phase>_avg_us`, `<phase>_p50_us`, `<phase>_p95_us`, `<phase>_p99_us`
//!   — NULL where the phase does not exist for the row's side or nothing
//!   was measured; a phase that did not happen (TLS on a plain connection)
//!   counts as 0 µs;
//! - `bytes_in` (client → server), `bytes_out` (server → client),
//!   `chatty_exchanges`, `chatty_bytes`, `chatty_busy_us`, `bulk_exchanges`,
//!   `bulk_bytes`, `bulk_busy_us` (an exchange is a request up to its
//!   ReadyForQuery; bulk = a response of at least 1 MiB), `bulk_mb_per_s`
//!   (float, throughput while busy); server rows count the traffic of
//!   sessions on backends of that class;
//! - `logins_per_backend_avg` (float, server rows: client logins a backend
//!   served before it was closed; NULL until one closes);
//! - on the `total` row only (NULL elsewhere): `logins` (client logins),
//!   `backend_connects` (sum of server `established`), `handshakes_avoided`
//!   (logins served by a backend an earlier client had used) and `saved_ms`
//!   (float: handshakes_avoided × mean server `total` phase).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use hdrhistogram::Histogram;

use super::rows::{ResultSet, Type, Value};
use super::Authorized;
use crate::pooler::Pooler;
use crate::stats::{Class, ClassStats, Side, BACKEND_PHASES, CLIENT_PHASES};

/// Every establishment phase of either side, in the order they happen.
pub const PHASES: [&str; 7] = [
    "first_packet",
    "connect",
    "tls_handshake",
    "auth",
    "backend_wait",
    "first_ready",
    "total",
];

/// Statistics reported for each phase.
const PHASE_STATS: [&str; 4] = ["avg", "p50", "p95", "p99"];

/// Transfer columns, after the phases.
const TRANSFER: [&str; 8] = [
    "bytes_in",
    "bytes_out",
    "chatty_exchanges",
    "chatty_bytes",
    "chatty_busy_us",
    "bulk_exchanges",
    "bulk_bytes",
    "bulk_busy_us",
];

/// The report for the running pooler.
pub fn overhead(pooler: &Pooler, _: &Authorized) -> ResultSet {
    report(
        &pooler.stats.snapshot(),
        pooler.stats.logins.load(Ordering::Relaxed),
        pooler.stats.reused_logins.load(Ordering::Relaxed),
    )
}

/// The report for a stats snapshot plus the pooler-wide login counters.
pub fn report(classes: &BTreeMap<Class, ClassStats>, logins: u64, reused: u64) -> ResultSet {
    let mut rs = ResultSet::new(columns());
    for (class, stats) in classes {
        let mut row = class_row(class, stats);
        row.extend([Value::Null, Value::Null, Value::Null, Value::Null]);
        rs.push(row);
    }
    rs.push(total_row(classes, logins, reused));
    rs
}

fn columns() -> Vec<(String, Type)> {
    let mut cols = vec![
        ("side".to_string(), Type::Text),
        ("transport".to_string(), Type::Text),
        ("tls".to_string(), Type::Bool),
        ("auth".to_string(), Type::Text),
        ("established".to_string(), Type::Int8),
        ("failed".to_string(), Type::Int8),
    ];
    for phase in PHASES {
        for stat in PHASE_STATS {
            cols.push((format!("{phase}_{stat}_us"), Type::Int8));
        }
    }
    cols.extend(TRANSFER.map(|c| (c.to_string(), Type::Int8)));
    cols.push(("bulk_mb_per_s".to_string(), Type::Float8));
    cols.push(("logins_per_backend_avg".to_string(), Type::Float8));
    cols.push(("logins".to_string(), Type::Int8));
    cols.push(("backend_connects".to_string(), Type::Int8));
    cols.push(("handshakes_avoided".to_string(), Type::Int8));
    cols.push(("saved_ms".to_string(), Type::Float8));
    cols
}

/// Where `phase` sits in a side's histograms, if that side has it.
fn phase_index(side: Side, phase: &str) -> Option<usize> {
    match side {
        Side::Client => CLIENT_PHASES.iter().position(|p| *p == phase),
        Side::Backend => BACKEND_PHASES.iter().position(|p| *p == phase),
    }
}

/// avg, p50, p95, p99 of a histogram; NULLs when it is empty.
fn phase_values(h: Option<&Histogram<u64>>) -> [Value; 4] {
    match h {
        Some(h) if !h.is_empty() => [
            Value::uint(h.mean().round() as u64),
            Value::uint(h.value_at_quantile(0.5)),
            Value::uint(h.value_at_quantile(0.95)),
            Value::uint(h.value_at_quantile(0.99)),
        ],
        _ => [Value::Null, Value::Null, Value::Null, Value::Null],
    }
}

fn class_row(class: &Class, s: &ClassStats) -> Vec<Value> {
    let mut row = vec![
        class.side.to_string().into(),
        class.transport.as_str().into(),
        Value::Bool(class.tls),
        class.auth.map_or(Value::Null, |a| a.as_str().into()),
        Value::uint(s.established),
        Value::uint(s.failed),
    ];
    for phase in PHASES {
        let h = phase_index(class.side, phase).and_then(|i| s.phases.get(i));
        row.extend(phase_values(h));
    }
    let t = &s.transfer;
    row.extend(
        [
            t.bytes_in,
            t.bytes_out,
            t.chatty.exchanges,
            t.chatty.bytes,
            t.chatty.busy_us,
            t.bulk.exchanges,
            t.bulk.bytes,
            t.bulk.busy_us,
        ]
        .map(Value::uint),
    );
    row.push(Value::Float(t.bulk.mb_per_s()));
    let served = &s.logins_per_backend;
    row.push(match class.side {
        Side::Backend if !served.is_empty() => Value::Float(served.mean()),
        _ => Value::Null,
    });
    row
}

fn total_row(classes: &BTreeMap<Class, ClassStats>, logins: u64, reused: u64) -> Vec<Value> {
    let total = phase_index(Side::Backend, "total");
    let (mut connects, mut connect_us_sum, mut measured) = (0u64, 0f64, 0u64);
    for (class, s) in classes {
        if class.side != Side::Backend {
            continue;
        }
        connects += s.established;
        if let Some(h) = total.and_then(|i| s.phases.get(i)) {
            connect_us_sum += h.mean() * h.len() as f64;
            measured += h.len();
        }
    }
    let saved_ms = if measured == 0 {
        Value::Null
    } else {
        Value::Float(reused as f64 * connect_us_sum / measured as f64 / 1000.0)
    };
    let width = columns().len();
    let mut row = vec![Value::from("total")];
    row.resize(width - 4, Value::Null);
    row.extend([
        Value::uint(logins),
        Value::uint(connects),
        Value::uint(reused),
        saved_ms,
    ]);
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listener::Transport;
    use crate::stats::{AuthKind, BackendConnect, ClientLogin, SessionTransfer, Stats};
    use std::time::Duration;

    #[test]
    fn phases_are_exactly_both_sides_phases() {
        for p in CLIENT_PHASES.iter().chain(BACKEND_PHASES.iter()) {
            assert!(PHASES.contains(p), "{p} has no columns");
        }
        for p in PHASES {
            assert!(
                CLIENT_PHASES.contains(&p) || BACKEND_PHASES.contains(&p),
                "{p}"
            );
        }
    }

    fn col(rs: &ResultSet, row: usize, name: &str) -> Value {
        let i = rs.column_names().position(|c| c == name).expect(name);
        rs.rows()[row][i].clone()
    }

    #[test]
    fn rows_per_class_then_the_amortisation_total() {
        let stats = Stats::new();
        let unix = Class::client(Transport::Unix, false, Some(AuthKind::Peer));
        let tls = Class::client(Transport::LoopbackTcp, true, Some(AuthKind::Scram));
        let server = Class::backend(Transport::Unix, false);
        let mut login = ClientLogin::default();
        login.phases_us[1] = 900; // tls_handshake
        stats.client_login(tls, &login, false);
        for i in 0..3 {
            stats.client_login(unix, &ClientLogin::default(), i > 0);
        }
        // The same transport with another method is a row of its own.
        let unix_scram = Class::client(Transport::Unix, false, Some(AuthKind::Scram));
        stats.client_login(unix_scram, &ClientLogin::default(), true);
        let mut connect = BackendConnect::default();
        connect.phases_us[4] = 2_000; // total
        stats.backend_connect(server, &connect);
        stats.backend_connect(server, &connect);
        let mut t = SessionTransfer {
            bytes_in: 10,
            ..Default::default()
        };
        t.exchange(50, Duration::from_micros(20));
        stats.transfer(unix, &t);

        let logins = stats.logins.load(Ordering::Relaxed);
        let reused = stats.reused_logins.load(Ordering::Relaxed);
        let rs = report(&stats.snapshot(), logins, reused);
        let width = rs.column_names().count();
        assert_eq!(width, 6 + PHASES.len() * 4 + 8 + 2 + 4);
        assert!(rs.rows().iter().all(|r| r.len() == width));
        // BTreeMap order: client unix peer, client unix SCRAM, client
        // tcp-loopback TLS, server unix, total.
        assert_eq!(rs.rows().len(), 5);
        assert_eq!(col(&rs, 0, "auth"), "peer".into());
        assert_eq!(col(&rs, 1, "auth"), "scram-sha-256".into());
        assert_eq!(col(&rs, 1, "established"), Value::Int(1));
        assert_eq!(col(&rs, 3, "auth"), Value::Null);
        assert_eq!(col(&rs, 0, "side"), "client".into());
        assert_eq!(col(&rs, 0, "transport"), "unix".into());
        assert_eq!(col(&rs, 0, "established"), Value::Int(3));
        assert_eq!(col(&rs, 0, "tls_handshake_avg_us"), Value::Int(0));
        assert_eq!(col(&rs, 0, "connect_avg_us"), Value::Null);
        assert_eq!(col(&rs, 0, "chatty_exchanges"), Value::Int(1));
        assert_eq!(col(&rs, 0, "bytes_in"), Value::Int(10));
        assert_eq!(col(&rs, 0, "logins_per_backend_avg"), Value::Null);
        assert_eq!(col(&rs, 0, "logins"), Value::Null);
        assert_eq!(col(&rs, 2, "tls"), Value::Bool(true));
        let Value::Int(hs) = col(&rs, 2, "tls_handshake_p99_us") else {
            panic!("no TLS handshake time")
        };
        assert!((890..=910).contains(&hs), "{hs}");
        assert_eq!(col(&rs, 3, "side"), "server".into());
        assert_eq!(col(&rs, 3, "first_packet_avg_us"), Value::Null);
        assert_eq!(col(&rs, 3, "backend_wait_p50_us"), Value::Null);
        assert_eq!(col(&rs, 3, "established"), Value::Int(2));
        assert_eq!(col(&rs, 4, "side"), "total".into());
        assert_eq!(col(&rs, 4, "transport"), Value::Null);
        assert_eq!(col(&rs, 4, "logins"), Value::Int(5));
        assert_eq!(col(&rs, 4, "backend_connects"), Value::Int(2));
        assert_eq!(col(&rs, 4, "handshakes_avoided"), Value::Int(3));
        let Value::Float(saved) = col(&rs, 4, "saved_ms") else {
            panic!("saved_ms is not a number")
        };
        assert!((saved - 6.0).abs() < 0.1, "{saved}");
    }

    #[test]
    fn nothing_measured_is_a_lone_total_row() {
        let rs = report(&BTreeMap::new(), 0, 0);
        assert_eq!(rs.rows().len(), 1);
        assert_eq!(col(&rs, 0, "handshakes_avoided"), Value::Int(0));
        assert_eq!(col(&rs, 0, "saved_ms"), Value::Null);
    }
}
