//! The `[pgbouncer]` section, key by key: where each setting goes in
//! pgharbor.toml and how its value converts, or why it has no equivalent.
//! The README's mapping table is this table in prose.

use super::out::Value;

/// How a PgBouncer value becomes a pgharbor value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conv {
    /// Seconds (fractions allowed) to a duration; 0 stays "0s".
    Seconds,
    /// Seconds where PgBouncer's 0 disables the limit and pgharbor needs one.
    SecondsPositive,
    /// `server_lifetime`: PgBouncer's 0 means "use each connection once".
    Lifetime,
    /// Whole seconds, as TCP keepalive takes them.
    WholeSeconds,
    /// Milliseconds to a duration.
    Millis,
    /// An integer.
    Int,
    /// 0/1, yes/no, on/off, true/false.
    Bool,
    /// A whole number that switches something on unless it is 0
    /// (`tcp_defer_accept`, seconds in older PgBouncers, a flag in newer).
    Nonzero,
    /// Text as it is.
    Str,
    /// Text, where empty leaves the key unset, as in PgBouncer (file
    /// names, the user to run as).
    Unset,
    /// A comma-separated list.
    List,
    /// `listen_addr`: `*`, a list, or empty for no TCP.
    Addresses,
    /// `pool_mode`.
    PoolMode,
    /// `auth_type`.
    AuthType,
    /// `client_tls_sslmode`.
    ClientSslMode,
    /// `client_tls_protocols` to the lowest version allowed.
    TlsProtocols,
}

/// What becomes of one `[pgbouncer]` key.
#[derive(Debug, Clone, Copy)]
pub enum Rule {
    /// Same meaning in pgharbor: `table.key`, converted. `absent` is
    /// PgBouncer's default where it differs from pgharbor's, written out
    /// when the file leaves the key unset so behaviour stays the same.
    To {
        /// pgharbor table.
        table: &'static str,
        /// pgharbor key.
        key: &'static str,
        /// Conversion.
        conv: Conv,
        /// PgBouncer's default, when pgharbor's differs.
        absent: Option<&'static str>,
    },
    /// Goes into every database's conninfo (see `entries::BACKEND_KEYS`).
    Backend,
    /// No equivalent. `same` lists values under which PgBouncer behaves as
    /// pgharbor does anyway; other values are reported with `reason`.
    None {
        /// Values that need no equivalent.
        same: &'static [&'static str],
        /// Why there is no equivalent.
        reason: &'static str,
    },
}

const fn to(table: &'static str, key: &'static str, conv: Conv) -> Rule {
    Rule::To {
        table,
        key,
        conv,
        absent: None,
    }
}

const fn none(same: &'static [&'static str], reason: &'static str) -> Rule {
    Rule::None { same, reason }
}

/// In a `Rule::None`'s `same` list: every value needs no equivalent.
pub const ANY: &str = "*";

