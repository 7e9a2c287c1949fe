//! TCP socket options: the one type both sides share (backends get theirs
//! from libpq's conninfo keywords, see `conninfo/tcp.rs`; TCP clients from
//! `[listen]`'s PgBouncer-style keys, parsed here). No I/O: the `sockopt` module
//! applies them to sockets.

use std::time::Duration;

use super::keys::{self, Section};
use super::raw::RawListen;
use super::ConfigError;

/// Linux refuses TCP_KEEPIDLE and TCP_KEEPINTVL above this many seconds
/// (`MAX_TCP_KEEPIDLE`, `MAX_TCP_KEEPINTVL`).
pub const MAX_KEEPALIVE_SECS: u64 = 32_767;
/// Linux refuses TCP_KEEPCNT above this (`MAX_TCP_KEEPCNT`).
pub const MAX_KEEPALIVE_COUNT: u32 = 127;
/// TCP_USER_TIMEOUT is an unsigned int of milliseconds.
pub const MAX_USER_TIMEOUT_MS: u64 = u32::MAX as u64;

/// Whether SO_KEEPALIVE is set on a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keepalive {
    /// Probes are sent on an idle connection (libpq's and PgBouncer's default).
    On,
    /// No probes.
    Off,
}

/// Keepalive and user-timeout options for one TCP socket. `None` keeps the
/// system default (as libpq's and PgBouncer's 0 does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpOptions {
    /// SO_KEEPALIVE.
    pub keepalive: Keepalive,
    /// TCP_KEEPIDLE: idle time before the first probe (whole seconds).
    pub keepalive_idle: Option<Duration>,
    /// TCP_KEEPINTVL: time between probes (whole seconds).
    pub keepalive_interval: Option<Duration>,
    /// TCP_KEEPCNT: unanswered probes before the connection is dropped.
    pub keepalive_count: Option<u32>,
    /// TCP_USER_TIMEOUT: how long sent data may stay unacknowledged (ms).
    pub user_timeout: Option<Duration>,
}

impl TcpOptions {
    /// Whether any keepalive timing or the user timeout is set, not only
    /// SO_KEEPALIVE on or off.
    pub fn tuned(&self) -> bool {
        self.keepalive_idle.is_some()
            || self.keepalive_interval.is_some()
            || self.keepalive_count.is_some()
            || self.user_timeout.is_some()
    }
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            keepalive: Keepalive::On,
            keepalive_idle: None,
            keepalive_interval: None,
            keepalive_count: None,
            user_timeout: None,
        }
    }
}

