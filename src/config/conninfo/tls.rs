//! The TLS keywords of a connection string beyond `sslmode`, `socketsslmode`
//! and `sslrootcert`, with libpq's meanings (fe-connect.c,
//! fe-secure-openssl.c, fe-auth.c): a client certificate (`sslcert`,
//! `sslkey`, `sslpassword`, `sslcertmode`), revocation lists (`sslcrl`,
//! `sslcrldir`), protocol versions, SNI, compression, the legacy
//! `requiressl`, and `channel_binding`.
//!
//! Where libpq reads a flag by its first character only (`sslsni=yes` is
//! "off" to libpq), only `0` and `1` are accepted: such a value is a typo
//! whose silent meaning is the opposite of what was written, so it is refused
//! rather than read differently from what its author meant.

use std::fmt;
use std::path::PathBuf;

use super::ConnInfoError;
use crate::config::ConnInfo;
use crate::config::SslMode;

/// The keywords this module parses.
pub(super) const KEYWORDS: &[&str] = &[
    "requiressl",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "sslcompression",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "channel_binding",
];

/// A TLS protocol version, as `ssl_min_protocol_version` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TlsProtocol {
    /// `TLSv1` (1.0).
    Tls1_0,
    /// `TLSv1.1`.
    Tls1_1,
    /// `TLSv1.2`, libpq's default minimum.
    Tls1_2,
    /// `TLSv1.3`.
    Tls1_3,
}

impl TlsProtocol {
    const ALL: [TlsProtocol; 4] = [
        TlsProtocol::Tls1_0,
        TlsProtocol::Tls1_1,
        TlsProtocol::Tls1_2,
        TlsProtocol::Tls1_3,
    ];

    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsProtocol::Tls1_0 => "TLSv1",
            TlsProtocol::Tls1_1 => "TLSv1.1",
            TlsProtocol::Tls1_2 => "TLSv1.2",
            TlsProtocol::Tls1_3 => "TLSv1.3",
        }
    }
}

/// `channel_binding`: whether SCRAM binds itself to the TLS channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelBinding {
    /// Never SCRAM-SHA-256-PLUS.
    Disable,
    /// SCRAM-SHA-256-PLUS when the server offers it over TLS (libpq's default).
    Prefer,
    /// Only a channel-bound SCRAM exchange may log in.
    Require,
}

impl ChannelBinding {
    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelBinding::Disable => "disable",
            ChannelBinding::Prefer => "prefer",
            ChannelBinding::Require => "require",
        }
    }
}

/// Which name TLS checks (verify-full) and sends (SNI) for a TCP backend.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServerName {
    /// `host` is both the address and the name (no `hostaddr`).
    Host,
    /// `host` names the server that `hostaddr` reaches.
    Named(String),
    /// `hostaddr` alone: there is no name (libpq then checks the
    /// certificate against its default host, which fails).
    Unnamed,
}

/// `sslsni`: whether the TLS handshake names the host (never for an IP address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sni {
    /// `sslsni=1`, the default.
    Send,
    /// `sslsni=0`.
    Off,
}

/// `sslcompression`: whether TLS compression is asked for (OpenSSL builds
/// without zlib, such as Debian's, never compress anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// `sslcompression=0`, the default.
    Off,
    /// `sslcompression=1`.
    Requested,
}

/// `sslcertmode` (libpq 16): whether `sslcert` is offered to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientCertMode {
    /// Offer it if the server asks (the default).
    Allow,
    /// Never offer one.
    Disable,
}

