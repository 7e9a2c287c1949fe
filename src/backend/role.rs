//! What a server is — read-only or not, in hot standby or not — and
//! whether that fits a pool's `target_session_attrs`, decided as libpq's
//! CONNECTION_CHECK_TARGET does: from the `default_transaction_read_only`
//! and `in_hot_standby` ParameterStatus that PostgreSQL 14 and later send
//! at login and whenever they change, else by asking (`SHOW
//! transaction_read_only`, `SELECT pg_catalog.pg_is_in_recovery()`).

use bytes::BytesMut;
use postgres_protocol::message::frontend;
use tokio::io::AsyncWriteExt;

use super::login::next;
use super::session::parse_error_fields;
use super::{BackendError, Link, ParamSet};
use crate::config::TargetSessionAttrs;
use crate::protocol::tags::be;

/// One of the two facts, as far as the server has told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// Reported or found on.
    On,
    /// Reported or found off.
    Off,
    /// Not reported (a server before 14) and not asked.
    Unknown,
}

impl Flag {
    fn from_param(value: Option<&str>) -> Flag {
        match value {
            Some("on") => Flag::On,
            Some(_) => Flag::Off,
            None => Flag::Unknown,
        }
    }

    fn or(self, other: Flag) -> Flag {
        match self {
            Flag::Unknown => other,
            known => known,
        }
    }
}

/// What a server is, for `target_session_attrs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerRole {
    /// `default_transaction_read_only`.
    pub read_only: Flag,
    /// `in_hot_standby`.
    pub hot_standby: Flag,
}

impl ServerRole {
    /// Nothing known yet.
    pub const UNKNOWN: ServerRole = ServerRole {
        read_only: Flag::Unknown,
        hot_standby: Flag::Unknown,
    };

    /// What the server's ParameterStatus messages said.
    pub fn from_params(params: &ParamSet) -> ServerRole {
        ServerRole {
            read_only: Flag::from_param(params.get("default_transaction_read_only")),
            hot_standby: Flag::from_param(params.get("in_hot_standby")),
        }
    }

    /// Each fact from `self` where known, else from `earlier`.
    pub fn or(self, earlier: ServerRole) -> ServerRole {
        ServerRole {
            read_only: self.read_only.or(earlier.read_only),
            hot_standby: self.hot_standby.or(earlier.hot_standby),
        }
    }

    /// The label SHOW SERVERS gives it.
    pub fn as_str(self) -> &'static str {
        match (self.hot_standby, self.read_only) {
            (Flag::On, _) => "standby",
            (Flag::Off, Flag::On) => "read-only primary",
            (Flag::Off, Flag::Off) => "primary",
            (Flag::Off, Flag::Unknown) => "primary",
            (Flag::Unknown, _) => "unknown",
        }
    }
}

/// The answer of [`fit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// The server fits.
    Fits,
    /// It does not; libpq's message for why.
    Misfit(&'static str),
    /// The server did not say enough: ask it this and decide again.
    Ask(Probe),
}

/// A query that finds out what the server did not report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// `SHOW transaction_read_only`: on means read-only (either fact).
    ReadOnly,
    /// `SELECT pg_catalog.pg_is_in_recovery()`: t means hot standby.
    Recovery,
}

impl Probe {
    fn sql(self) -> &'static str {
        match self {
            Probe::ReadOnly => "SHOW transaction_read_only",
            Probe::Recovery => "SELECT pg_catalog.pg_is_in_recovery()",
        }
    }
}