/// Every `[pgbouncer]` key of PgBouncer's reference configuration.
#[rustfmt::skip]
pub const SETTINGS: &[(&str, Rule)] = &[
    // Where to wait for clients.
    ("listen_addr", Rule::To { table: "listen", key: "addresses", conv: Conv::Addresses, absent: Some("") }),
    ("listen_port", to("listen", "port", Conv::Int)),
    ("unix_socket_dir", to("listen", "unix_socket_dir", Conv::Str)),
    ("unix_socket_mode", to("listen", "unix_socket_mode", Conv::Str)),
    ("unix_socket_group", none(&[""], "the socket file keeps pgharbor's group: use unix_socket_mode and a directory of the right group")),
    ("client_login_timeout", Rule::To { table: "listen", key: "client_login_timeout", conv: Conv::SecondsPositive, absent: Some("60") }),
    ("tcp_keepalive", to("listen", "tcp_keepalive", Conv::Bool)),
    ("tcp_keepidle", to("listen", "tcp_keepidle", Conv::WholeSeconds)),
    ("tcp_keepintvl", to("listen", "tcp_keepintvl", Conv::WholeSeconds)),
    ("tcp_keepcnt", to("listen", "tcp_keepcnt", Conv::Int)),
    ("tcp_user_timeout", to("listen", "tcp_user_timeout", Conv::Millis)),
    // TLS toward clients.
    ("client_tls_sslmode", Rule::To { table: "tls", key: "sslmode", conv: Conv::ClientSslMode, absent: Some("disable") }),
    ("client_tls_cert_file", to("tls", "cert_file", Conv::Unset)),
    ("client_tls_key_file", to("tls", "key_file", Conv::Unset)),
    ("client_tls_protocols", to("tls", "min_protocol_version", Conv::TlsProtocols)),
    ("client_tls_ca_file", to("tls", "ca_file", Conv::Unset)),
    ("client_tls_ciphers", none(&["default"], "pgharbor offers the TLS library's default ciphers")),
    ("client_tls13_ciphers", to("tls", "tls13_ciphers", Conv::Unset)),
    ("client_tls_dheparams", none(&["auto"], "pgharbor uses the TLS library's default key exchange (ECDHE)")),
    ("client_tls_ecdhcurve", none(&["auto"], "pgharbor uses the TLS library's default curves")),
    // TLS toward PostgreSQL: libpq keywords of each database's conninfo.
    ("server_tls_sslmode", Rule::Backend),
    ("server_tls_ca_file", Rule::Backend),
    ("server_tls_cert_file", Rule::Backend),
    ("server_tls_key_file", Rule::Backend),
    ("server_tls_protocols", Rule::Backend),
    ("server_tls_ciphers", none(&["default"], "pgharbor offers the TLS library's default ciphers")),
    ("server_tls13_ciphers", none(&[""], "pgharbor offers the TLS library's default TLS 1.3 ciphers")),
    // Authentication.
    ("auth_type", Rule::To { table: "auth", key: "method", conv: Conv::AuthType, absent: Some("md5") }),
    ("auth_file", to("auth", "auth_file", Conv::Unset)),
    ("admin_users", to("admin", "users", Conv::List)),
    ("auth_hba_file", Rule::To { table: "auth", key: "hba_file", conv: Conv::Unset, absent: None }),
    ("auth_ident_file", Rule::To { table: "auth", key: "ident_file", conv: Conv::Unset, absent: None }),
    ("auth_ldap_options", none(&[""], "LDAP authentication is not supported")),
    ("auth_pam_confdir", none(&[""], "PAM authentication is not supported")),
    ("auth_user", Rule::To { table: "auth", key: "user", conv: Conv::Unset, absent: None }),
    ("auth_query", Rule::To { table: "auth", key: "query", conv: Conv::Str, absent: None }),
    ("auth_dbname", Rule::To { table: "auth", key: "dbname", conv: Conv::Unset, absent: None }),
    ("stats_users", to("admin", "stats_users", Conv::List)),
    ("scram_iterations", none(&["4096"], "not configurable: verifiers keep the iteration count they were made with")),
    // Pooling.
    ("pool_mode", to("pool", "mode", Conv::PoolMode)),
    ("default_pool_size", to("pool", "default_pool_size", Conv::Int)),
    ("min_pool_size", to("pool", "min_pool_size", Conv::Int)),
    ("reserve_pool_size", to("pool", "reserve_pool_size", Conv::Int)),
    ("reserve_pool_timeout", to("pool", "reserve_pool_timeout", Conv::Seconds)),
    ("max_db_connections", to("pool", "max_db_connections", Conv::Int)),
    ("max_user_connections", to("pool", "max_user_connections", Conv::Int)),
    ("max_client_conn", Rule::To { table: "pool", key: "max_client_conn", conv: Conv::Int, absent: Some("100") }),
    ("max_prepared_statements", to("pool", "max_prepared_statements", Conv::Int)),
    ("server_reset_query", to("pool", "server_reset_query", Conv::Str)),
    ("server_check_query", to("pool", "server_check_query", Conv::Str)),
    ("server_check_delay", to("pool", "server_check_delay", Conv::Seconds)),
    ("server_idle_timeout", to("pool", "server_idle_timeout", Conv::Seconds)),
    ("server_lifetime", to("pool", "server_lifetime", Conv::Lifetime)),
    ("server_connect_timeout", to("pool", "server_connect_timeout", Conv::SecondsPositive)),
    ("query_wait_timeout", to("pool", "query_wait_timeout", Conv::SecondsPositive)),
    ("idle_transaction_timeout", to("pool", "idle_transaction_timeout", Conv::Seconds)),
    ("track_extra_parameters", to("pool", "track_parameters", Conv::List)),
    ("server_reset_query_always", none(&["0"], "server_reset_query runs when a session ends, not after each transaction")),
    ("ignore_startup_parameters", none(&[""], "startup parameters are never refused: each is passed on or tracked")),
    ("server_round_robin", none(&["0"], "idle backends are reused most recently used first")),
    ("server_fast_close", none(&["0"], "a session keeps its backend until it ends")),
    ("server_login_retry", none(&["15"], "failed backend logins are retried after 1s, doubling to 30s")),
    ("application_name_add_host", none(&["0"], "application_name is passed on unchanged")),
    ("max_db_client_connections", none(&["0"], "only max_client_conn limits clients")),
    ("max_user_client_connections", none(&["0"], "only max_client_conn limits clients")),
    ("query_timeout", none(&["0"], "use PostgreSQL's statement_timeout")),
    ("cancel_wait_timeout", none(&["10"], "cancel requests are forwarded at once, bounded by server_connect_timeout")),
    ("client_idle_timeout", none(&["0"], "idle clients are never disconnected")),
    ("transaction_timeout", none(&["0"], "use PostgreSQL's transaction_timeout or idle_in_transaction_session_timeout")),
    ("pool_idle_timeout", none(&["0"], "pools without clients or backends are kept")),
    ("autodb_idle_timeout", none(&["3600"], "databases made from the \"*\" fallback are kept")),
    ("query_wait_notify", none(&["0"], "queued clients get no notice")),
    ("login_notify_message", none(&[""], "no login message is sent")),
    ("peer_id", to("listen", "instance_id", Conv::Int)),
    // Logging and process: pgharbor takes these on its command line.
    ("logfile", none(&[""], "a command-line flag in pgharbor: start it with --logfile PATH")),
    ("pidfile", none(&[""], "a command-line flag in pgharbor: start it with --pidfile PATH")),
    ("user", to("service", "user", Conv::Unset)),
    ("syslog", none(&["0"], "pgharbor logs to stderr (systemd's journal picks it up)")),
    ("syslog_facility", none(&["daemon"], "pgharbor does not log to syslog")),
    ("syslog_ident", none(&["pgbouncer"], "pgharbor does not log to syslog")),
    ("log_connections", none(&["1"], "connections are logged at info: use --log-level warn to leave them out")),
    ("log_disconnections", none(&["1"], "disconnections are logged at info: use --log-level warn to leave them out")),
    ("log_pooler_errors", none(&["1"], "errors sent to clients are logged")),
    ("log_stats", none(&["1"], "statistics are read with SHOW STATS or from the metrics endpoint")),
    ("stats_period", none(&["60"], "statistics are live, not averaged over a period")),
    ("verbose", none(&["0"], "use --log-level")),
    // Low-level tuning.
    ("pkt_buf", none(&["4096"], "buffers grow as messages need")),
    ("sbuf_loopcnt", none(&["5"], "not configurable")),
    ("max_packet_size", none(&["2147483647"], "not configurable")),
    ("listen_backlog", none(&["128"], "the listen backlog is the system's (somaxconn)")),
    ("so_reuseport", to("listen", "reuseport", Conv::Bool)),
    ("tcp_defer_accept", to("listen", "tcp_defer_accept", Conv::Nonzero)),
    ("tcp_socket_buffer", none(&["0"], "socket buffers are the system's")),
    ("dns_max_ttl", none(&["15"], "host names are resolved at each connect")),
    ("dns_nxdomain_ttl", none(&["15"], "host names are resolved at each connect")),
    ("dns_zone_check_period", none(&["0"], "host names are resolved at each connect")),
    ("resolv_conf", none(&[""], "the system resolver is used")),
    ("disable_pqexec", none(&["0"], "not supported")),
    ("conffile", none(&[""], "RELOAD rereads the file pgharbor was started with")),
    ("service_name", none(&["pgbouncer"], "Windows only")),
    ("job_name", none(&["pgbouncer"], "Windows only")),
];

