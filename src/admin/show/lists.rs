//! `SHOW LISTS`, `SHOW MEM` and `SHOW STATE`: the pooler's own objects,
//! counted, sized and in what state, under PgBouncer's names where
//! PgBouncer has the same thing and 0 where it has something pgharbor does
//! not (free lists, a DNS cache, SUSPEND).

use std::mem::size_of;
use std::sync::atomic::Ordering;

use super::super::rows::{ResultSet, Type, Value};
use super::databases::known_users;
use crate::admin::Authorized;
use crate::backend::{Link, RELAY_BUF};
use crate::pool::Pool;
use crate::pooler::Pooler;
use crate::registry::ClientRegistry;

/// `SHOW LISTS`: rows `list`, `items`, as PgBouncer. `used_clients` counts
/// logged-in clients and console sessions; `login_clients` the connections
/// past their startup packet that are still logging in; `used_servers` the
/// open backends. pgharbor keeps no free lists of clients or servers and
/// resolves host names through the system for each connect (no cache): those
/// rows are 0.
pub fn lists(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let pools = pooler.pools.all();
    let consoles = pooler.console_sessions.load(Ordering::Relaxed);
    let used_clients = pooler.clients.len() + consoles;
    let holding_slots = pooler
        .client_slots_total
        .saturating_sub(pooler.client_slots.available_permits());
    let servers: usize = pools.iter().map(|p| p.servers().list().len()).sum();
    let rows = [
        ("databases", pooler.config().databases.len()),
        ("users", known_users(pooler).len()),
        ("pools", pools.len()),
        ("free_clients", 0),
        ("used_clients", used_clients),
        ("login_clients", holding_slots.saturating_sub(used_clients)),
        ("free_servers", 0),
        ("used_servers", servers),
        ("dns_names", 0),
        ("dns_zones", 0),
        ("dns_queries", 0),
        ("dns_pending", 0),
    ];
    let mut rs = ResultSet::new([("list", Type::Text), ("items", Type::Int8)]);
    for (list, items) in rows {
        rs.push(vec![list.into(), Value::count(items)]);
    }
    rs
}

/// One `SHOW MEM` row: items in use and kept free, and bytes per item.
struct MemRow {
    name: &'static str,
    size: usize,
    used: usize,
    free: usize,
    /// Bytes in all, when items differ in size (else `size` × items).
    total: Option<usize>,
}

/// `SHOW MEM`: PgBouncer's columns (name, size, used, free, memtotal), for
/// what pgharbor holds per object, estimated from the sizes of its records
/// rather than measured from the allocator: `clients` (a logged-in client's
/// registry entry; its task and buffers are not counted), `servers` (a
/// backend's link and its fixed read buffer), `pools`, `prepared_statements`
/// (the shared registry's definitions, `size` their mean) and
/// `read_buffers` (buffers idle clients gave back, kept free for reuse).
pub fn mem(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let pools = pooler.pools.all();
    let servers: usize = pools.iter().map(|p| p.servers().list().len()).sum();
    let statements = (pooler.statements.len(), pooler.statements.bytes());
    let stash = (pooler.buffers.len(), pooler.buffers.bytes());
    let rows = [
        MemRow {
            name: "clients",
            size: ClientRegistry::entry_size(),
            used: pooler.clients.len(),
            free: 0,
            total: None,
        },
        MemRow {
            name: "servers",
            size: size_of::<Link>() + RELAY_BUF,
            used: servers,
            free: 0,
            total: None,
        },
        MemRow {
            name: "pools",
            size: size_of::<Pool>(),
            used: pools.len(),
            free: 0,
            total: None,
        },
        MemRow {
            name: "prepared_statements",
            size: statements.1.checked_div(statements.0).unwrap_or(0),
            used: statements.0,
            free: 0,
            total: Some(statements.1),
        },
        MemRow {
            name: "read_buffers",
            size: stash.1.checked_div(stash.0).unwrap_or(0),
            used: 0,
            free: stash.0,
            total: Some(stash.1),
        },
    ];
    let mut rs = ResultSet::new(["name", "size", "used", "free", "memtotal"].map(|n| {
        let ty = if n == "name" { Type::Text } else { Type::Int8 };
        (n, ty)
    }));
    for r in rows {
        let total = r.total.unwrap_or(r.size * (r.used + r.free));
        rs.push(vec![
            r.name.into(),
            Value::count(r.size),
            Value::count(r.used),
            Value::count(r.free),
            Value::count(total),
        ]);
    }
    rs
}

/// `SHOW STATE`: key/value rows `active`, `paused`, `suspended` (`yes` or
/// `no`), as PgBouncer. `paused` is the whole pooler paused (PAUSE without
/// a database: every pool paused); one paused database leaves the pooler
/// active, as in PgBouncer. pgharbor has no SUSPEND.
pub fn state(pooler: &Pooler, _: &Authorized) -> ResultSet {
    let pools = pooler.pools.all();
    let paused = !pools.is_empty() && pools.iter().all(|p| p.is_paused());
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut rs = ResultSet::new([("key", Type::Text), ("value", Type::Text)]);
    for (key, on) in [
        ("active", !paused),
        ("paused", paused),
        ("suspended", false),
    ] {
        rs.push(vec![key.into(), yes_no(on).into()]);
    }
    rs
}
