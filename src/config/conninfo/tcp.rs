//! libpq's timing keywords: `connect_timeout`, `keepalives`,
//! `keepalives_idle`, `keepalives_interval`, `keepalives_count` and
//! `tcp_user_timeout`, with libpq's meanings and defaults (fe-connect.c):
//!
//! - every value is an integer as libpq's `parse_int_param` reads one
//!   (surrounding blanks allowed, nothing else), within `int`;
//! - `connect_timeout` is whole seconds per connection attempt; zero or
//!   negative waits forever, and 1 counts as 2 (libpq's minimum, because the
//!   timer's granularity is a second);
//! - `keepalives` is on unless it is 0; the others keep the system default
//!   when zero (a negative value counts as zero), and apply only to TCP:
//!   a Unix-socket backend ignores them, as libpq does;
//! - a value the kernel would refuse (TCP_KEEPIDLE above 32767 s, say), on
//!   which every libpq connect would fail, is refused here instead, so
//!   `pgharbor check` names it.

use std::time::Duration;

use super::{push_pair, ConnInfoError};
use crate::config::tcp::{Keepalive, MAX_KEEPALIVE_COUNT, MAX_KEEPALIVE_SECS, MAX_USER_TIMEOUT_MS};
use crate::config::ConnInfo;

/// The keywords this module interprets.
pub(crate) const KEYWORDS: [&str; 6] = [
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
];

/// libpq's least `connect_timeout` (fe-connect.c: "a timeout of 1 second
/// could be cut short by the clock's granularity").
pub const MIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Applies one of [`KEYWORDS`] to `info`.
pub(super) fn set(info: &mut ConnInfo, key: &str, value: String) -> Result<(), ConnInfoError> {
    let n = int_param(key, &value)?;
    let tcp = &mut info.tcp;
    match key {
        "connect_timeout" => {
            info.connect_timeout = (n > 0)
                .then(|| Duration::from_secs(n.unsigned_abs().into()).max(MIN_CONNECT_TIMEOUT));
        }
        "keepalives" => {
            tcp.keepalive = if n == 0 {
                Keepalive::Off
            } else {
                Keepalive::On
            }
        }
        "keepalives_idle" => tcp.keepalive_idle = seconds(key, &value, n)?,
        "keepalives_interval" => tcp.keepalive_interval = seconds(key, &value, n)?,
        "keepalives_count" => {
            tcp.keepalive_count = match n {
                ..=0 => None,
                n if n.unsigned_abs() <= MAX_KEEPALIVE_COUNT => Some(n.unsigned_abs()),
                _ => {
                    return Err(invalid(
                        key,
                        value,
                        format!(
                        "expected at most {MAX_KEEPALIVE_COUNT} probes (0 = the system default)"
                    ),
                    ))
                }
            }
        }
        // Milliseconds, as in libpq; fits TCP_USER_TIMEOUT whatever the int.
        _ => {
            debug_assert_eq!(key, "tcp_user_timeout");
            let ms = u64::from(n.max(0).unsigned_abs()).min(MAX_USER_TIMEOUT_MS);
            tcp.user_timeout = (ms > 0).then(|| Duration::from_millis(ms));
        }
    }
    Ok(())
}

/// Appends the keywords that differ from libpq's defaults.
pub(super) fn push_pairs(info: &ConnInfo, out: &mut String) {
    if let Some(timeout) = info.connect_timeout {
        push_pair(out, "connect_timeout", &timeout.as_secs().to_string());
    }
    let t = &info.tcp;
    if t.keepalive == Keepalive::Off {
        push_pair(out, "keepalives", "0");
    }
    let secs = [
        ("keepalives_idle", t.keepalive_idle),
        ("keepalives_interval", t.keepalive_interval),
    ];
    for (key, value) in secs {
        if let Some(d) = value {
            push_pair(out, key, &d.as_secs().to_string());
        }
    }
    if let Some(n) = t.keepalive_count {
        push_pair(out, "keepalives_count", &n.to_string());
    }
    if let Some(d) = t.user_timeout {
        push_pair(out, "tcp_user_timeout", &d.as_millis().to_string());
    }
}

