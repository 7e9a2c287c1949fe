//! The server certificates of the rows, made with `openssl req` as the
//! bench makes its own.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The row's server key: the bench's `ecdsa` and `rsa` cells.
#[derive(Clone, Copy, PartialEq)]
pub enum CertKind {
    Ecdsa,
    Rsa,
}

impl CertKind {
    /// The name in the table's cert column and of its files.
    pub fn name(self) -> &'static str {
        match self {
            CertKind::Ecdsa => "ecdsa-p256",
            CertKind::Rsa => "rsa-2048",
        }
    }
    /// As pgbench/harbor_bench/system.py's CERT_KEYOPTS.
    fn keyopts(self) -> &'static [&'static str] {
        match self {
            CertKind::Ecdsa => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
            CertKind::Rsa => &["-newkey", "rsa:2048"],
        }
    }
}

/// A certificate and its key, PEM files.
pub struct CertFiles {
    pub crt: PathBuf,
    pub key: PathBuf,
}

/// A self-signed server certificate made by `openssl req` exactly as
/// pgbench/harbor_bench/system.py's make_cert makes the bench's.
pub fn make_cert(kind: CertKind, dir: &Path) -> CertFiles {
    let crt = dir.join(format!("{}.crt", kind.name()));
    let key = dir.join(format!("{}.key", kind.name()));
    let out = Command::new("openssl")
        .arg("req")
        .arg("-x509")
        .args(kind.keyopts())
        .args(["-sha256", "-nodes", "-days", "2", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("could not run `openssl req` (is the openssl CLI installed?)");
    assert!(
        out.status.success(),
        "openssl req failed for {}: {}",
        kind.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    CertFiles { crt, key }
}