/// The parsed TLS keywords. `Debug` hides `sslpassword`.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// `sslcert`: the client certificate (PEM chain).
    pub sslcert: Option<PathBuf>,
    /// `sslkey`: its private key (PEM or DER, possibly encrypted).
    pub sslkey: Option<PathBuf>,
    /// `sslpassword`: the passphrase of an encrypted `sslkey`.
    pub sslpassword: Option<String>,
    /// `sslcertmode`.
    pub cert_mode: ClientCertMode,
    /// `sslcrl`: a CRL file checked against the server's chain.
    pub sslcrl: Option<PathBuf>,
    /// `sslcrldir`: a directory of CRLs prepared with `openssl rehash`.
    pub sslcrldir: Option<PathBuf>,
    /// `ssl_min_protocol_version`; None (an empty value) = OpenSSL's lowest.
    pub min_protocol: Option<TlsProtocol>,
    /// `ssl_max_protocol_version`; None = OpenSSL's highest.
    pub max_protocol: Option<TlsProtocol>,
    /// `sslsni`.
    pub sni: Sni,
    /// `sslcompression`.
    pub compression: Compression,
    /// `channel_binding`.
    pub channel_binding: ChannelBinding,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            sslcert: None,
            sslkey: None,
            sslpassword: None,
            cert_mode: ClientCertMode::Allow,
            sslcrl: None,
            sslcrldir: None,
            min_protocol: Some(TlsProtocol::Tls1_2),
            max_protocol: None,
            sni: Sni::Send,
            compression: Compression::Off,
            channel_binding: ChannelBinding::Prefer,
        }
    }
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("sslcert", &self.sslcert)
            .field("sslkey", &self.sslkey)
            .field(
                "sslpassword",
                &self.sslpassword.as_ref().map(|_| super::HIDDEN),
            )
            .field("cert_mode", &self.cert_mode)
            .field("sslcrl", &self.sslcrl)
            .field("sslcrldir", &self.sslcrldir)
            .field("min_protocol", &self.min_protocol)
            .field("max_protocol", &self.max_protocol)
            .field("sni", &self.sni)
            .field("compression", &self.compression)
            .field("channel_binding", &self.channel_binding)
            .finish()
    }
}