/// Whole seconds for TCP_KEEPIDLE / TCP_KEEPINTVL; zero or less = default.
fn seconds(key: &str, value: &str, n: i32) -> Result<Option<Duration>, ConnInfoError> {
    if n <= 0 {
        return Ok(None);
    }
    let secs = u64::from(n.unsigned_abs());
    if secs > MAX_KEEPALIVE_SECS {
        return Err(invalid(
            key,
            value.to_string(),
            format!("expected at most {MAX_KEEPALIVE_SECS} seconds (0 = the system default)"),
        ));
    }
    Ok(Some(Duration::from_secs(secs)))
}

/// An integer as libpq's `parse_int_param` accepts it.
fn int_param(key: &str, value: &str) -> Result<i32, ConnInfoError> {
    match value.trim().parse::<i64>() {
        Ok(n) => i32::try_from(n)
            .map_err(|_| invalid(key, value.to_string(), "integer value out of range".into())),
        Err(_) => Err(invalid(
            key,
            value.to_string(),
            "expected an integer".to_string(),
        )),
    }
}

fn invalid(key: &str, value: String, reason: String) -> ConnInfoError {
    ConnInfoError::InvalidValue {
        key: key.to_string(),
        value,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TcpOptions;

    use crate::config::conninfo::tests::{err, parse};

    #[test]
    fn connect_timeout_as_libpq() {
        let t = |s: &str| parse(s).connect_timeout;
        assert_eq!(t("connect_timeout=10"), Some(Duration::from_secs(10)));
        assert_eq!(t("connect_timeout=1"), Some(MIN_CONNECT_TIMEOUT));
        assert_eq!(t("connect_timeout=' 3 '"), Some(Duration::from_secs(3)));
        assert_eq!(t("connect_timeout=0"), None);
        assert_eq!(t("connect_timeout=-3"), None);
        assert_eq!(t("host=/tmp"), None);
        assert!(err("connect_timeout=5s").starts_with(r#"invalid connect_timeout "5s""#));
        assert!(err("connect_timeout=99999999999").contains("out of range"));
    }

    #[test]
    fn keepalives_default_on_with_system_timings() {
        assert_eq!(parse("host=db").tcp, TcpOptions::default());
        assert_eq!(parse("keepalives=0").tcp.keepalive, Keepalive::Off);
        assert_eq!(parse("keepalives=7").tcp.keepalive, Keepalive::On);
        assert_eq!(parse("keepalives=-1").tcp.keepalive, Keepalive::On);
        assert!(err("keepalives=on").starts_with(r#"invalid keepalives "on""#));
    }

    #[test]
    fn keepalive_timings_and_user_timeout() {
        let o = parse(
            "keepalives_idle=30 keepalives_interval=5 keepalives_count=3 tcp_user_timeout=2500",
        )
        .tcp;
        assert_eq!(o.keepalive_idle, Some(Duration::from_secs(30)));
        assert_eq!(o.keepalive_interval, Some(Duration::from_secs(5)));
        assert_eq!(o.keepalive_count, Some(3));
        assert_eq!(o.user_timeout, Some(Duration::from_millis(2500)));
        // Zero and negative keep the system default.
        let o = parse(
            "keepalives_idle=0 keepalives_interval=-2 keepalives_count=0 tcp_user_timeout=-1",
        )
        .tcp;
        assert_eq!(o, TcpOptions::default());
        // The URI form goes through the same code.
        let o = parse("postgresql://h/db?keepalives_idle=9&tcp_user_timeout=100").tcp;
        assert_eq!(o.keepalive_idle, Some(Duration::from_secs(9)));
        assert_eq!(o.user_timeout, Some(Duration::from_millis(100)));
    }

    #[test]
    fn malformed_values_name_the_key() {
        for key in KEYWORDS {
            for bad in ["x", "1.5", "", "10s"] {
                let e = err(&format!("{key}='{bad}'"));
                assert!(e.starts_with(&format!("invalid {key} \"{bad}\"")), "{e}");
            }
        }
        assert!(err("keepalives_idle=40000").contains("at most 32767"));
        assert!(err("keepalives_interval=32768").contains("at most 32767"));
        assert!(err("keepalives_count=128").contains("at most 127"));
    }

    #[test]
    fn shown_without_defaults() {
        let s =
            parse("host=db keepalives=0 keepalives_idle=4 tcp_user_timeout=700 connect_timeout=1")
                .redacted();
        assert!(s.contains("connect_timeout=2"), "{s}");
        assert!(
            s.contains("keepalives=0 keepalives_idle=4 tcp_user_timeout=700"),
            "{s}"
        );
        assert!(!parse("host=db").redacted().contains("keepalive"));
    }
}
