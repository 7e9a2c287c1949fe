//! `[service]`: how the process runs as a system service. Each key takes a
//! restart; RELOAD keeps the running value.
//!
//! - `user` (string, default unset): the Unix user to become after binding
//!   the listening sockets; see `service::privileges`.

use serde::Deserialize;

use super::ConfigError;

/// `[service]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawService {
    pub user: Option<String>,
}

/// `[service]`, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceConfig {
    /// User to switch to after binding; None keeps the starting user.
    pub user: Option<String>,
}

/// Checks the shape only; whether the user exists is decided at start-up,
/// since validation does no I/O.
pub(super) fn validate(raw: RawService) -> Result<ServiceConfig, ConfigError> {
    let user = match raw.user {
        None => None,
        Some(u) if u.is_empty() => None,
        Some(u) if u.contains(['\0', ':', '/']) || u.trim() != u => {
            return Err(ConfigError::invalid(
                "service.user",
                format!("{u:?} is not a user name"),
            ))
        }
        Some(u) => Some(u),
    };
    Ok(ServiceConfig { user })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names() {
        let v = |u: &str| {
            validate(RawService {
                user: Some(u.into()),
            })
        };
        assert_eq!(v("postgres").unwrap().user.as_deref(), Some("postgres"));
        assert_eq!(v("").unwrap().user, None);
        for bad in ["a:b", " pg", "x/y", "nul\0"] {
            let e = v(bad).unwrap_err();
            assert_eq!(e.key(), Some("service.user"), "{bad:?}");
        }
    }
}
