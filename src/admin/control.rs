//! `PAUSE [db]`, `RESUME [db]` and `KILL db`, with PgBouncer's meanings,
//! applied to the pools of the database (all pools when no database is
//! named):
//!
//! - PAUSE: no backend is handed out any more (new and reconnecting clients
//!   wait, within `query_wait_timeout`); idle backends are closed; the
//!   command returns once no backend is lent out — in session mode, once
//!   every client of the database has left.
//! - RESUME: hands out backends again after PAUSE or KILL.
//! - KILL: ends every session on the database at once (FATAL 57P01), closes
//!   its backends, and leaves it paused until RESUME.
//!
//! Pools are created on a database's first login, so a database nobody has
//! used yet has no pool to pause: PAUSE of it succeeds and does nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::Authorized;
use crate::config::ADMIN_DATABASE;
use crate::pool::Pool;
use crate::pooler::Pooler;
use crate::protocol::PgError;

/// How long KILL waits for the killed sessions to give their backends back.
const KILL_DRAIN: Duration = Duration::from_secs(5);

/// The pools a command acts on; errors for the console's own database and
/// for a name that is neither configured nor has pools.
fn target_pools(pooler: &Pooler, db: Option<&str>, verb: &str) -> Result<Vec<Arc<Pool>>, PgError> {
    let pools = pooler.pools.all();
    let Some(name) = db else {
        return Ok(pools);
    };
    if name == ADMIN_DATABASE {
        return Err(PgError::error(
            "55000",
            format!("cannot {verb} the admin console database \"{name}\""),
        ));
    }
    let pools: Vec<Arc<Pool>> = pools
        .into_iter()
        .filter(|p| p.key.database == name)
        .collect();
    if pools.is_empty() && pooler.config().database(name).is_none() {
        return Err(PgError::error(
            "3D000",
            format!("no such database: \"{name}\""),
        ));
    }
    Ok(pools)
}

/// Pauses every pool at once and waits until all are drained.
async fn pause_all(pools: Vec<Arc<Pool>>) {
    let mut set = JoinSet::new();
    for pool in pools {
        set.spawn(async move { pool.pause().await });
    }
    while set.join_next().await.is_some() {}
}

/// `PAUSE [db]`.
pub async fn pause(pooler: &Pooler, db: Option<&str>, _: &Authorized) -> Result<(), PgError> {
    let pools = target_pools(pooler, db, "pause")?;
    if !pools.is_empty() && pools.iter().all(|p| p.is_paused()) {
        return Err(PgError::error(
            "55000",
            format!("{} is already paused", what(db)),
        ));
    }
    tracing::info!(
        database = db.unwrap_or("*"),
        "PAUSE: waiting for backends to be returned"
    );
    pause_all(pools).await;
    Ok(())
}

/// `RESUME [db]`.
pub fn resume(pooler: &Pooler, db: Option<&str>, _: &Authorized) -> Result<(), PgError> {
    let paused: Vec<Arc<Pool>> = target_pools(pooler, db, "resume")?
        .into_iter()
        .filter(|p| p.is_paused())
        .collect();
    if paused.is_empty() {
        return Err(PgError::error(
            "55000",
            format!("{} is not paused", what(db)),
        ));
    }
    for pool in paused {
        pool.resume();
    }
    tracing::info!(database = db.unwrap_or("*"), "RESUME");
    Ok(())
}

/// `KILL db`.
pub async fn kill(pooler: &Pooler, db: &str, _: &Authorized) -> Result<(), PgError> {
    let pools = target_pools(pooler, Some(db), "kill")?;
    tracing::info!(database = db, "KILL: ending every session on the database");
    for pool in &pools {
        pool.kill();
    }
    // Pausing starts at once; waiting for the killed sessions to hand their
    // backends back is bounded, so KILL itself never hangs.
    let _ = tokio::time::timeout(KILL_DRAIN, pause_all(pools)).await;
    Ok(())
}

fn what(db: Option<&str>) -> String {
    match db {
        Some(name) => format!("database \"{name}\""),
        None => "the pooler".to_string(),
    }
}