/// The `[listen]` keys for TCP clients: `tcp_keepalive`, `tcp_keepidle`,
/// `tcp_keepintvl`, `tcp_keepcnt`, `tcp_user_timeout` (PgBouncer's names;
/// durations as strings, `"0s"` or unset = system default).
pub(super) fn listen_options(raw: &RawListen) -> Result<TcpOptions, ConfigError> {
    let k = |name: &str| keys::key(Section::Listen, name);
    let keepalive = match k("tcp_keepalive")?.flag(raw.tcp_keepalive)? {
        true => Keepalive::On,
        false => Keepalive::Off,
    };
    let keepalive_idle = k("tcp_keepidle")?.seconds(raw.tcp_keepidle.clone())?;
    let keepalive_interval = k("tcp_keepintvl")?.seconds(raw.tcp_keepintvl.clone())?;
    let count = k("tcp_keepcnt")?.count(raw.tcp_keepcnt)?;
    // The row's range already keeps it within MAX_KEEPALIVE_COUNT.
    let keepalive_count = u32::try_from(count).ok().filter(|n| *n > 0);
    let key = k("tcp_user_timeout")?;
    let user_timeout = key.duration(raw.tcp_user_timeout.clone())?;
    if user_timeout.as_millis() > u128::from(MAX_USER_TIMEOUT_MS) {
        return Err(ConfigError::invalid(key.dotted(), "too large"));
    }
    Ok(TcpOptions {
        keepalive,
        keepalive_idle,
        keepalive_interval,
        keepalive_count,
        user_timeout: (!user_timeout.is_zero()).then_some(user_timeout),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen(f: impl FnOnce(&mut RawListen)) -> Result<TcpOptions, ConfigError> {
        let mut raw = RawListen::default();
        f(&mut raw);
        listen_options(&raw)
    }

    /// One change to a `[listen]` table.
    type Edit = Box<dyn FnOnce(&mut RawListen)>;

    fn err_key(f: impl FnOnce(&mut RawListen)) -> String {
        let e = listen(f).expect_err("should be refused");
        format!("{e}")
    }

    #[test]
    fn defaults_to_keepalive_with_system_timings() {
        assert_eq!(listen(|_| {}).ok(), Some(TcpOptions::default()));
        let off = listen(|r| r.tcp_keepalive = Some(false)).ok();
        assert_eq!(off.map(|o| o.keepalive), Some(Keepalive::Off));
    }

    #[test]
    fn reads_every_key() {
        let o = listen(|r| {
            r.tcp_keepidle = Some("30s".into());
            r.tcp_keepintvl = Some("5s".into());
            r.tcp_keepcnt = Some(4);
            r.tcp_user_timeout = Some("2500ms".into());
        })
        .ok();
        assert_eq!(
            o,
            Some(TcpOptions {
                keepalive: Keepalive::On,
                keepalive_idle: Some(Duration::from_secs(30)),
                keepalive_interval: Some(Duration::from_secs(5)),
                keepalive_count: Some(4),
                user_timeout: Some(Duration::from_millis(2500)),
            })
        );
        let zero = listen(|r| {
            r.tcp_keepidle = Some("0s".into());
            r.tcp_keepcnt = Some(0);
            r.tcp_user_timeout = Some("0s".into());
        })
        .ok();
        assert_eq!(zero, Some(TcpOptions::default()));
    }

    #[test]
    fn refuses_what_the_kernel_would_refuse_naming_the_key() {
        let cases: [(&str, Edit); 6] = [
            (
                "listen.tcp_keepidle",
                Box::new(|r| r.tcp_keepidle = Some("1500ms".into())),
            ),
            (
                "listen.tcp_keepidle",
                Box::new(|r| r.tcp_keepidle = Some("40000s".into())),
            ),
            (
                "listen.tcp_keepidle",
                Box::new(|r| r.tcp_keepidle = Some("soon".into())),
            ),
            (
                "listen.tcp_keepintvl",
                Box::new(|r| r.tcp_keepintvl = Some("10h".into())),
            ),
            ("listen.tcp_keepcnt", Box::new(|r| r.tcp_keepcnt = Some(-1))),
            (
                "listen.tcp_user_timeout",
                Box::new(|r| r.tcp_user_timeout = Some("x".into())),
            ),
        ];
        for (key, f) in cases {
            let e = err_key(f);
            assert!(e.starts_with(&format!("{key}: ")), "{e}");
        }
        assert!(err_key(|r| r.tcp_keepcnt = Some(128)).contains("0 to 127"));
    }

    /// Through the whole file: the key, and for a conninfo the database.
    #[test]
    fn config_errors_name_key_and_database() {
        let parse = |text: &str| {
            let text = format!("[auth]\nmethod = \"trust\"\n{text}");
            match crate::config::Config::parse(&text, std::path::Path::new("/x/pgharbor.toml")) {
                Ok(_) => panic!("accepted: {text}"),
                Err(e) => e.to_string(),
            }
        };
        for key in crate::config::conninfo::TCP_KEYWORDS {
            let e = parse(&format!(
                "[databases.sales]\nconninfo = \"host=db {key}=soon\"\n"
            ));
            assert_eq!(
                e,
                format!("databases.sales.conninfo: invalid {key} \"soon\": expected an integer")
            );
        }
        let e = parse("[listen]\ntcp_keepalive = \"yes\"\n");
        assert!(e.starts_with("listen.tcp_keepalive: "), "{e}");
        let e = parse("[listen]\ntcp_keepidle = 30\n");
        assert!(e.starts_with("listen.tcp_keepidle: "), "{e}");
        let e = parse("[pool]\nserver_command_timeout = \"soon\"\n");
        assert!(
            e.starts_with("pool.server_command_timeout: invalid duration"),
            "{e}"
        );
        let e = parse("[pool]\nserver_command_timeout = \"0s\"\n");
        assert_eq!(e, "pool.server_command_timeout: must be greater than zero");
    }
}
