//! The host of a new backend, chosen as libpq walks a host list
//! (fe-connect.c, PQconnectPoll): hosts in order (or shuffled under
//! `load_balance_hosts=random`), each attempt bounded by the connect
//! timeout; a host that cannot be reached, answers 57P03 (starting up,
//! shutting down, not yet in hot standby) or does not fit
//! `target_session_attrs` is left for the next one; any other failure (a
//! refused login, a TLS failure) ends the search, as in libpq.
//! `prefer-standby` takes a second pass that accepts any server.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use rand::seq::SliceRandom;

use super::role::{Fit, ServerRole};
use super::{BackendError, BackendTarget, Credentials, Link};
use crate::auth::SaltedPasswordCache;
use crate::config::{LoadBalance, TargetSessionAttrs};
use crate::tls::BackendTls;

/// SQLSTATE 57P03, cannot_connect_now: libpq tries the next host.
const CANNOT_CONNECT_NOW: &str = "57P03";

/// One host a pool's backends may go to.
#[derive(Debug, Clone)]
pub struct Host {
    /// Where and as whom.
    pub target: Arc<BackendTarget>,
    /// TLS toward it (its own name for verify-full and SNI).
    pub tls: BackendTls,
}

/// The hosts of one pool and what a host must be to take a backend.
#[derive(Debug, Clone)]
pub struct HostRoute {
    hosts: Vec<Host>,
    attrs: TargetSessionAttrs,
    balance: LoadBalance,
    /// The conninfo's `connect_timeout`: with the pool's
    /// `server_connect_timeout` (whichever is shorter) it bounds each
    /// host's attempt: connect, TLS, login and the check.
    connect_timeout: Option<Duration>,
}

/// Why one host was passed over.
enum Skip {
    /// Try the next host.
    Next(BackendError),
    /// End the search with this error.
    Stop(BackendError),
}

impl HostRoute {
    /// A route over `hosts` (at least one), in conninfo order.
    pub fn new(
        hosts: Vec<Host>,
        attrs: TargetSessionAttrs,
        balance: LoadBalance,
        connect_timeout: Option<Duration>,
    ) -> HostRoute {
        HostRoute {
            hosts,
            attrs,
            balance,
            connect_timeout,
        }
    }

    /// The hosts, in conninfo order.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// `target_session_attrs`.
    pub fn attrs(&self) -> TargetSessionAttrs {
        self.attrs
    }

    /// Opens backend `id` on the first host that fits, each attempt within
    /// `server_connect_timeout` (or the conninfo's shorter `connect_timeout`).
    pub async fn connect(
        &self,
        creds: &Credentials,
        params: &[(String, String)],
        cache: &Arc<SaltedPasswordCache>,
        id: u64,
        server_connect_timeout: Duration,
    ) -> Result<Link, BackendError> {
        let per_host = self
            .connect_timeout
            .map_or(server_connect_timeout, |t| t.min(server_connect_timeout));
        let mut order: Vec<usize> = (0..self.hosts.len()).collect();
        if self.balance == LoadBalance::Random {
            order.shuffle(&mut rand::thread_rng());
        }
        let passes: &[TargetSessionAttrs] = match self.attrs {
            TargetSessionAttrs::PreferStandby => {
                &[TargetSessionAttrs::PreferStandby, TargetSessionAttrs::Any]
            }
            _ => std::slice::from_ref(&self.attrs),
        };
        let mut failures = Vec::new();
        for &pass in passes {
            for &i in &order {
                let host = &self.hosts[i];
                let attempt = self.attempt(host, pass, creds, params, cache, id);
                let result = match tokio::time::timeout(per_host, attempt).await {
                    Ok(r) => r,
                    Err(_) => Err(Skip::Next(BackendError::Timeout(host.target.describe()))),
                };
                match result {
                    Ok(link) => return Ok(link),
                    Err(Skip::Stop(e)) => return Err(e),
                    Err(Skip::Next(e)) => {
                        tracing::debug!(server = %host.target.describe(), error = %e, "host passed over");
                        failures.push((host.target.describe(), e));
                    }
                }
            }
        }
        Err(no_host(failures))
    }

    /// One host: connect and log in, then check it against `attrs`.
    async fn attempt(
        &self,
        host: &Host,
        attrs: TargetSessionAttrs,
        creds: &Credentials,
        params: &[(String, String)],
        cache: &Arc<SaltedPasswordCache>,
        id: u64,
    ) -> Result<Link, Skip> {
        let connect = Link::connect(host.target.clone(), &host.tls, creds, params, cache, id);
        let mut link = connect.await.map_err(|e| match &e {
            BackendError::Connect { .. } | BackendError::Timeout(_) => Skip::Next(e),
            BackendError::Server(s) if s.code == CANNOT_CONNECT_NOW => Skip::Next(e),
            _ => Skip::Stop(e),
        })?;
        // A probe that fails moves on too, as in libpq.
        let (role, fit) = link.check_target(attrs).await.map_err(Skip::Next)?;
        match fit {
            Fit::Fits => {
                link.set_login_role(role);
                Ok(link)
            }
            Fit::Misfit(why) => {
                // Politely, as libpq: the server logs a clean disconnection.
                let _ = link.terminate().await;
                Err(Skip::Next(BackendError::Misfit {
                    addr: host.target.describe(),
                    attrs: attrs.as_str(),
                    why,
                    role: role.as_str(),
                }))
            }
            // check_target asks until it can decide; never here.
            Fit::Ask(_) => Err(Skip::Next(BackendError::Protocol(
                "server role still unknown after asking".into(),
            ))),
        }
    }
}

/// The error when no host took the backend: the one failure itself for a
/// single host, else every host's, in the order tried (as libpq lists them).
fn no_host(mut failures: Vec<(String, BackendError)>) -> BackendError {
    if failures.len() == 1 {
        if let Some((_, e)) = failures.pop() {
            return e;
        }
    }
    let mut text = String::new();
    for (addr, e) in &failures {
        if !text.is_empty() {
            text.push_str("; ");
        }
        let _ = write!(text, "{addr}: {e}");
    }
    BackendError::NoHost {
        tried: failures.len(),
        detail: text,
    }
}

impl Link {
    /// Records what the login check found out about the server.
    fn set_login_role(&mut self, role: ServerRole) {
        self.login_role = role;
    }
}