/// Whether a server that is `role` fits `attrs`. `PreferStandby` is its
/// first pass (a standby); the second pass asks with `Any`.
pub fn fit(attrs: TargetSessionAttrs, role: ServerRole) -> Fit {
    use TargetSessionAttrs as T;
    match attrs {
        T::Any => Fit::Fits,
        T::ReadWrite | T::ReadOnly => {
            if role.read_only == Flag::Unknown || role.hot_standby == Flag::Unknown {
                return Fit::Ask(Probe::ReadOnly);
            }
            let read_only = role.read_only == Flag::On || role.hot_standby == Flag::On;
            match (attrs, read_only) {
                (T::ReadWrite, true) => Fit::Misfit("session is read-only"),
                (T::ReadOnly, false) => Fit::Misfit("session is not read-only"),
                _ => Fit::Fits,
            }
        }
        T::Primary | T::Standby | T::PreferStandby => match (attrs, role.hot_standby) {
            (_, Flag::Unknown) => Fit::Ask(Probe::Recovery),
            (T::Primary, Flag::On) => Fit::Misfit("server is in hot standby mode"),
            (T::Standby | T::PreferStandby, Flag::Off) => {
                Fit::Misfit("server is not in hot standby mode")
            }
            _ => Fit::Fits,
        },
    }
}

/// Whether a backend that is already open may stay in the pool: as
/// [`fit`], except that prefer-standby takes any server (libpq's second
/// pass may have placed it on a primary) and an unknown fact never retires
/// it (it was checked at login).
pub fn still_fits(attrs: TargetSessionAttrs, role: ServerRole) -> Result<(), &'static str> {
    if attrs == TargetSessionAttrs::PreferStandby {
        return Ok(());
    }
    match fit(attrs, role) {
        Fit::Misfit(why) => Err(why),
        Fit::Fits | Fit::Ask(_) => Ok(()),
    }
}

impl Link {
    /// Decides whether this freshly logged-in backend fits `attrs`,
    /// asking the server what it did not report. Returns the role it found.
    pub(super) async fn check_target(
        &mut self,
        attrs: TargetSessionAttrs,
    ) -> Result<(ServerRole, Fit), BackendError> {
        let mut role = ServerRole::from_params(self.ledger.params());
        loop {
            match fit(attrs, role) {
                Fit::Ask(probe) => {
                    let on = self.ask(probe).await?;
                    let flag = if on { Flag::On } else { Flag::Off };
                    match probe {
                        // "on" proves one of the two is on; libpq then takes both.
                        Probe::ReadOnly => {
                            role = ServerRole {
                                read_only: flag,
                                hot_standby: flag,
                            }
                        }
                        Probe::Recovery => role.hot_standby = flag,
                    }
                }
                decided => return Ok((role, decided)),
            }
        }
    }

    /// Runs `probe` and reads its one boolean: `on` or `t` is true.
    async fn ask(&mut self, probe: Probe) -> Result<bool, BackendError> {
        let mut out = BytesMut::with_capacity(64);
        frontend::query(probe.sql(), &mut out)
            .map_err(|e| BackendError::Protocol(e.to_string()))?;
        self.stream
            .write_all(&out)
            .await
            .map_err(BackendError::Write)?;
        let mut value = None;
        loop {
            let (tag, body) = next(self).await?;
            match tag {
                be::DATA_ROW => value = first_column(&body).map(<[u8]>::to_vec),
                be::ERROR_RESPONSE => {
                    return Err(BackendError::Server(parse_error_fields(&body)));
                }
                be::READY_FOR_QUERY => break,
                _ => {}
            }
        }
        let value = value.ok_or_else(|| {
            BackendError::Protocol(format!("\"{}\" returned no value", probe.sql()))
        })?;
        Ok(value.starts_with(b"on") || value.starts_with(b"t"))
    }
}

/// The first column of a DataRow body (`count: i16`, then `len: i32` and
/// the bytes per column); None for NULL, no column or a malformed row.
fn first_column(body: &[u8]) -> Option<&[u8]> {
    let count = i16::from_be_bytes(body.get(..2)?.try_into().ok()?);
    if count < 1 {
        return None;
    }
    let len = i32::from_be_bytes(body.get(2..6)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    body.get(6..6usize.checked_add(len)?)
}

#[cfg(test)]
mod tests;
