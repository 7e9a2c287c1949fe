//! Certificate validity dates. An expired or not-yet-valid certificate is
//! refused wherever it is loaded (start-up, `pgharbor check`, reload): a
//! client or server would refuse it at every handshake anyway, with an
//! OpenSSL message far from the cause. One that expires within
//! [`SOON_DAYS`] is a warning, so the operator hears of it while there is
//! time to renew.

use std::path::Path;

use openssl::asn1::Asn1Time;
use openssl::x509::{X509Ref, X509};

use crate::config::{ClientCertMode, Config};

/// A certificate expiring within this many days draws a warning.
pub const SOON_DAYS: i32 = 30;

/// Where a certificate stands today.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validity {
    /// Valid for more than [`SOON_DAYS`] days.
    Valid,
    /// Valid, but expires in this many whole days (at `not_after`).
    ExpiresSoon {
        /// Whole days left.
        days: i32,
        /// The certificate's notAfter, as OpenSSL prints it.
        not_after: String,
    },
    /// Past its notAfter.
    Expired(String),
    /// Before its notBefore.
    NotYetValid(String),
}

/// The validity of `cert` now.
pub fn validity(cert: &X509Ref) -> Validity {
    let Ok(now) = Asn1Time::days_from_now(0) else {
        // No clock to compare with: say nothing rather than refuse.
        return Validity::Valid;
    };
    if cert.not_before() > now {
        return Validity::NotYetValid(cert.not_before().to_string());
    }
    match now.diff(cert.not_after()) {
        Ok(d) if d.days < 0 || (d.days == 0 && d.secs <= 0) => {
            Validity::Expired(cert.not_after().to_string())
        }
        Ok(d) if d.days < SOON_DAYS => Validity::ExpiresSoon {
            days: d.days,
            not_after: cert.not_after().to_string(),
        },
        _ => Validity::Valid,
    }
}

/// Refuses a certificate that is expired or not yet valid; `what` names it
/// (e.g. the file).
pub(super) fn refuse_invalid(cert: &X509Ref, what: &str) -> Result<(), String> {
    match validity(cert) {
        Validity::Expired(at) => Err(format!("{what}: certificate expired on {at}")),
        Validity::NotYetValid(at) => Err(format!("{what}: certificate is not valid before {at}")),
        Validity::Valid | Validity::ExpiresSoon { .. } => Ok(()),
    }
}

/// Warnings for the certificates `config` names that expire within
/// [`SOON_DAYS`]: `tls.cert_file` and each backend's `sslcert`. Files that
/// cannot be read are left to the loaders, which refuse them.
pub fn expiry_warnings(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(path) = &config.tls.cert_file {
        warn_if_soon(&mut out, "tls.cert_file", path);
    }
    for (name, db) in &config.databases {
        let tls = &db.conninfo.tls;
        if let (ClientCertMode::Allow, Some(cert)) = (tls.cert_mode, &tls.sslcert) {
            warn_if_soon(
                &mut out,
                &format!("databases.{name}.conninfo sslcert"),
                cert,
            );
        }
    }
    out
}

fn warn_if_soon(out: &mut Vec<String>, key: &str, path: &Path) {
    let Ok(pem) = std::fs::read(path) else {
        return;
    };
    let Some(leaf) = X509::stack_from_pem(&pem)
        .ok()
        .and_then(|s| s.into_iter().next())
    else {
        return;
    };
    if let Validity::ExpiresSoon { days, not_after } = validity(&leaf) {
        out.push(format!(
            "{key}: {}: certificate expires in {days} days, on {not_after}",
            path.display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::hash::MessageDigest;
    use openssl::pkey::PKey;
    use openssl::rsa::Rsa;
    use openssl::x509::X509Builder;

    /// A self-signed certificate valid between these offsets (in days) from now.
    fn cert(not_before: i64, not_after: i64) -> X509 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let at = |days: i64| Asn1Time::from_unix(now + days * 86_400).unwrap();
        let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let mut b = X509Builder::new().unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&at(not_before)).unwrap();
        b.set_not_after(&at(not_after)).unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        b.build()
    }

    #[test]
    fn dates_decide() {
        assert_eq!(validity(&cert(-1, 365)), Validity::Valid);
        assert!(matches!(
            validity(&cert(-1, 10)),
            Validity::ExpiresSoon { days: 9 | 10, .. }
        ));
        assert!(matches!(validity(&cert(-10, -2)), Validity::Expired(_)));
        assert!(matches!(validity(&cert(5, 400)), Validity::NotYetValid(_)));
        let e = refuse_invalid(&cert(-10, -2), "x.pem").unwrap_err();
        assert!(e.starts_with("x.pem: certificate expired on "), "{e}");
        let e = refuse_invalid(&cert(5, 400), "y.pem").unwrap_err();
        assert!(e.contains("not valid before"), "{e}");
        assert!(refuse_invalid(&cert(-1, 10), "z.pem").is_ok());
    }
}
