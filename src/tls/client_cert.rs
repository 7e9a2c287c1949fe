//! The client certificate pgharbor shows PostgreSQL (`sslcert`, `sslkey`,
//! `sslpassword`), loaded as libpq loads it (fe-secure-openssl.c,
//! initialize_SSL): a missing certificate file means no certificate; a
//! present one needs its key, which must not be readable by group or others.

use std::io::ErrorKind;
use std::path::Path;

use openssl::pkey::{PKey, Private};
use openssl::x509::X509;

use super::TlsError;

/// A certificate chain and its private key.
pub(super) struct ClientCert {
    /// The leaf certificate.
    pub leaf: X509,
    /// Intermediates sent after it.
    pub chain: Vec<X509>,
    /// The private key.
    pub key: PKey<Private>,
}

/// Loads `cert` and `key`; None when `cert` does not exist (libpq then
/// connects without a certificate, and so do we, with a warning).
pub(super) fn load(
    cert: &Path,
    key: &Path,
    password: Option<&str>,
) -> Result<Option<ClientCert>, TlsError> {
    let err = |m: String| TlsError::ClientCert(m);
    let pem = match std::fs::read(cert) {
        Ok(pem) => pem,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            tracing::warn!(
                sslcert = %cert.display(),
                "sslcert does not exist: no client certificate is sent (as libpq)"
            );
            return Ok(None);
        }
        Err(e) => {
            return Err(err(format!(
                "could not open certificate file \"{}\": {e}",
                cert.display()
            )))
        }
    };
    let mut certs = X509::stack_from_pem(&pem)
        .map_err(|e| {
            err(format!(
                "could not read certificate file \"{}\": {e}",
                cert.display()
            ))
        })?
        .into_iter();
    let Some(leaf) = certs.next() else {
        return Err(err(format!(
            "could not read certificate file \"{}\": no certificate in it",
            cert.display()
        )));
    };
    super::validity::refuse_invalid(&leaf, &format!("sslcert \"{}\"", cert.display()))
        .map_err(err)?;
    let key_bytes = read_key(key)?;
    let key = parse_key(&key_bytes, password).map_err(|why| {
        err(format!(
            "could not load private key file \"{}\": {why}",
            key.display()
        ))
    })?;
    Ok(Some(ClientCert {
        leaf,
        chain: certs.collect(),
        key,
    }))
}

/// Reads the key after libpq's checks: it exists, is a regular file, and
/// is not open to group or others (0640 allowed when root owns it).
fn read_key(path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::os::unix::fs::MetadataExt;
    let err = |m: String| TlsError::ClientCert(m);
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(err(format!(
                "certificate present, but not private key file \"{shown}\""
            )))
        }
        Err(e) => {
            return Err(err(format!(
                "could not stat private key file \"{shown}\": {e}"
            )))
        }
    };
    if !meta.is_file() {
        return Err(err(format!(
            "private key file \"{shown}\" is not a regular file"
        )));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let mode = meta.mode();
    let open = (meta.uid() == euid && mode & 0o077 != 0) || (meta.uid() == 0 && mode & 0o037 != 0);
    if open {
        return Err(err(format!(
            "private key file \"{shown}\" has group or world access; file must have permissions u=rw (0600) or less if owned by the current user, or permissions u=rw,g=r (0640) or less if owned by root"
        )));
    }
    std::fs::read(path)
        .map_err(|e| err(format!("could not load private key file \"{shown}\": {e}")))
}

/// PEM, else DER (as libpq tries both). Without a password an encrypted key
/// fails here: OpenSSL's own fallback would prompt on the terminal.
fn parse_key(bytes: &[u8], password: Option<&str>) -> Result<PKey<Private>, String> {
    let pem = PKey::private_key_from_pem_callback(bytes, |buf| match password {
        Some(pw) if pw.len() <= buf.len() => {
            buf[..pw.len()].copy_from_slice(pw.as_bytes());
            Ok(pw.len())
        }
        _ => Ok(0),
    });
    let pem_error = match pem {
        Ok(key) => return Ok(key),
        Err(e) => e,
    };
    let der = match password {
        Some(pw) => PKey::private_key_from_pkcs8_passphrase(bytes, pw.as_bytes()),
        None => PKey::private_key_from_der(bytes),
    };
    der.map_err(|_| match password {
        Some(_) => format!("{pem_error} (wrong sslpassword, or not a PEM or DER key)"),
        None => format!(
            "{pem_error} (an encrypted key needs sslpassword; pgharbor cannot prompt for it)"
        ),
    })
}