/// The rule for `key`, if PgBouncer's reference configuration has it.
pub fn rule(key: &str) -> Option<Rule> {
    SETTINGS
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, r)| *r)
}

/// Converts a value; `Err` says why it cannot be kept (pgharbor's
/// default applies instead).
pub fn convert(conv: Conv, value: &str) -> Result<Value, String> {
    let v = value.trim();
    match conv {
        Conv::Seconds => seconds(v).map(Value::Str),
        Conv::SecondsPositive => match seconds(v)? {
            s if s == "0s" => {
                Err("0 turns the limit off in PgBouncer; pgharbor always has one".into())
            }
            s => Ok(Value::Str(s)),
        },
        Conv::Lifetime => match seconds(v)? {
            s if s == "0s" => Err(
                "0 means \"use each connection once\" in PgBouncer; pgharbor has no such mode"
                    .into(),
            ),
            s => Ok(Value::Str(s)),
        },
        Conv::WholeSeconds => int(v).map(|n| Value::Str(format!("{n}s"))),
        Conv::Millis => int(v).map(|n| Value::Str(format!("{n}ms"))),
        Conv::Int => int(v).map(Value::Int),
        Conv::Bool => boolean(v).map(Value::Bool),
        Conv::Nonzero => match v.trim().parse::<u64>() {
            Ok(n) => Ok(Value::Bool(n != 0)),
            Err(_) => boolean(v).map(Value::Bool),
        },
        Conv::Str | Conv::Unset => Ok(Value::Str(v.to_string())),
        Conv::List => Ok(Value::List(list(v))),
        Conv::Addresses => Ok(Value::List(list(v))),
        Conv::PoolMode => match v.to_ascii_lowercase().as_str() {
            m @ ("session" | "transaction" | "statement") => Ok(Value::Str(m.into())),
            _ => Err(format!("unknown pool mode \"{v}\"")),
        },
        Conv::AuthType => auth_type(v),
        Conv::ClientSslMode => match v.to_ascii_lowercase().as_str() {
            m @ ("disable" | "allow" | "prefer" | "require" | "verify-ca") => {
                Ok(Value::Str(m.into()))
            }
            // PgBouncer's verify-full toward clients checks the certificate
            // only, as verify-ca does; pgharbor's also wants CN = user.
            "verify-full" => Ok(Value::Str("verify-ca".into())),
            _ => Err(format!("unknown sslmode \"{v}\"")),
        },
        Conv::TlsProtocols => lowest_protocol(v).map(Value::Str),
    }
}

