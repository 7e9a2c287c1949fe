//! TLS policy: which transports must, may or must not use TLS. No I/O here.

use crate::config::{SslMode, TlsConfig};
use crate::listener::Transport;

/// The front-end policy for a client that arrived over `transport`.
pub fn mode_for(tls: &TlsConfig, transport: Transport) -> SslMode {
    match transport {
        Transport::Unix => tls.socketsslmode,
        Transport::LoopbackTcp => tls.loopbacksslmode.unwrap_or(tls.sslmode),
        Transport::RemoteTcp => tls.sslmode,
    }
}

/// The refusal for a plain StartupMessage under a policy that requires TLS,
/// or None when plain is acceptable. Decided before any password is asked
/// for, so no secret ever crosses a link the policy says must be encrypted.
pub fn refuse_plain_startup(mode: SslMode, transport: Transport) -> Option<&'static str> {
    if !mode.requires_tls() {
        return None;
    }
    Some(match transport {
        Transport::Unix => {
            "SSL required on the Unix socket (socketsslmode); note that libpq never uses SSL on Unix sockets"
        }
        Transport::LoopbackTcp | Transport::RemoteTcp => "SSL required",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_startup_is_refused_exactly_when_tls_is_required() {
        for mode in SslMode::ALL {
            for t in [
                Transport::Unix,
                Transport::LoopbackTcp,
                Transport::RemoteTcp,
            ] {
                assert_eq!(
                    refuse_plain_startup(mode, t).is_some(),
                    matches!(
                        mode,
                        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
                    ),
                    "{mode} over {t}"
                );
            }
        }
        assert!(refuse_plain_startup(SslMode::Require, Transport::Unix)
            .is_some_and(|m| m.contains("libpq never uses SSL on Unix sockets")));
    }

    #[test]
    fn each_transport_gets_its_own_mode_and_loopback_falls_back_to_sslmode() {
        let text =
            "[auth]\nmethod = \"trust\"\n[tls]\ncert_file = \"a.crt\"\nkey_file = \"a.key\"\n\
                    sslmode = \"require\"\nsocketsslmode = \"allow\"\n";
        let path = std::path::Path::new("/etc/pgharbor/pgharbor.toml");
        let mut tls = crate::config::Config::parse(text, path)
            .map(|c| c.tls)
            .unwrap();
        assert_eq!(mode_for(&tls, Transport::RemoteTcp), SslMode::Require);
        assert_eq!(mode_for(&tls, Transport::LoopbackTcp), SslMode::Require);
        assert_eq!(mode_for(&tls, Transport::Unix), SslMode::Allow);
        tls.loopbacksslmode = Some(SslMode::Disable);
        assert_eq!(mode_for(&tls, Transport::LoopbackTcp), SslMode::Disable);
        assert_eq!(mode_for(&tls, Transport::RemoteTcp), SslMode::Require);
    }
}
