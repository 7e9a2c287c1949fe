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
//! - DISABLE / ENABLE: new logins to the database are refused (FATAL 55000,
//!   after authentication) / let in again; sessions already in are untouched.
//! - RECONNECT: each open backend of the database is closed once it is next
//!   released (idle ones at once); new backends connect as needed.
//! - WAIT_CLOSE: returns once the backends RECONNECT marked are all closed.
//!   pgharbor's RELOAD never marks backends (a pool keeps the route it was
//!   created with), so only RECONNECT's count.
//! - KILL_CLIENT id: ends one client's session (57P01), wherever it is:
//!   waiting for a backend, relaying, or idle between transactions.
//!
//! Pools are created on a database's first login, so a database nobody has
//! used yet has no pool to pause: PAUSE of it succeeds and does nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::Admin;
use crate::config::is_admin_database;
use crate::config::Config;
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
    check_name(pooler, name, verb, &pools)?;
    Ok(pools
        .into_iter()
        .filter(|p| p.key.database == name)
        .collect())
}

/// Errors for the console's own database and for a name that is neither
/// configured (or served by the `*` fallback) nor has pools.
fn check_name(pooler: &Pooler, name: &str, verb: &str, pools: &[Arc<Pool>]) -> Result<(), PgError> {
    if is_admin_database(name) {
        return Err(PgError::error(
            "55000",
            format!("cannot {verb} the admin console database \"{name}\""),
        ));
    }
    let known = pools.iter().any(|p| p.key.database == name);
    if !known && pooler.config().database(name).is_none() {
        return Err(PgError::error(
            "3D000",
            format!("no such database: \"{name}\""),
        ));
    }
    Ok(())
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
pub async fn pause(pooler: &Pooler, db: Option<&str>, _: &Admin) -> Result<(), PgError> {
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
pub fn resume(pooler: &Pooler, db: Option<&str>, _: &Admin) -> Result<(), PgError> {
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
pub async fn kill(pooler: &Pooler, db: &str, _: &Admin) -> Result<(), PgError> {
    let pools = target_pools(pooler, Some(db), "kill")?;
    tracing::info!(database = db, "KILL: ending every session on the database");
    for pool in &pools {
        pooler.kill_pool(pool);
    }
    // Pausing starts at once; waiting for the killed sessions to hand their
    // backends back is bounded, so KILL itself never hangs.
    let _ = tokio::time::timeout(KILL_DRAIN, pause_all(pools)).await;
    Ok(())
}

/// `DISABLE db` (`disabled`) or `ENABLE db`.
pub fn set_disabled(pooler: &Pooler, db: &str, disabled: bool, _: &Admin) -> Result<(), PgError> {
    let verb = if disabled { "disable" } else { "enable" };
    check_name(pooler, db, verb, &pooler.pools.all())?;
    if !pooler.set_disabled(db, disabled) {
        let state = if disabled { "disabled" } else { "not disabled" };
        return Err(PgError::error(
            "55000",
            format!("database \"{db}\" is already {state}"),
        ));
    }
    tracing::info!(database = db, "{}", verb.to_ascii_uppercase());
    Ok(())
}

/// `RECONNECT [db]`.
pub fn reconnect(pooler: &Pooler, db: Option<&str>, _: &Admin) -> Result<(), PgError> {
    let pools = target_pools(pooler, db, "reconnect")?;
    for pool in &pools {
        pool.reconnect();
    }
    tracing::info!(
        database = db.unwrap_or("*"),
        "RECONNECT: backends close as they are released"
    );
    Ok(())
}

/// How often WAIT_CLOSE looks again.
const WAIT_CLOSE_POLL: Duration = Duration::from_millis(50);

/// `WAIT_CLOSE [db]`: as long as it takes (the console gives up on shutdown).
pub async fn wait_close(pooler: &Pooler, db: Option<&str>, _: &Admin) -> Result<(), PgError> {
    let pools = target_pools(pooler, db, "wait for")?;
    while pools.iter().any(|p| p.closing()) {
        tokio::time::sleep(WAIT_CLOSE_POLL).await;
    }
    Ok(())
}

/// `KILL_CLIENT id`: the `id` of SHOW CLIENTS.
pub fn kill_client(pooler: &Pooler, id: u64, _: &Admin) -> Result<(), PgError> {
    if !pooler.clients.kill(id) {
        return Err(PgError::error("42704", format!("no client with id {id}"))
            .with_hint("SHOW CLIENTS lists the clients logged in now, with their ids."));
    }
    tracing::info!(client = id, "KILL_CLIENT");
    Ok(())
}

fn what(db: Option<&str>) -> String {
    match db {
        Some(name) => format!("database \"{name}\""),
        None => "the pooler".to_string(),
    }
}

/// RELOAD: the config file and auth file again, as on SIGHUP; a broken file
/// keeps the old configuration and says why.
pub async fn reload(pooler: &Pooler, _: &Admin) -> Result<(), PgError> {
    // First, so log rotation works even while the config file is broken.
    crate::service::logfile::reopen();
    let failed = |e: String| {
        PgError::error("F0000", format!("RELOAD failed: {e}"))
            .with_hint("The old configuration stays in use; fix the file and RELOAD again.")
    };
    let path = pooler.config().path.clone();
    let config = Config::load(&path).map_err(|e| failed(e.to_string()))?;
    if let Err(e) = pooler.reload(config).await {
        // The log names what is broken (an hba file's file:line included).
        tracing::warn!(error = %e, "RELOAD failed; keeping the old configuration");
        return Err(failed(e.to_string()));
    }
    tracing::info!("configuration reloaded (admin console RELOAD)");
    Ok(())
}

/// SHUTDOWN: sends this process SIGTERM, so the one graceful path in `main`
/// runs (stop accepting, let sessions finish within `shutdown_timeout`).
pub fn shutdown(_: &Admin) -> Result<(), PgError> {
    tracing::info!("SHUTDOWN from the admin console");
    let pid = libc::pid_t::try_from(std::process::id())
        .map_err(|_| PgError::error("XX000", "process id out of range"))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(PgError::error(
            "XX000",
            format!("cannot signal shutdown: {e}"),
        ));
    }
    Ok(())
}
