//! Client certificates at login. The TLS handshake has already refused a
//! certificate that does not verify against `tls.ca_file` (and its CRLs),
//! so a certificate seen here is a valid one; what is left is PostgreSQL's
//! `ClientAuthentication` and `CheckCertAuth` (auth.c):
//!
//! - a `cert` rule or a `clientcert=` option needs a certificate, checked
//!   before the rule's method runs ("connection requires a valid client
//!   certificate", 28000);
//! - `cert` then needs the certificate's CN to be the user, or the rule's
//!   `map=` to allow it ("certificate authentication failed", 28000);
//! - `clientcert=verify-full` on another method checks the CN the same way
//!   once that method has passed, and a mismatch fails as that method does
//!   (28P01 "password authentication failed" after a password method).
//!
//! The front-end policies `verify-ca` and `verify-full` (pgharbor's own,
//! per transport) are checked first, with the same words: verify-ca needs a
//! certificate, verify-full also the CN, mapped through
//! `tls.client_cert_map` when one is set (the hba rules' maps are theirs).

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use super::authenticate::Proof;
use super::ClientError;
use crate::auth::hba::{ClientCert, Hba, IdentMaps, Method, Rule};
use crate::config::SslMode;
use crate::pooler::Snapshot;
use crate::protocol::{server, PgError};
use crate::stream::Stream;
use crate::tls::verify::common_name;

/// SQLSTATE invalid_authorization_specification.
const INVALID_AUTHORIZATION: &str = "28000";

/// `clientcert=verify-full` on a method other than `cert`: the CN check
/// that runs once the method has passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CnCheck {
    /// The rule's `map=`.
    map: Option<String>,
    /// The rule's method, whose failure message a mismatch gets.
    method: Method,
}

/// The front-end policy of the client's transport: `verify-ca` needs a
/// (verified) certificate, `verify-full` also its CN to be `user`.
pub(super) fn check_policy(
    snapshot: &Snapshot,
    policy: SslMode,
    stream: &Stream,
    user: &str,
) -> Result<(), ClientError> {
    let full = match policy {
        SslMode::VerifyCa => false,
        SslMode::VerifyFull => true,
        _ => return Ok(()),
    };
    let Some(cert) = stream.peer_certificate() else {
        tracing::info!(policy = %policy, "refused: the TLS policy requires a client certificate and none was sent");
        return Err(requires_valid());
    };
    if !full {
        return Ok(());
    }
    let map = snapshot.config.tls.client_cert_map.as_deref();
    let maps = snapshot.cert_map.as_deref();
    let allowed = |cn: &str| policy_allows(maps, map, cn, user);
    if !cn_matches(&cert, allowed, "tls policy verify-full", map) {
        return Err(cert_failed(user));
    }
    Ok(())
}

/// Before a rule's method runs: a `cert` rule or `clientcert=` needs a
/// certificate. Returns what is left for after the method, if anything.
pub(super) fn before_method(rule: &Rule, stream: &Stream) -> Result<Option<CnCheck>, ClientError> {
    let Some(level) = rule.client_cert else {
        return Ok(None);
    };
    if stream.peer_certificate().is_none() {
        tracing::info!(
            file = %rule.file.display(),
            line = rule.line,
            "refused: the hba rule requires a client certificate and none was sent"
        );
        return Err(requires_valid());
    }
    Ok(
        (level == ClientCert::VerifyFull && rule.method != Method::Cert).then(|| CnCheck {
            map: rule.map.clone(),
            method: rule.method,
        }),
    )
}

/// The `cert` method: the certificate alone, its CN mapped by `map=`.
pub(super) fn cert_method(
    rules: &Hba,
    rule: &Rule,
    stream: &Stream,
    user: &str,
) -> Result<(), ClientError> {
    let map = rule.map.as_deref();
    let ok = stream.peer_certificate().is_some_and(|cert| {
        cn_matches(
            &cert,
            |cn| rules.usermap_allows(map, cn, user),
            "hba cert",
            map,
        )
    });
    if ok {
        Ok(())
    } else {
        Err(cert_failed(user))
    }
}

