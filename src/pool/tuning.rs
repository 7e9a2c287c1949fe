//! The settings of a pool that a reload changes in place: sizes, timeouts,
//! the reset and check queries. Every reader (checkout, release, the
//! maintenance task, backend opens) reads the current value at each use,
//! so a reload reaches the pools that exist, not only those created after
//! it; SHOW DATABASES, which shows the configured sizes, is then what
//! applies. A smaller size takes effect as backends come back: no client
//! loses the backend it holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::manager::close_idle;
use super::Pool;
use crate::backend::ResetQuery;
use crate::config::Config;

/// A pool's reloadable settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuning {
    /// Backends clients may hold at once (`pool_size`).
    pub size: usize,
    /// Backends kept open ahead of demand (at most `size`).
    pub min_size: usize,
    /// Extra backends for clients that waited `reserve_timeout`.
    pub reserve_size: usize,
    /// How long a client waits before a reserve backend may serve it; zero
    /// turns the reserve off.
    pub reserve_timeout: Duration,
    /// Longest wait for a free backend.
    pub wait_timeout: Duration,
    /// `server_connect_timeout`: bound on opening one backend (with the
    /// conninfo's `connect_timeout`, whichever is shorter, per host).
    pub connect_timeout: Duration,
    /// Limit on each of the pooler's own statements on a backend.
    pub command_timeout: Duration,
    /// Run at release; "" skips it.
    pub reset_query: ResetQuery,
    /// How long a departed client's statements may take to finish.
    pub drain_timeout: Duration,
    /// Idle backends unused this long are closed (down to `min_size`); zero = never.
    pub idle_timeout: Duration,
    /// Backends older than this are closed when released; zero = never.
    pub lifetime: Duration,
    /// Backends idle longer than this run `check_query` at checkout.
    pub check_delay: Duration,
    /// "" = no check.
    pub check_query: String,
}

impl Tuning {
    /// What `config` sets for the pools of `database`.
    pub fn for_database(config: &Config, database: &str) -> Tuning {
        let p = &config.pool;
        Tuning {
            size: config.pool_size_for(database),
            min_size: config.min_pool_size_for(database),
            reserve_size: config.reserve_pool_size_for(database),
            reserve_timeout: p.reserve_pool_timeout,
            wait_timeout: p.query_wait_timeout,
            connect_timeout: p.server_connect_timeout,
            command_timeout: p.server_command_timeout,
            reset_query: ResetQuery::new(p.server_reset_query.clone()),
            drain_timeout: p.server_drain_timeout,
            idle_timeout: p.server_idle_timeout,
            lifetime: p.server_lifetime,
            check_delay: p.server_check_delay,
            check_query: p.server_check_query.clone(),
        }
    }

    /// Reserve places in force: none while `reserve_timeout` is zero.
    pub fn reserve(&self) -> usize {
        if self.reserve_timeout.is_zero() {
            0
        } else {
            self.reserve_size
        }
    }

    /// The settings that differ in `new`, as `key old -> new`, for the log.
    pub fn changes(&self, new: &Tuning) -> Vec<String> {
        let n = |v: usize| v.to_string();
        let d = |v: Duration| format!("{v:?}");
        let q = |s: &str| format!("{s:?}");
        let (a, b) = (self, new);
        [
            ("pool_size", n(a.size), n(b.size)),
            ("min_pool_size", n(a.min_size), n(b.min_size)),
            ("reserve_pool_size", n(a.reserve_size), n(b.reserve_size)),
            (
                "reserve_pool_timeout",
                d(a.reserve_timeout),
                d(b.reserve_timeout),
            ),
            ("query_wait_timeout", d(a.wait_timeout), d(b.wait_timeout)),
            (
                "server_connect_timeout",
                d(a.connect_timeout),
                d(b.connect_timeout),
            ),
            (
                "server_command_timeout",
                d(a.command_timeout),
                d(b.command_timeout),
            ),
            (
                "server_reset_query",
                q(a.reset_query.text()),
                q(b.reset_query.text()),
            ),
            (
                "server_drain_timeout",
                d(a.drain_timeout),
                d(b.drain_timeout),
            ),
            ("server_idle_timeout", d(a.idle_timeout), d(b.idle_timeout)),
            ("server_lifetime", d(a.lifetime), d(b.lifetime)),
            ("server_check_delay", d(a.check_delay), d(b.check_delay)),
            ("server_check_query", q(&a.check_query), q(&b.check_query)),
        ]
        .into_iter()
        .filter(|(_, old, new)| old != new)
        .map(|(key, old, new)| format!("{key} {old} -> {new}"))
        .collect()
    }
}

