//! libpq keywords pgharbor does not implement. Each is refused at `pgharbor
//! check` and start-up, never accepted and ignored: a DBA who copies
//! `gssencmode=require` or `service=prod` into a conninfo expects what libpq
//! promises, and silently getting something else is worse than an error.
//!
//! A few values are accepted because they already are what pgharbor does
//! (`gssencmode=disable|prefer` mean "no GSSAPI" exactly as in a libpq built
//! without GSSAPI; protocol version 3.0).

use super::ConnInfoError;

/// Keywords refused whatever their value, with the reason shown.
const REFUSED: &[(&str, &str)] = &[
    ("service", "pgharbor reads no pg_service.conf: write the service's keywords into the conninfo"),
    ("passfile", "pgharbor reads no password file: give password= in the conninfo or the user's secret in auth.auth_file"),
    ("requirepeer", "checking the server process's OS user on a Unix socket is not implemented"),
    ("require_auth", "restricting the server's authentication methods (libpq 16) is not implemented"),
    ("krbsrvname", "pgharbor has no GSSAPI (Kerberos) authentication"),
    ("gsslib", "pgharbor has no GSSAPI or SSPI authentication"),
    ("gssdelegation", "pgharbor has no GSSAPI authentication, so no credentials to delegate"),
    ("replication", "a replication connection cannot be pooled"),
    ("sslkeylogfile", "pgharbor does not write TLS session secrets to a file"),
    ("scram_client_key", "SCRAM keys in the conninfo (libpq 18) are not implemented: give password="),
    ("scram_server_key", "SCRAM keys in the conninfo (libpq 18) are not implemented: give password="),
    ("oauth_issuer", "pgharbor has no OAuth authentication"),
    ("oauth_client_id", "pgharbor has no OAuth authentication"),
    ("oauth_client_secret", "pgharbor has no OAuth authentication"),
    ("oauth_scope", "pgharbor has no OAuth authentication"),
];

/// Keywords accepted with some values only.
const BY_VALUE: &[&str] = &["gssencmode", "min_protocol_version", "max_protocol_version"];

/// Whether this module decides about `key`.
pub(super) fn covers(key: &str) -> bool {
    BY_VALUE.contains(&key) || REFUSED.iter().any(|(k, _)| *k == key)
}

/// Ok when `value` already is what pgharbor does; the refusal otherwise.
pub(super) fn check(key: &str, value: &str) -> Result<(), ConnInfoError> {
    if let Some((_, reason)) = REFUSED.iter().find(|(k, _)| *k == key) {
        return Err(unsupported(key, reason));
    }
    let accepted = match key {
        // libpq built without GSSAPI: disable and prefer both mean plain
        // (or TLS) without GSS encryption, require is an error.
        "gssencmode" => match value {
            "disable" | "prefer" => true,
            "require" => return Err(unsupported(key, "gssencmode=require needs GSSAPI encryption, which pgharbor does not have (a libpq built without GSSAPI refuses it too)")),
            _ => return Err(invalid(key, value, "expected disable, prefer or require")),
        },
        // pgharbor speaks protocol 3.0 to servers.
        "min_protocol_version" | "max_protocol_version" => match value {
            "3.0" => true,
            "3.2" | "latest" => {
                return Err(unsupported(key, "pgharbor speaks protocol version 3.0 to servers; only 3.0 can be given"))
            }
            _ => return Err(invalid(key, value, "expected 3.0, 3.2 or latest")),
        },
        _ => false,
    };
    if accepted {
        Ok(())
    } else {
        Err(ConnInfoError::UnknownKeyword(key.into()))
    }
}

fn unsupported(key: &str, reason: &str) -> ConnInfoError {
    ConnInfoError::Unsupported {
        key: key.into(),
        reason: reason.into(),
    }
}

fn invalid(key: &str, value: &str, reason: &str) -> ConnInfoError {
    ConnInfoError::InvalidValue {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}
