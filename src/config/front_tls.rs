//! The `[tls]` table validated: the certificate pair, the per-transport
//! policies, and client certificates (`ca_file`, CRLs, the verify-full
//! map). No I/O: the files are read when the acceptor is built.

use std::path::PathBuf;
use std::str::FromStr;

use super::keys::{self, DefaultValue, Key, Section};
use super::raw::RawTls;
use super::{AuthConfig, ConfigError, SslMode, Tls13Suite, TlsConfig};

impl Tls13Suite {
    /// The order chosen when `tls.tls13_ciphers` is not given. AES-128-GCM
    /// first: it is TLS 1.3's mandatory suite and the first choice of
    /// browsers, Go and Mozilla's "intermediate" list, and its key schedule
    /// hashes with SHA-256, which CPUs accelerate, where AES-256-GCM's (the
    /// first of OpenSSL's and so of libpq's list) hashes with SHA-384.
    pub const DEFAULT_ORDER: &'static str =
        "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

    /// A list as the config file (and OpenSSL) writes it.
    pub fn join(list: &[Tls13Suite]) -> String {
        let names: Vec<&str> = list.iter().map(|s| s.as_str()).collect();
        names.join(":")
    }
}

/// What a mode needs that the `[tls]` table lacks, if anything.
#[derive(Debug, Clone, Copy)]
struct Have {
    cert: bool,
    ca: bool,
}

pub(super) fn tls(
    raw: RawTls,
    resolve: &impl Fn(String) -> PathBuf,
) -> Result<TlsConfig, ConfigError> {
    let path = |s: Option<String>| s.filter(|s| !s.is_empty()).map(resolve);
    let cert_file = path(raw.cert_file);
    let key_file = path(raw.key_file);
    match (&cert_file, &key_file) {
        (Some(_), None) => {
            return Err(ConfigError::invalid(
                "tls.key_file",
                "required when tls.cert_file is set",
            ))
        }
        (None, Some(_)) => {
            return Err(ConfigError::invalid(
                "tls.cert_file",
                "required when tls.key_file is set",
            ))
        }
        _ => {}
    }
    let ca_file = path(raw.ca_file);
    let crl_file = path(raw.crl_file);
    let crl_dir = path(raw.crl_dir);
    client_cert_files(cert_file.is_some(), ca_file.is_some(), &crl_file, &crl_dir)?;
    let have = Have {
        cert: cert_file.is_some(),
        ca: ca_file.is_some(),
    };
    let k = |name: &str| keys::key(Section::Tls, name);
    let mode = |name: &str, raw: Option<String>| -> Result<SslMode, ConfigError> {
        let key = k(name)?;
        match front_end_mode(key, raw, have)? {
            Some(mode) => Ok(mode),
            None => default_mode(key, have.cert),
        }
    };
    let sslmode = mode("sslmode", raw.sslmode)?;
    let socketsslmode = mode("socketsslmode", raw.socketsslmode)?;
    let loopbacksslmode = front_end_mode(k("loopbacksslmode")?, raw.loopbacksslmode, have)?;
    let min_protocol_version = k("min_protocol_version")?.choice(raw.min_protocol_version)?;
    let tls13_ciphers = k("tls13_ciphers")?.ordered(raw.tls13_ciphers)?;
    Ok(TlsConfig {
        cert_file,
        key_file,
        sslmode,
        socketsslmode,
        loopbacksslmode,
        min_protocol_version,
        tls13_ciphers,
        ca_file,
        crl_file,
        crl_dir,
        client_cert_map: raw.client_cert_map.filter(|s| !s.is_empty()),
    })
}

/// `ca_file` is for the acceptor, so it needs the certificate pair; the
/// CRLs are checked only where `ca_file` verifies a chain.
fn client_cert_files(
    has_cert: bool,
    has_ca: bool,
    crl_file: &Option<PathBuf>,
    crl_dir: &Option<PathBuf>,
) -> Result<(), ConfigError> {
    if has_ca && !has_cert {
        return Err(ConfigError::invalid(
            "tls.ca_file",
            "needs tls.cert_file and tls.key_file (client certificates are asked for in a TLS handshake)",
        ));
    }
    for (key, set) in [("tls.crl_file", crl_file), ("tls.crl_dir", crl_dir)] {
        if set.is_some() && !has_ca {
            return Err(ConfigError::invalid(
                key,
                "needs tls.ca_file (revocation lists are checked only against verified client certificates)",
            ));
        }
    }
    Ok(())
}