/// PgBouncer's seconds (it accepts fractions) as a pgharbor duration.
pub fn seconds(v: &str) -> Result<String, String> {
    let secs: f64 = v
        .parse()
        .map_err(|_| format!("\"{v}\" is not a number of seconds"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("\"{v}\" is not a number of seconds"));
    }
    if secs.fract() == 0.0 {
        Ok(format!("{}s", secs as u64))
    } else {
        Ok(format!("{}ms", (secs * 1000.0).round() as u64))
    }
}

fn int(v: &str) -> Result<i64, String> {
    v.parse().map_err(|_| format!("\"{v}\" is not an integer"))
}

fn boolean(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" => Ok(true),
        "0" | "no" | "off" | "false" => Ok(false),
        _ => Err(format!("\"{v}\" is not a boolean")),
    }
}

/// A comma-separated list; PgBouncer allows spaces around the commas.
pub fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn auth_type(v: &str) -> Result<Value, String> {
    let method = match v.to_ascii_lowercase().as_str() {
        m @ ("trust" | "md5" | "scram-sha-256") => m.to_string(),
        "plain" => {
            return Err(
                "clients are never asked for a cleartext password; use scram-sha-256 (plain-text secrets in the auth file work with it)"
                    .into(),
            )
        }
        "any" => return Err("\"any\" ignores the user name; the nearest is trust".into()),
        other => return Err(format!("{other} authentication is not supported")),
    };
    Ok(Value::Str(method))
}