impl Pool {
    /// The settings in force now.
    pub fn tuning(&self) -> Arc<Tuning> {
        self.tuning.borrow().clone()
    }

    /// Puts `new` in force for this pool and its backends; returns what
    /// changed (`key old -> new`), empty when nothing did. A smaller pool
    /// or reserve applies as lent backends come back (those beyond the new
    /// size are closed then).
    pub fn retune(&self, new: Tuning) -> Vec<String> {
        let old = self.tuning();
        let changes = old.changes(&new);
        if changes.is_empty() {
            return changes;
        }
        resize(&self.main, old.size, new.size, Some(&self.main_owed));
        resize(&self.reserve, old.reserve(), new.reserve(), None);
        // Idle backends beyond the new size close here, with the books
        // kept: deadpool's own shrink drops them without `detach`.
        let max = new.size + new.reserve();
        let mut excess = self.inner.status().size.saturating_sub(max);
        let removed = self.inner.retain(|_, _| {
            let keep = excess == 0;
            excess = excess.saturating_sub(1);
            keep
        });
        for pooled in removed.removed {
            close_idle(pooled, "pool size reduced by a reload");
        }
        self.inner.resize(max);
        self.tuning.send_replace(Arc::new(new));
        changes
    }
}

/// Gives `permits` the capacity `new` instead of `old`. Growing adds
/// permits at once (waiters get them in order); shrinking forgets the free
/// ones now and takes the rest as holders give them back, queueing like
/// any client, so the new limit holds from then on and nobody is cut off.
/// `owed` counts the permits still to be taken back meanwhile.
pub(super) fn resize(
    permits: &Arc<Semaphore>,
    old: usize,
    new: usize,
    owed: Option<&Arc<AtomicUsize>>,
) {
    if new > old {
        permits.add_permits(new - old);
        return;
    }
    let owed_now = old - new;
    let later = owed_now - permits.forget_permits(owed_now);
    if later == 0 {
        return;
    }
    let Ok(n) = u32::try_from(later) else {
        return;
    };
    let permits = permits.clone();
    let owed = owed.cloned();
    if let Some(o) = &owed {
        o.fetch_add(later, Ordering::Relaxed);
    }
    tokio::spawn(async move {
        // Err only once the pool is closed, when the count no longer matters.
        if let Ok(p) = permits.acquire_many_owned(n).await {
            p.forget();
        }
        if let Some(o) = owed {
            o.fetch_sub(later, Ordering::Relaxed);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resize_grows_at_once_and_shrinks_as_permits_come_back() {
        let s = Arc::new(Semaphore::new(2));
        let a = s.clone().acquire_owned().await.unwrap();
        let b = s.clone().acquire_owned().await.unwrap();
        resize(&s, 2, 1, None);
        drop(a);
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert_eq!(s.available_permits(), 0, "the returned permit was taken");
        drop(b);
        assert_eq!(s.available_permits(), 1);
        resize(&s, 1, 3, None);
        assert_eq!(s.available_permits(), 3);
        resize(&s, 3, 1, None);
        assert_eq!(s.available_permits(), 1);
    }

    #[test]
    fn changes_name_the_keys() {
        let text = "[auth]\nmethod = \"trust\"\n[pool]\ndefault_pool_size = 2\n";
        let config = Config::parse(text, std::path::Path::new("t.toml")).unwrap();
        let old = Tuning::for_database(&config, "app");
        let mut new = old.clone();
        new.size = 1;
        new.reset_query = ResetQuery::new(String::new());
        assert_eq!(
            old.changes(&new),
            [
                "pool_size 2 -> 1",
                "server_reset_query \"DISCARD ALL\" -> \"\""
            ]
        );
        assert!(old.changes(&old).is_empty());
    }
}
