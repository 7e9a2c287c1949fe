//! What ends a session from outside (shutdown, KILL of its pool,
//! KILL_CLIENT), as one token to watch and the reason it fired.
//!
//! The relay polls what it waits on at every wake; three cancellation
//! futures there cost a waiter-list lock each, twice per transaction.

use tokio_util::sync::CancellationToken;

use crate::pool::Pool;
use crate::registry::ClientEntry;

/// The session's stop signal.
pub(super) struct Stop {
    token: CancellationToken,
    shutdown: CancellationToken,
    pool: CancellationToken,
}

impl Stop {
    /// Watches `shutdown`, `pool`'s KILL and KILL_CLIENT of `entry`.
    pub(super) fn new(shutdown: CancellationToken, pool: &Pool, entry: &ClientEntry) -> Stop {
        let pool = pool.kill_token();
        Stop {
            token: entry.attach(&pool),
            shutdown,
            pool,
        }
    }

    /// Resolves once the session must end, with why.
    pub(super) async fn stopped(&self) -> &'static str {
        self.token.cancelled().await;
        self.why()
    }

    /// Whether the session must end.
    pub(super) fn is_stopped(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Why the session must end (meaningful once [`Stop::is_stopped`]).
    fn why(&self) -> &'static str {
        if self.shutdown.is_cancelled() {
            "shutdown"
        } else if self.pool.is_cancelled() {
            "killed"
        } else {
            "KILL_CLIENT"
        }
    }
}
