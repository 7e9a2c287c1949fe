//! The SHOW commands PgBouncer also has: same column names and meanings, so
//! dashboards and exporters written for PgBouncer keep working. A column
//! pgharbor does not measure yet is NULL, never a made-up number; one that
//! PgBouncer defines but that has no meaning here (load balancing) holds
//! PgBouncer's "none" value.

use super::rows::{ResultSet, Type};
use super::Authorized;

mod config;
mod databases;
mod lists;
mod pools;
mod stats;

pub use config::{config, config_reload};
pub use databases::{databases, users};
pub use lists::{lists, mem, state};
pub use pools::{clients_by_pool, pools, seconds_and_us, PoolClients};
pub use stats::{per_database as stats_by_database, stats, stats_totals, totals};

/// `SHOW VERSION`: one row, column `version`.
pub fn version(_: &Authorized) -> ResultSet {
    let mut rs = ResultSet::new([("version", Type::Text)]);
    rs.push(vec![version_string().into()]);
    rs
}

/// `pgharbor <crate version>`.
pub fn version_string() -> String {
    format!("pgharbor {}", env!("CARGO_PKG_VERSION"))
}
