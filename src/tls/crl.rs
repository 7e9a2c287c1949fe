//! Certificate revocation lists, loaded the same way for both directions:
//! `sslcrl` / `sslcrldir` toward PostgreSQL and `tls.crl_file` /
//! `tls.crl_dir` toward clients. What a list that cannot be loaded means
//! differs (libpq ignores it, the PostgreSQL server refuses to start), so
//! each caller decides from [`Loaded`].

use std::path::Path;

use openssl::error::ErrorStack;
use openssl::ssl::SslContextBuilder;
use openssl::x509::store::X509Lookup;
use openssl::x509::verify::X509VerifyFlags;

/// What became of each source that was given (`None`: not given).
#[derive(Debug, Default)]
pub(super) struct Loaded {
    /// The PEM file of CRLs.
    pub file: Option<Result<(), String>>,
    /// The `openssl rehash` directory.
    pub dir: Option<Result<(), String>>,
}

/// Adds `file` and `dir` to the context's certificate store and, when at
/// least one loaded, checks every certificate of the chain against them
/// (`X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL`, as libpq and the
/// PostgreSQL server set). Errors only when the store itself fails.
pub(super) fn load(
    b: &mut SslContextBuilder,
    file: Option<&Path>,
    dir: Option<&Path>,
) -> Result<Loaded, ErrorStack> {
    let mut loaded = Loaded::default();
    let store = b.cert_store_mut();
    if let Some(file) = file {
        let lookup = store.add_lookup(X509Lookup::file())?;
        loaded.file = Some(super::native::load_crl_file(lookup, file));
    }
    if let Some(dir) = dir {
        let lookup = store.add_lookup(X509Lookup::hash_dir())?;
        // The directory is only searched during a check: a missing one
        // would go unnoticed until then.
        loaded.dir = Some(match super::native::add_crl_dir(lookup, dir) {
            Ok(()) if dir.is_dir() => Ok(()),
            Ok(()) => Err("not a directory".to_string()),
            Err(e) => Err(e),
        });
    }
    let any = [&loaded.file, &loaded.dir]
        .iter()
        .any(|r| matches!(r, Some(Ok(()))));
    if any {
        store.set_flags(X509VerifyFlags::CRL_CHECK | X509VerifyFlags::CRL_CHECK_ALL)?;
    }
    Ok(loaded)
}