impl TlsOptions {
    /// The pairs that differ from the defaults, for `ConnInfo::redacted`
    /// (`sslpassword` hidden).
    pub(super) fn pairs(&self) -> Vec<(&'static str, String)> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let mut out = Vec::new();
        let files = [
            ("sslcert", path(&self.sslcert)),
            ("sslkey", path(&self.sslkey)),
            (
                "sslpassword",
                self.sslpassword.as_ref().map(|_| super::HIDDEN.into()),
            ),
            ("sslcrl", path(&self.sslcrl)),
            ("sslcrldir", path(&self.sslcrldir)),
        ];
        out.extend(files.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
        let d = TlsOptions::default();
        if self.cert_mode != d.cert_mode {
            out.push(("sslcertmode", "disable".into()));
        }
        let version = |v: Option<TlsProtocol>| v.map_or(String::new(), |v| v.as_str().into());
        if self.min_protocol != d.min_protocol {
            out.push(("ssl_min_protocol_version", version(self.min_protocol)));
        }
        if self.max_protocol != d.max_protocol {
            out.push(("ssl_max_protocol_version", version(self.max_protocol)));
        }
        if self.sni != d.sni {
            out.push(("sslsni", "0".into()));
        }
        if self.compression != d.compression {
            out.push(("sslcompression", "1".into()));
        }
        if self.channel_binding != d.channel_binding {
            out.push(("channel_binding", self.channel_binding.as_str().into()));
        }
        out
    }

    /// Resolves the file names with `resolve` (relative to the config file,
    /// like every other path of the config).
    pub fn resolve_paths(&mut self, resolve: &impl Fn(String) -> PathBuf) {
        for p in [
            &mut self.sslcert,
            &mut self.sslkey,
            &mut self.sslcrl,
            &mut self.sslcrldir,
        ] {
            *p = p.take().map(|p| resolve(p.to_string_lossy().into_owned()));
        }
    }
}

/// Applies one of [`KEYWORDS`] to `info`; a later key overrides an earlier one.
pub(super) fn apply(info: &mut ConnInfo, key: &str, value: String) -> Result<(), ConnInfoError> {
    let tls = &mut info.tls;
    match key {
        // libpq 15 reads requiressl=1 as sslmode=require at that point of the
        // string (a later sslmode wins), and requiressl=0 as nothing at all.
        "requiressl" => {
            if flag(key, &value)? {
                info.sslmode = SslMode::Require;
            }
        }
        "sslcert" => tls.sslcert = path(value),
        "sslkey" => {
            // On Unix libpq takes "engine:key" as an OpenSSL engine key.
            if value.contains(':') {
                return Err(ConnInfoError::Unsupported {
                    key: key.into(),
                    reason: format!(
                        "\"{value}\" names an OpenSSL engine key (engine:key), which pgharbor cannot load; give a key file"
                    ),
                });
            }
            tls.sslkey = path(value);
        }
        "sslpassword" => tls.sslpassword = (!value.is_empty()).then_some(value),
        "sslcertmode" => {
            tls.cert_mode = match value.as_str() {
                "allow" => ClientCertMode::Allow,
                "disable" => ClientCertMode::Disable,
                "require" => {
                    return Err(ConnInfoError::Unsupported {
                        key: key.into(),
                        reason: "sslcertmode=require (fail unless the server asks for a certificate) is not implemented; use allow".into(),
                    })
                }
                _ => return Err(invalid(key, value, "expected allow, disable or require")),
            }
        }
        "sslcrl" => tls.sslcrl = path(value),
        "sslcrldir" => tls.sslcrldir = path(value),
        "sslsni" => tls.sni = if flag(key, &value)? { Sni::Send } else { Sni::Off },
        "sslcompression" => {
            tls.compression = if flag(key, &value)? {
                Compression::Requested
            } else {
                Compression::Off
            }
        }
        "ssl_min_protocol_version" => tls.min_protocol = protocol(key, value)?,
        "ssl_max_protocol_version" => tls.max_protocol = protocol(key, value)?,
        "channel_binding" => {
            tls.channel_binding = match value.as_str() {
                "disable" => ChannelBinding::Disable,
                "prefer" => ChannelBinding::Prefer,
                "require" => ChannelBinding::Require,
                _ => return Err(invalid(key, value, "expected disable, prefer or require")),
            }
        }
        _ => return Err(ConnInfoError::UnknownKeyword(key.into())),
    }
    Ok(())
}

/// Checks that need the whole string: libpq's protocol range check.
pub(super) fn finish(tls: &TlsOptions) -> Result<(), ConnInfoError> {
    if let (Some(min), Some(max)) = (tls.min_protocol, tls.max_protocol) {
        if min > max {
            return Err(ConnInfoError::InvalidValue {
                key: "ssl_max_protocol_version".into(),
                value: max.as_str().into(),
                reason: format!(
                    "invalid SSL protocol version range (below ssl_min_protocol_version {})",
                    min.as_str()
                ),
            });
        }
    }
    Ok(())
}

fn invalid(key: &str, value: String, reason: &str) -> ConnInfoError {
    ConnInfoError::InvalidValue {
        key: key.into(),
        value,
        reason: reason.into(),
    }
}

fn path(value: String) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

fn flag(key: &str, value: &str) -> Result<bool, ConnInfoError> {
    match value {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(invalid(key, value.into(), "expected 0 or 1")),
    }
}

/// libpq compares the names case-insensitively; empty means no bound.
fn protocol(key: &str, value: String) -> Result<Option<TlsProtocol>, ConnInfoError> {
    if value.is_empty() {
        return Ok(None);
    }
    TlsProtocol::ALL
        .into_iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(&value))
        .map(Some)
        .ok_or_else(|| invalid(key, value, "expected TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3"))
}

impl ConnInfo {
    /// The TLS checks that need the whole, validated entry. libpq would look
    /// in `~/.postgresql/` for a missing key and fail verify-full late; a
    /// pooler should not depend on its service account's home directory, and
    /// a certain failure is better reported at `pgharbor check`.
    pub fn check_tls(&self) -> Result<(), String> {
        if self.tls.sslcert.is_some()
            && self.tls.sslkey.is_none()
            && self.tls.cert_mode == ClientCertMode::Allow
        {
            return Err(
                "sslcert needs sslkey (the client certificate's private key; pgharbor does not look in ~/.postgresql)"
                    .into(),
            );
        }
        for host in &self.hosts {
            let tcp = matches!(host.host, crate::config::BackendHost::Tcp(_));
            if tcp && self.sslmode == SslMode::VerifyFull && host.tls_server_name().is_none() {
                let msg = "sslmode=verify-full with hostaddr needs host: the name the server's certificate must carry";
                return Err(match self.hosts.len() {
                    1 => msg.to_string(),
                    _ => format!("{msg} (host entry for hostaddr {})", host.describe()),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