/// The cross-table rule: the verify-full map is a map of `auth.ident_file`
/// (whether the map exists is checked when that file is read).
pub(super) fn check_cert_map(tls: &TlsConfig, auth: &AuthConfig) -> Result<(), ConfigError> {
    match (&tls.client_cert_map, &auth.ident_file) {
        (Some(map), None) => Err(ConfigError::invalid(
            "tls.client_cert_map",
            format!("\"{map}\" needs auth.ident_file, which defines the map"),
        )),
        _ => Ok(()),
    }
}

/// The default policy of `key`, which may depend on whether there is a certificate.
fn default_mode(key: &Key, has_cert: bool) -> Result<SslMode, ConfigError> {
    let text = match key.default {
        DefaultValue::Str(s) => s,
        DefaultValue::IfCertificate { with, .. } if has_cert => with,
        DefaultValue::IfCertificate { without, .. } => without,
        _ => {
            return Err(ConfigError::invalid(
                key.dotted(),
                "no default policy in the key table (a bug in pgharbor)",
            ))
        }
    };
    SslMode::from_str(text).map_err(|e| ConfigError::invalid(key.dotted(), e.to_string()))
}

/// A front-end policy: a valid sslmode, a certificate for every mode that
/// may use TLS, and `tls.ca_file` for the modes that check the client's.
fn front_end_mode(
    key: &Key,
    raw: Option<String>,
    have: Have,
) -> Result<Option<SslMode>, ConfigError> {
    let key = &key.dotted();
    let Some(text) = raw else { return Ok(None) };
    let mode = SslMode::from_str(&text).map_err(|e| ConfigError::invalid(key, e.to_string()))?;
    match mode {
        SslMode::Disable => Ok(Some(mode)),
        _ if !have.cert => Err(ConfigError::invalid(
            key,
            format!("{text:?} needs tls.cert_file and tls.key_file"),
        )),
        SslMode::VerifyCa | SslMode::VerifyFull if !have.ca => Err(ConfigError::invalid(
            key,
            format!("{text:?} needs tls.ca_file (the CA that signs client certificates)"),
        )),
        _ => Ok(Some(mode)),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, SslMode};

    fn parse(tls: &str, auth: &str) -> Result<Config, String> {
        let text = format!("[tls]\n{tls}[auth]\nmethod = \"trust\"\n{auth}");
        Config::parse(&text, std::path::Path::new("/etc/pgharbor/pgharbor.toml"))
            .map_err(|e| e.to_string())
    }

    const PAIR: &str = "cert_file = \"a.crt\"\nkey_file = \"a.key\"\n";

    #[test]
    fn verify_modes_need_a_ca_file_and_get_it_resolved() {
        for mode in ["verify-ca", "verify-full"] {
            for key in ["sslmode", "socketsslmode", "loopbacksslmode"] {
                let e = parse(&format!("{PAIR}{key} = \"{mode}\"\n"), "").unwrap_err();
                assert!(e.contains(&format!("tls.{key}")), "{e}");
                assert!(e.contains("needs tls.ca_file"), "{e}");
            }
        }
        let c = parse(
            &format!("{PAIR}ca_file = \"ca.crt\"\nsslmode = \"verify-full\"\nsocketsslmode = \"verify-ca\"\n"),
            "",
        )
        .unwrap();
        assert_eq!(c.tls.sslmode, SslMode::VerifyFull);
        assert_eq!(c.tls.socketsslmode, SslMode::VerifyCa);
        assert_eq!(
            c.tls.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/pgharbor/ca.crt"))
        );
    }

    #[test]
    fn client_cert_keys_need_what_they_build_on() {
        let e = parse("ca_file = \"ca.crt\"\n", "").unwrap_err();
        assert!(
            e.contains("tls.ca_file") && e.contains("tls.cert_file"),
            "{e}"
        );
        for key in ["crl_file", "crl_dir"] {
            let e = parse(&format!("{PAIR}{key} = \"x\"\n"), "").unwrap_err();
            assert!(
                e.contains(&format!("tls.{key}")) && e.contains("needs tls.ca_file"),
                "{e}"
            );
        }
        let e = parse(
            &format!("{PAIR}ca_file = \"ca.crt\"\nclient_cert_map = \"m\"\n"),
            "",
        )
        .unwrap_err();
        assert!(
            e.contains("tls.client_cert_map") && e.contains("auth.ident_file"),
            "{e}"
        );
        let c = parse(
            &format!("{PAIR}ca_file = \"ca.crt\"\ncrl_dir = \"crl\"\nclient_cert_map = \"m\"\n"),
            "ident_file = \"pg_ident.conf\"\n",
        )
        .unwrap();
        assert_eq!(c.tls.client_cert_map.as_deref(), Some("m"));
        assert!(c.tls.crl_dir.is_some() && c.tls.crl_file.is_none());
    }
}
