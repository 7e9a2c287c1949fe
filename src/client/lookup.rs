//! `auth.query`, PgBouncer's way to need no user list: a user missing from
//! the auth file is looked up in PostgreSQL, by a pooled backend of
//! `auth.user`, with the user name bound as a parameter. The secret found
//! checks the client's login like an auth-file one (and a SCRAM one lends
//! the client's keys to the pool). Answers are kept for
//! `auth.query_cache_ttl`; lookups run at most `auth.query_concurrency` at
//! once and a login waits for its own at most `auth.query_timeout`.
//!
//! No such user (or one without a password) is `None`, which the login
//! turns into the same mock exchange as an unknown auth-file user: nobody
//! can tell which users exist. A failed lookup refuses the login with the
//! same message whatever the user, and the reason goes to the log.

use std::sync::Arc;

use super::ClientError;
use crate::auth::{Secret, SecretError};
use crate::backend::{BackendError, Departure, Row};
use crate::pool::{AcquireError, NoPool};
use crate::pooler::{Pooler, Snapshot};
use crate::protocol::PgError;
use crate::registry::secrets::Found;

/// Why a lookup found no answer.
#[derive(Debug, thiserror::Error)]
enum LookupError {
    #[error("no pool for auth.user: {0}")]
    Pool(#[from] NoPool),
    #[error("no backend for auth.user: {0}")]
    Acquire(#[from] AcquireError),
    #[error("auth.query failed: {0}")]
    Query(#[from] BackendError),
    #[error("auth.query returned a secret pgharbor cannot read: {0}")]
    Secret(#[from] SecretError),
    #[error("auth.query returned a secret that is not UTF-8")]
    NotText,
    #[error("auth.query returned fewer than two columns (name, secret)")]
    Columns,
    #[error("the lookup slots are closed")]
    Closed,
    #[error("no answer within auth.query_timeout")]
    Timeout,
}

/// The secret of `user`, who is not in the auth file, as `auth.query` finds
/// it (from the cache when fresh); `None` when lookups are off or the user
/// has none.
pub(super) async fn secret(
    pooler: &Arc<Pooler>,
    snapshot: &Snapshot,
    user: &str,
    database: &str,
) -> Result<Found, ClientError> {
    let cfg = &snapshot.config.auth.lookup;
    let Some(auth_user) = cfg.user.as_deref() else {
        return Ok(None);
    };
    if let Some(found) = pooler.secrets.get(user, cfg.cache_ttl) {
        return Ok(found);
    }
    let db = cfg.dbname.as_deref().unwrap_or(database);
    let work = look_up(pooler, snapshot, auth_user, db, user);
    let result = match tokio::time::timeout(cfg.timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(LookupError::Timeout),
    };
    match result {
        Ok(found) => Ok(found),
        Err(e) => {
            tracing::warn!(user, auth_user, database = db, error = %e, "user lookup failed");
            Err(ClientError::Refused(PgError::fatal(
                "08006",
                "could not look up the user's password (auth.query); the pooler's log says why",
            )))
        }
    }
}

async fn look_up(
    pooler: &Arc<Pooler>,
    snapshot: &Snapshot,
    auth_user: &str,
    db: &str,
    user: &str,
) -> Result<Found, LookupError> {
    let cfg = &snapshot.config.auth.lookup;
    let _slot = pooler
        .secrets
        .slots
        .acquire()
        .await
        .map_err(|_| LookupError::Closed)?;
    // Another login may have looked the same user up while this one waited.
    if let Some(found) = pooler.secrets.get(user, cfg.cache_ttl) {
        return Ok(found);
    }
    let pool = pooler.pool_in(snapshot, db, auth_user)?;
    let mut lease = pool.acquire_own().await?;
    let rows = lease.backend().lookup(&cfg.query, user).await;
    // A failed query leaves the link broken or idle; the hand-off decides.
    lease.finish(Departure::SessionOver { keeps_state: false });
    let found = found_in(&rows?)?;
    if !cfg.cache_ttl.is_zero() {
        pooler.secrets.put(user, found.clone());
    }
    Ok(found)
}

/// The secret in the first row's second column; no row or NULL: none.
fn found_in(rows: &[Row]) -> Result<Found, LookupError> {
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let value = row.get(1).ok_or(LookupError::Columns)?;
    let Some(bytes) = value else {
        return Ok(None);
    };
    let text = std::str::from_utf8(bytes).map_err(|_| LookupError::NotText)?;
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(Secret::parse(text)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cols: &[Option<&str>]) -> Row {
        cols.iter()
            .map(|c| c.map(|s| s.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn the_secret_is_the_second_column_of_the_first_row() {
        let md5 = "md5aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let got = found_in(&[row(&[Some("alice"), Some(md5)]), row(&[Some("x"), None])]);
        assert!(matches!(got, Ok(Some(s)) if matches!(*s, Secret::Md5 { .. })));
        assert!(matches!(found_in(&[]), Ok(None)), "no row: no such user");
        assert!(matches!(found_in(&[row(&[Some("bob"), None])]), Ok(None)));
        assert!(matches!(
            found_in(&[row(&[Some("bob"), Some("")])]),
            Ok(None)
        ));
    }

    #[test]
    fn unusable_answers_are_errors() {
        assert!(matches!(
            found_in(&[row(&[Some("bob")])]),
            Err(LookupError::Columns)
        ));
        let bad = vec![vec![Some(b"bob".to_vec()), Some(vec![0xff, 0xfe])]];
        assert!(matches!(found_in(&bad), Err(LookupError::NotText)));
        let broken = found_in(&[row(&[Some("bob"), Some("SCRAM-SHA-256$x")])]);
        assert!(matches!(broken, Err(LookupError::Secret(_))));
    }
}
