//! The families beside the overhead report and the pools: per-database
//! query and transaction counters (SHOW STATS's figures), the build, the
//! client-facing certificate's expiry and the process's own figures.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;

use super::collect::Snapshot;
use super::encode::{counters, gauges};
use crate::stats::SessionTransfer;

const NO_LABELS: [(&str, &str); 0] = [];

/// A per-database counter: name, help, value.
type DbCounter = (&'static str, &'static str, fn(&SessionTransfer) -> f64);

/// Per-database counters, in the order the module doc lists them.
const DATABASE_COUNTERS: [DbCounter; 5] = [
    (
        "pgharbor_database_transactions",
        "Transactions completed (ended by a ReadyForQuery saying idle)",
        |t| t.xacts as f64,
    ),
    (
        "pgharbor_database_queries",
        "Queries: client requests answered, one per ReadyForQuery relayed",
        |t| t.queries as f64,
    ),
    (
        "pgharbor_database_transaction_seconds",
        "Time of those transactions, from their first request to the idle ReadyForQuery",
        |t| t.xact_us as f64 / 1e6,
    ),
    (
        "pgharbor_database_query_seconds",
        "Time client requests were in flight",
        |t| t.query_us() as f64 / 1e6,
    ),
    (
        "pgharbor_database_wait_seconds",
        "Time clients waited for a backend",
        |t| t.wait_us as f64 / 1e6,
    ),
];

impl Snapshot {
    pub(super) fn encode_databases(&self, d: &mut DescriptorEncoder) -> fmt::Result {
        for (name, help, f) in DATABASE_COUNTERS {
            let series = self
                .databases
                .iter()
                .map(|(db, t)| ([("database", db.as_str())], f(t)));
            counters(d, name, help, series)?;
        }
        Ok(())
    }

    pub(super) fn encode_process(&self, d: &mut DescriptorEncoder) -> fmt::Result {
        gauges(
            d,
            "pgharbor_build_info",
            "Always 1; the labels say which build is running",
            [([("version", env!("CARGO_PKG_VERSION"))], 1u64)],
        )?;
        gauges(
            d,
            "pgharbor_tls_certificate_expiry_seconds",
            "When the certificate shown to clients expires (notAfter), Unix time",
            self.cert_not_after.map(|t| (NO_LABELS, t)),
        )?;
        let p = &self.process;
        gauges(
            d,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            p.resident_bytes.map(|v| (NO_LABELS, v)),
        )?;
        gauges(
            d,
            "process_open_fds",
            "Number of open file descriptors",
            p.open_fds.map(|v| (NO_LABELS, v)),
        )?;
        counters(
            d,
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            p.cpu_seconds.map(|v| (NO_LABELS, v)),
        )
    }
}
