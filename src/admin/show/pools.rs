//! `SHOW POOLS`, with PgBouncer's (1.24) columns, one row per (database,
//! user) pool, from its server registry and the client registry:
//!
//! - `cl_active`: the pool's logged-in clients that are not waiting
//!   (holding a backend, or idle between transactions), as PgBouncer counts
//!   them; `cl_waiting`: clients waiting for a backend now;
//! - `sv_active` = backends lent out, `sv_used` = ones being reset after
//!   their client left, `sv_idle` = clean ones, `sv_login` = backends
//!   connecting or logging in;
//! - `maxwait` / `maxwait_us`: how long the oldest client still waiting has
//!   waited, in whole seconds and the microseconds beyond them (0 when none
//!   waits), computed when SHOW runs from the time each waiting client
//!   recorded;
//! - cancel requests in flight are not tracked: 0.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::admin::rows::{ResultSet, Type, Value};
use crate::admin::Authorized;
use crate::pool::{pool_key, PoolKey, ServerState};
use crate::pooler::Pooler;
use crate::registry::ClientState;

const COLUMNS: [&str; 17] = [
    "database",
    "user",
    "cl_active",
    "cl_waiting",
    "cl_active_cancel_req",
    "cl_waiting_cancel_req",
    "sv_active",
    "sv_active_cancel",
    "sv_being_canceled",
    "sv_idle",
    "sv_used",
    "sv_tested",
    "sv_login",
    "maxwait",
    "maxwait_us",
    "pool_mode",
    "load_balance_hosts",
];

/// What the client registry says about one pool's clients.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PoolClients {
    /// Logged in and not waiting.
    pub active: usize,
    /// The longest current wait for a backend.
    pub max_wait: Duration,
}

/// Per pool, its clients' counts and oldest wait, as of now.
pub fn clients_by_pool(pooler: &Pooler) -> BTreeMap<PoolKey, PoolClients> {
    let config = pooler.config();
    let mut out: BTreeMap<PoolKey, PoolClients> = BTreeMap::new();
    for c in pooler.clients.list() {
        let Some(key) = pool_key(&config, &c.database, &c.user) else {
            continue;
        };
        let e = out.entry(key).or_default();
        match (c.state, c.wait) {
            (ClientState::WaitingForBackend, Some(w)) => e.max_wait = e.max_wait.max(w),
            (ClientState::Active | ClientState::Idle, _) => e.active += 1,
            _ => {}
        }
    }
    out
}

/// Whole seconds and the microseconds beyond them, PgBouncer's split.
pub fn seconds_and_us(d: Duration) -> (Value, Value) {
    (
        Value::uint(d.as_secs()),
        Value::Int(i64::from(d.subsec_micros())),
    )
}

/// `SHOW POOLS`.
pub fn pools(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let c = pooler.config();
    let mut rs = ResultSet::new(COLUMNS.map(|n| {
        let ty = match n {
            "database" | "user" | "pool_mode" | "load_balance_hosts" => Type::Text,
            _ => Type::Int8,
        };
        (n, ty)
    }));
    let clients = clients_by_pool(pooler);
    let mut pools = pooler.pools.all();
    pools.sort_by(|a, b| a.key.cmp(&b.key));
    for pool in pools {
        let servers = pool.servers().list();
        let count = |state: ServerState| servers.iter().filter(|s| s.state == state).count();
        let mine = clients.get(&pool.key).copied().unwrap_or_default();
        let (maxwait, maxwait_us) = seconds_and_us(mine.max_wait);
        let zero = || Value::Int(0);
        rs.push(vec![
            pool.key.database.as_str().into(),
            pool.key.user.as_str().into(),
            Value::count(mine.active),
            Value::count(pool.waiting()),
            zero(),
            zero(),
            Value::count(count(ServerState::Active)),
            zero(),
            zero(),
            Value::count(count(ServerState::Idle)),
            Value::count(count(ServerState::Resetting)),
            zero(),
            Value::count(pool.logging_in()),
            maxwait,
            maxwait_us,
            c.pool_mode_for(&pool.key.database, &pool.key.user)
                .as_str()
                .into(),
            Value::Null,
        ]);
    }
    rs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_split_into_seconds_and_microseconds() {
        let (s, us) = seconds_and_us(Duration::from_micros(3_250_017));
        assert_eq!((s, us), (Value::Int(3), Value::Int(250_017)));
        let (s, us) = seconds_and_us(Duration::ZERO);
        assert_eq!((s, us), (Value::Int(0), Value::Int(0)));
    }
}