/// The lowest version a `client_tls_protocols` value allows, as pgharbor
/// spells it. PgBouncer's `secure` is TLS 1.2 and 1.3; `all`/`legacy`
/// include TLS 1.0.
pub fn lowest_protocol(v: &str) -> Result<String, String> {
    let mut lowest: Option<u8> = None;
    for word in v.split(|c: char| c == ',' || c.is_whitespace()) {
        let word = word.trim().trim_start_matches('+').to_ascii_lowercase();
        let minor = match word.as_str() {
            "" => continue,
            "all" | "legacy" | "tlsv1" | "tlsv1.0" => 0,
            "tlsv1.1" => 1,
            "secure" | "default" | "normal" | "tlsv1.2" => 2,
            "tlsv1.3" => 3,
            _ => return Err(format!("unknown TLS protocol \"{word}\"")),
        };
        lowest = Some(lowest.map_or(minor, |l| l.min(minor)));
    }
    match lowest {
        Some(0) => Ok("TLSv1".into()),
        Some(n) => Ok(format!("TLSv1.{n}")),
        None => Err("no TLS protocol named".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(seconds("30").as_deref(), Ok("30s"));
        assert_eq!(seconds("0.5").as_deref(), Ok("500ms"));
        assert_eq!(seconds("0").as_deref(), Ok("0s"));
        for bad in ["-1", "ten", "", "inf", "NaN"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(convert(Conv::Millis, "250"), Ok(Value::Str("250ms".into())));
        assert_eq!(
            convert(Conv::WholeSeconds, "60"),
            Ok(Value::Str("60s".into()))
        );
        assert_eq!(convert(Conv::Bool, "on"), Ok(Value::Bool(true)));
        assert!(convert(Conv::Bool, "maybe").is_err());
        assert_eq!(convert(Conv::Nonzero, "45"), Ok(Value::Bool(true)));
        assert_eq!(convert(Conv::Nonzero, "0"), Ok(Value::Bool(false)));
        assert_eq!(convert(Conv::Nonzero, "on"), Ok(Value::Bool(true)));
        assert!(convert(Conv::Nonzero, "-1").is_err());
        assert!(convert(Conv::SecondsPositive, "0").is_err());
        assert!(convert(Conv::Lifetime, "0").is_err());
        assert_eq!(
            convert(Conv::Addresses, "127.0.0.1, ::1"),
            Ok(Value::List(vec!["127.0.0.1".into(), "::1".into()]))
        );
        assert_eq!(convert(Conv::Addresses, ""), Ok(Value::List(vec![])));
        assert_eq!(
            convert(Conv::PoolMode, "Transaction"),
            Ok(Value::Str("transaction".into()))
        );
        assert!(convert(Conv::AuthType, "hba").is_err());
        assert_eq!(
            convert(Conv::ClientSslMode, "verify-full"),
            Ok(Value::Str("verify-ca".into()))
        );
        assert!(convert(Conv::ClientSslMode, "verify-none").is_err());
        assert_eq!(lowest_protocol("secure").as_deref(), Ok("TLSv1.2"));
        assert_eq!(lowest_protocol("tlsv1.3").as_deref(), Ok("TLSv1.3"));
        assert_eq!(lowest_protocol("tlsv1.1,tlsv1.2").as_deref(), Ok("TLSv1.1"));
        assert_eq!(lowest_protocol("all").as_deref(), Ok("TLSv1"));
        assert!(lowest_protocol("sslv3").is_err());
    }

    #[test]
    fn every_key_is_listed_once_and_defaults_convert() {
        for (i, (key, rule)) in SETTINGS.iter().enumerate() {
            assert!(
                SETTINGS[i + 1..].iter().all(|(k, _)| k != key),
                "{key} twice"
            );
            if let Rule::To {
                conv,
                absent: Some(default),
                ..
            } = rule
            {
                // A default written for an absent key must itself convert.
                assert!(
                    convert(*conv, default).is_ok() || *conv == Conv::SecondsPositive,
                    "{key}"
                );
            }
        }
    }
}
