//! The open-files limit against what the config may open at once: each
//! client holds a descriptor, and so does each backend it may be paired with.

use crate::config::Config;

/// Descriptors pgharbor holds besides clients and backends: listeners,
/// log file, epoll, metrics, and head room for cancel requests.
const OVERHEAD: u64 = 32;

/// Descriptors the config may need at peak: `max_client_conn` plus every
/// pool's size and reserve, for every configured database.
pub fn needed(config: &Config) -> u64 {
    let pool = &config.pool;
    let per_db = |db: &crate::config::DatabaseConfig| {
        let size = db.pool_size.unwrap_or(pool.default_pool_size);
        let reserve = db.reserve_pool_size.unwrap_or(pool.reserve_pool_size);
        size + reserve
    };
    let backends: usize = config.databases.values().map(per_db).sum();
    let clients = u64::try_from(pool.max_client_conn).unwrap_or(u64::MAX);
    let backends = u64::try_from(backends).unwrap_or(u64::MAX);
    clients.saturating_add(backends).saturating_add(OVERHEAD)
}

/// The soft RLIMIT_NOFILE, or None when unlimited or unknown.
pub fn open_files_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

/// Logs a warning when the open-files limit is below [`needed`].
pub fn warn_if_low(config: &Config) {
    let Some(limit) = open_files_limit() else {
        return;
    };
    let need = needed(config);
    if limit < need {
        tracing::warn!(
            limit,
            needed = need,
            "open-files limit (ulimit -n) is below max_client_conn plus pool sizes: \
             clients past it will be refused with \"too many open files\"; \
             raise LimitNOFILE= or ulimit -n, or lower pool.max_client_conn"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn counts_clients_pools_and_reserves() {
        let text = r#"
            [auth]
            method = "trust"
            [pool]
            max_client_conn = 100
            default_pool_size = 10
            reserve_pool_size = 2
            [databases.a]
            conninfo = "host=/tmp dbname=a"
            [databases.b]
            conninfo = "host=/tmp dbname=b"
            pool_size = 5
        "#;
        let c = Config::parse(text, Path::new("/x/pgharbor.toml")).unwrap();
        assert_eq!(needed(&c), 100 + 12 + 7 + OVERHEAD);
    }
}
