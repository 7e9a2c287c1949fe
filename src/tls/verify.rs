//! Client certificates toward pgharbor, set up as PostgreSQL's
//! `be_tls_init` does: with `tls.ca_file` set, every TLS client is asked for
//! a certificate (`SSL_VERIFY_PEER | SSL_VERIFY_CLIENT_ONCE`, without
//! `FAIL_IF_NO_PEER_CERT`: one that sends none gets in, and the policy or
//! the hba rules decide later), the CA names are sent in the request, and
//! a certificate that is presented but does not verify (another CA,
//! expired, revoked) fails the handshake. Without `ca_file` none is asked
//! for. Also the load-time rules that need `ca_file`, and the CN read from
//! a verified certificate.

use std::path::Path;

use openssl::error::ErrorStack;
use openssl::nid::Nid;
use openssl::ssl::SslContextBuilder;
use openssl::x509::{X509Name, X509Ref, X509StoreContextRef, X509};

use super::TlsError;
use crate::auth::hba::{Hba, HbaError, IdentMaps};
use crate::config::TlsConfig;

/// PostgreSQL's words (hba.c, auth.c) for a client-certificate rule with no
/// root certificate store to check against.
pub const NO_ROOT_STORE: &str =
    "client certificates can only be checked if a root certificate store is available";

/// Asks for and checks client certificates when `tls.ca_file` is set;
/// called once per acceptor build (start-up and each reload).
pub fn configure(b: &mut SslContextBuilder, tls: &TlsConfig) -> Result<(), TlsError> {
    let Some(ca) = &tls.ca_file else {
        return Ok(());
    };
    let shown = ca.display().to_string();
    let fail = |e: ErrorStack| {
        TlsError::ClientCa(format!(
            "tls.ca_file: could not load root certificate file \"{shown}\": {e}"
        ))
    };
    // Read first, so a missing or damaged file is reported in words.
    let pem = std::fs::read(ca).map_err(|source| TlsError::Read {
        key: "tls.ca_file",
        path: shown.clone(),
        source,
    })?;
    match X509::stack_from_pem(&pem) {
        Ok(certs) if !certs.is_empty() => {}
        Ok(_) => {
            return Err(TlsError::ClientCa(format!(
                "tls.ca_file: no PEM certificate in \"{shown}\""
            )))
        }
        Err(e) => return Err(fail(e)),
    }
    b.set_ca_file(ca).map_err(fail)?;
    b.set_client_ca_list(X509Name::load_client_ca_file(ca).map_err(fail)?);
    load_crls(b, tls)?;
    // OpenSSL refuses a resumed session under SSL_VERIFY_PEER without a
    // session id context; none is resumed (no cache, no tickets), but a
    // client may still offer one.
    b.set_session_id_context(b"pgharbor")
        .map_err(|e| TlsError::ClientCa(format!("tls.ca_file: {e}")))?;
    b.set_verify_callback(super::native::CLIENT_VERIFY, log_failure);
    Ok(())
}

/// The CRLs, which the server side, unlike libpq, does not do without:
/// one that cannot be loaded fails the build (start-up refuses, a reload
/// keeps the old acceptor), with PostgreSQL's message.
fn load_crls(b: &mut SslContextBuilder, tls: &TlsConfig) -> Result<(), TlsError> {
    let loaded = super::crl::load(b, tls.crl_file.as_deref(), tls.crl_dir.as_deref())
        .map_err(|e| TlsError::ClientCa(format!("tls.crl_file/tls.crl_dir: {e}")))?;
    if let (Some(Err(e)), Some(file)) = (&loaded.file, &tls.crl_file) {
        return Err(TlsError::ClientCa(format!(
            "tls.crl_file: could not load SSL certificate revocation list file \"{}\": {e}",
            file.display()
        )));
    }
    if let (Some(Err(e)), Some(dir)) = (&loaded.dir, &tls.crl_dir) {
        return Err(TlsError::ClientCa(format!(
            "tls.crl_dir: could not load SSL certificate revocation list directory \"{}\": {e}",
            dir.display()
        )));
    }
    Ok(())
}

/// Keeps OpenSSL's verdict and logs a refusal once, with the reason and
/// the certificate's subject (public data), as PostgreSQL's `verify_cb`.
fn log_failure(ok: bool, ctx: &mut X509StoreContextRef) -> bool {
    if !ok {
        let subject = ctx.current_cert().map(subject_text).unwrap_or_default();
        tracing::info!(
            depth = ctx.error_depth(),
            subject = %subject,
            reason = %ctx.error().error_string(),
            "client certificate verification failed; handshake refused"
        );
    }
    ok
}

/// `O=example, CN=alice` for the log.
fn subject_text(cert: &X509Ref) -> String {
    let entries = cert.subject_name().entries().map(|e| {
        let name = e.object().nid().short_name().unwrap_or("?");
        // Lossy: a log line, never a comparison (a NUL shows as itself).
        let value = String::from_utf8_lossy(e.data().as_slice());
        format!("{name}={value}")
    });
    entries.collect::<Vec<_>>().join(", ")
}

/// Why a certificate's CN cannot name a user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CnError {
    /// No CN, or an empty one.
    #[error("client certificate contains no user name")]
    Missing,
    /// A NUL inside the CN (CVE-2009-4034: `alice\0.evil` must not be `alice`).
    #[error("SSL certificate's common name contains embedded null")]
    EmbeddedNull,
    /// Not text.
    #[error("SSL certificate's common name is not valid UTF-8")]
    NotText,
}

/// The certificate's (first) common name, as PostgreSQL's `peer_cn`.
pub fn common_name(cert: &X509Ref) -> Result<String, CnError> {
    let Some(entry) = cert.subject_name().entries_by_nid(Nid::COMMONNAME).next() else {
        return Err(CnError::Missing);
    };
    let bytes = entry.data().as_slice();
    if bytes.contains(&0) {
        return Err(CnError::EmbeddedNull);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| CnError::NotText)?;
    if text.is_empty() {
        return Err(CnError::Missing);
    }
    Ok(text.to_string())
}

/// A `cert` rule or a `clientcert=` option needs `tls.ca_file`: refused
/// when the hba file is loaded (start-up, reload, `pgharbor check`) rather
/// than at each login, naming the line.
pub fn check_hba(hba: &Hba, tls: &TlsConfig) -> Result<(), HbaError> {
    if tls.ca_file.is_some() {
        return Ok(());
    }
    match hba.rules().iter().find(|r| r.client_cert.is_some()) {
        Some(rule) => Err(HbaError::new(
            &rule.file,
            rule.line,
            format!("{NO_ROOT_STORE} (set tls.ca_file)"),
        )),
        None => Ok(()),
    }
}

/// The ident file read for `tls.client_cert_map`, which must define that
/// map; `None` when no map is configured. Blocking reads.
pub fn load_client_cert_map(
    tls: &TlsConfig,
    ident_file: Option<&Path>,
) -> Result<Option<IdentMaps>, HbaError> {
    let Some(map) = &tls.client_cert_map else {
        return Ok(None);
    };
    // Validation refuses the map without an ident file.
    let Some(path) = ident_file else {
        return Err(HbaError::new(
            Path::new(""),
            0,
            format!("tls.client_cert_map \"{map}\" needs auth.ident_file"),
        ));
    };
    let maps = IdentMaps::load_from(&crate::auth::hba::DiskFiles, path)?;
    if !maps.contains(map) {
        return Err(HbaError::new(
            path,
            0,
            format!("tls.client_cert_map: ident map \"{map}\" is not defined here"),
        ));
    }
    Ok(Some(maps))
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