impl CnCheck {
    /// Runs the check after the method passed; a mismatch fails as the
    /// method would have (PostgreSQL's `auth_failed`), after the SASL
    /// final message a SCRAM client has earned, as PostgreSQL sends it.
    pub(super) async fn run(
        &self,
        rules: Option<&Hba>,
        stream: &mut Stream,
        user: &str,
        proof: &Proof,
    ) -> Result<(), ClientError> {
        let map = self.map.as_deref();
        let ok = stream.peer_certificate().is_some_and(|cert| {
            let allowed = |cn: &str| rules.is_some_and(|r| r.usermap_allows(map, cn, user));
            cn_matches(&cert, allowed, "hba clientcert=verify-full", map)
        });
        if ok {
            return Ok(());
        }
        if let Proof::Scram(success) = proof {
            let mut out = BytesMut::new();
            server::auth_sasl_final(&mut out, &success.server_final);
            stream.write_all(&out).await?;
        }
        Err(match self.method {
            Method::Md5 | Method::ScramSha256 | Method::Password => ClientError::AuthFailed {
                user: user.to_string(),
                why: "certificate validation (clientcert=verify-full) failed: CN mismatch",
            },
            Method::Trust => refused(format!(
                "\"trust\" authentication failed for user \"{user}\""
            )),
            _ => refused(format!(
                "authentication failed for user \"{user}\": invalid authentication method"
            )),
        })
    }
}

/// Whether the certificate's CN passes `allowed`; a failure is logged once,
/// with the CN (the certificate is public) and never a secret.
fn cn_matches(
    cert: &openssl::x509::X509,
    allowed: impl Fn(&str) -> bool,
    what: &'static str,
    map: Option<&str>,
) -> bool {
    match common_name(cert) {
        Ok(cn) if allowed(&cn) => true,
        Ok(cn) => {
            tracing::info!(check = what, cn = %cn, map = map.unwrap_or(""), "refused: the client certificate's CN does not match the user");
            false
        }
        Err(e) => {
            tracing::info!(check = what, reason = %e, "refused: the client certificate names no usable user");
            false
        }
    }
}

fn refused(message: String) -> ClientError {
    ClientError::Refused(PgError::fatal(INVALID_AUTHORIZATION, message))
}

fn requires_valid() -> ClientError {
    refused("connection requires a valid client certificate".to_string())
}

fn cert_failed(user: &str) -> ClientError {
    refused(format!(
        "certificate authentication failed for user \"{user}\""
    ))
}

/// Whether a verify-full policy lets `cn` log in as `user`: through
/// `tls.client_cert_map` when set (a map the ident file lacks admits no
/// one), else by equality, as PostgreSQL's `check_usermap`.
fn policy_allows(maps: Option<&IdentMaps>, map: Option<&str>, cn: &str, user: &str) -> bool {
    match map {
        Some(map) => maps.is_some_and(|m| m.allows(map, cn, user)),
        None => cn == user,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::auth::hba::MemoryFiles;

    #[test]
    fn the_policy_map_is_the_ident_map_or_equality() {
        let files = MemoryFiles::default().with(
            "/i/pg_ident.conf",
            "certmap /^(.*)@example\\.com$ \\1\ncertmap ops admin\n",
        );
        let maps = IdentMaps::load_from(&files, Path::new("/i/pg_ident.conf")).unwrap();
        let m = Some(&maps);
        assert!(policy_allows(None, None, "alice", "alice"));
        assert!(!policy_allows(None, None, "Alice", "alice"));
        assert!(!policy_allows(m, None, "alice@example.com", "alice"));
        assert!(policy_allows(
            m,
            Some("certmap"),
            "alice@example.com",
            "alice"
        ));
        assert!(policy_allows(m, Some("certmap"), "ops", "admin"));
        // With a map, the CN itself is not enough, as in PostgreSQL.
        assert!(!policy_allows(m, Some("certmap"), "alice", "alice"));
        assert!(!policy_allows(m, Some("nomap"), "ops", "admin"));
        assert!(!policy_allows(None, Some("certmap"), "ops", "admin"));
    }

    #[test]
    fn refusals_carry_postgres_words() {
        let e = requires_valid().to_pg_error().unwrap();
        assert_eq!(
            (e.code, e.message.as_str()),
            ("28000", "connection requires a valid client certificate")
        );
        let e = cert_failed("bob").to_pg_error().unwrap();
        assert_eq!(
            e.message,
            "certificate authentication failed for user \"bob\""
        );
    }
}
