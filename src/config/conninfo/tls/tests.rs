//! The TLS keywords, the refused ones, and the classification of every
//! keyword libpq knows.

use std::path::{Path, PathBuf};

use super::*;
use crate::config::{BackendHost, Config};

use crate::config::conninfo::tests::parse;

fn err(s: &str) -> ConnInfoError {
    match ConnInfo::parse(s) {
        Ok(info) => panic!("{s:?} parsed: {info:?}"),
        Err(e) => e,
    }
}

/// Every keyword of libpq's PQconninfoOptions (fe-connect.c, PostgreSQL 18)
/// plus libpq 15's `requiressl`, with a value libpq accepts.
const LIBPQ: &[(&str, &str)] = &[
    ("service", "prod"),
    ("user", "u"),
    ("password", "p"),
    ("passfile", "/p"),
    ("channel_binding", "require"),
    ("connect_timeout", "5"),
    ("dbname", "d"),
    ("host", "h"),
    ("hostaddr", "127.0.0.1"),
    ("port", "5432"),
    ("client_encoding", "UTF8"),
    ("options", "-c x=1"),
    ("application_name", "a"),
    ("fallback_application_name", "f"),
    ("keepalives", "1"),
    ("keepalives_idle", "10"),
    ("keepalives_interval", "10"),
    ("keepalives_count", "3"),
    ("tcp_user_timeout", "1000"),
    ("sslmode", "require"),
    // Alone, direct is refused under the default sslmode=prefer (libpq 17).
    ("sslnegotiation", "postgres"),
    ("sslcompression", "1"),
    ("sslcert", "/c"),
    ("sslkey", "/k"),
    ("sslcertmode", "allow"),
    ("sslpassword", "x"),
    ("sslrootcert", "/r"),
    ("sslcrl", "/crl"),
    ("sslcrldir", "/crls"),
    ("sslsni", "0"),
    ("sslkeylogfile", "/log"),
    ("requirepeer", "postgres"),
    ("require_auth", "scram-sha-256"),
    ("ssl_min_protocol_version", "TLSv1.3"),
    ("ssl_max_protocol_version", "TLSv1.3"),
    ("min_protocol_version", "3.2"),
    ("max_protocol_version", "latest"),
    ("gssencmode", "require"),
    ("krbsrvname", "postgres"),
    ("gsslib", "gssapi"),
    ("gssdelegation", "0"),
    ("replication", "database"),
    ("target_session_attrs", "read-write"),
    ("load_balance_hosts", "random"),
    ("scram_client_key", "a2V5"),
    ("scram_server_key", "a2V5"),
    ("oauth_issuer", "https://i"),
    ("oauth_client_id", "c"),
    ("oauth_client_secret", "s"),
    ("oauth_scope", "s"),
    ("requiressl", "1"),
];

/// Keywords read into their own fields, never passed through to backends.
const IMPLEMENTED_ELSEWHERE: &[&str] = &[
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "target_session_attrs",
    "load_balance_hosts",
];

/// The rule: each keyword libpq knows is implemented or refused with a
/// reason; none is unknown to pgharbor, and the values above that pgharbor
/// does not implement are refused as unsupported, never taken and ignored.
#[test]
fn every_libpq_keyword_is_implemented_or_refused() {
    let refused = [
        "service",
        "passfile",
        "sslkeylogfile",
        "requirepeer",
        "require_auth",
        "min_protocol_version",
        "max_protocol_version",
        "gssencmode",
        "krbsrvname",
        "gsslib",
        "gssdelegation",
        "replication",
        "scram_client_key",
        "scram_server_key",
        "oauth_issuer",
        "oauth_client_id",
        "oauth_client_secret",
        "oauth_scope",
    ];
    for (key, value) in LIBPQ {
        let got = ConnInfo::parse(&format!("{key}='{value}'"));
        if refused.contains(key) {
            match got {
                Err(ConnInfoError::Unsupported { key: k, reason }) => {
                    assert_eq!(k, *key);
                    assert!(!reason.is_empty());
                }
                other => panic!("{key}={value}: expected a refusal, got {other:?}"),
            }
        } else {
            assert!(got.is_ok(), "{key}={value}: {got:?}");
        }
    }
    for key in IMPLEMENTED_ELSEWHERE {
        let (_, value) = LIBPQ.iter().find(|(k, _)| k == key).expect("listed");
        let info = parse(&format!("{key}={value}"));
        assert!(info.extra.is_empty(), "{key} passed through: {info:?}");
    }
}

#[test]
fn defaults_are_libpqs() {
    let info = parse("host=h");
    let tls = &info.tls;
    assert_eq!(tls.min_protocol, Some(TlsProtocol::Tls1_2));
    assert_eq!(tls.max_protocol, None);
    assert_eq!(tls.sni, Sni::Send);
    assert_eq!(tls.compression, Compression::Off);
    assert_eq!(tls.channel_binding, ChannelBinding::Prefer);
    assert_eq!(tls.cert_mode, ClientCertMode::Allow);
    assert_eq!(info.first_host().tls_server_name(), Some("h"));
}

#[test]
fn each_keyword_is_parsed() {
    let info = parse(
        "host=h sslcert=/c.crt sslkey=/c.key sslpassword='pass word' sslcrl=/r.crl \
         sslcrldir=/crls sslsni=0 sslcompression=1 ssl_min_protocol_version=tlsv1.1 \
         ssl_max_protocol_version=TLSv1.3 channel_binding=require sslcertmode=disable",
    );
    let tls = &info.tls;
    assert_eq!(tls.sslcert, Some(PathBuf::from("/c.crt")));
    assert_eq!(tls.sslkey, Some(PathBuf::from("/c.key")));
    assert_eq!(tls.sslpassword.as_deref(), Some("pass word"));
    assert_eq!(tls.sslcrl, Some(PathBuf::from("/r.crl")));
    assert_eq!(tls.sslcrldir, Some(PathBuf::from("/crls")));
    assert_eq!(tls.sni, Sni::Off);
    assert_eq!(tls.compression, Compression::Requested);
    assert_eq!(tls.min_protocol, Some(TlsProtocol::Tls1_1));
    assert_eq!(tls.max_protocol, Some(TlsProtocol::Tls1_3));
    assert_eq!(tls.channel_binding, ChannelBinding::Require);
    assert_eq!(tls.cert_mode, ClientCertMode::Disable);
    // Empty values mean "not set" / "no bound", as in libpq.
    let info = parse("sslcert='' ssl_min_protocol_version='' channel_binding=disable");
    assert_eq!(info.tls.sslcert, None);
    assert_eq!(info.tls.min_protocol, None);
    assert_eq!(info.tls.channel_binding, ChannelBinding::Disable);
}

/// libpq 15: requiressl=1 is sslmode=require at its place in the string, a
/// later sslmode wins, and requiressl=0 does nothing (checked with psql 15
/// against a server that answers N).
#[test]
fn requiressl_is_sslmode_require_in_string_order() {
    assert_eq!(parse("requiressl=1").sslmode, SslMode::Require);
    assert_eq!(
        parse("sslmode=disable requiressl=1").sslmode,
        SslMode::Require
    );
    assert_eq!(
        parse("requiressl=1 sslmode=disable").sslmode,
        SslMode::Disable
    );
    assert_eq!(parse("requiressl=0").sslmode, SslMode::Prefer);
    assert_eq!(
        parse("sslmode=require requiressl=0").sslmode,
        SslMode::Require
    );
    let uri = ConnInfo::parse("postgresql://h/db?requiressl=1").unwrap();
    assert_eq!(uri.sslmode, SslMode::Require);
}

#[test]
fn host_names_the_server_that_hostaddr_reaches() {
    let info = parse("host=db.example hostaddr=127.0.0.1");
    assert_eq!(info.first_host().host, BackendHost::Tcp("127.0.0.1".into()));
    assert_eq!(info.first_host().tls_server_name(), Some("db.example"));
    assert!(info
        .redacted()
        .starts_with("host=db.example hostaddr=127.0.0.1 "));
    let info = parse("hostaddr=127.0.0.1 host=db.example");
    assert_eq!(info.first_host().tls_server_name(), Some("db.example"));
    let info = parse("hostaddr=127.0.0.1");
    assert_eq!(info.first_host().tls_server_name(), None);
    assert_eq!(parse("host=/tmp").first_host().tls_server_name(), None);
}

#[test]
fn bad_values_name_the_key_and_the_value() {
    let cases = [
        ("requiressl=yes", "requiressl", "yes"),
        ("requiressl=10", "requiressl", "10"),
        ("sslsni=2", "sslsni", "2"),
        ("sslcompression=on", "sslcompression", "on"),
        (
            "ssl_min_protocol_version=TLSv1.9",
            "ssl_min_protocol_version",
            "TLSv1.9",
        ),
        (
            "ssl_max_protocol_version=SSLv3",
            "ssl_max_protocol_version",
            "SSLv3",
        ),
        ("channel_binding=maybe", "channel_binding", "maybe"),
        ("channel_binding=Require", "channel_binding", "Require"),
        ("sslcertmode=sometimes", "sslcertmode", "sometimes"),
        ("gssencmode=always", "gssencmode", "always"),
        ("sslnegotiation=tls", "sslnegotiation", "tls"),
        ("min_protocol_version=2.0", "min_protocol_version", "2.0"),
    ];
    for (s, key, value) in cases {
        let e = err(s);
        let text = e.to_string();
        assert!(
            matches!(&e, ConnInfoError::InvalidValue { key: k, value: v, .. } if k == key && v == value),
            "{s}: {e:?}"
        );
        assert!(text.contains(key) && text.contains(value), "{s}: {text}");
    }
    let e = err("ssl_min_protocol_version=TLSv1.3 ssl_max_protocol_version=TLSv1.2");
    assert!(
        e.to_string().contains("invalid SSL protocol version range"),
        "{e}"
    );
}

#[test]
fn unimplemented_values_are_refused_not_ignored() {
    for s in [
        "gssencmode=require",
        "sslcertmode=require",
        "sslkey=pkcs11:token",
        "max_protocol_version=3.2",
        "krbsrvname=postgres",
        "service=prod",
    ] {
        let key = s.split('=').next().unwrap();
        match err(s) {
            ConnInfoError::Unsupported { key: k, .. } => assert_eq!(k, key, "{s}"),
            other => panic!("{s}: {other:?}"),
        }
    }
    // What pgharbor already does is accepted.
    for s in [
        "gssencmode=disable",
        "gssencmode=prefer",
        "sslnegotiation=postgres",
        "sslmode=require sslnegotiation=direct",
        "min_protocol_version=3.0",
        "max_protocol_version=3.0",
    ] {
        parse(s);
    }
}

#[test]
fn sslpassword_never_shows() {
    let info = parse("host=h sslkey=/k sslcert=/c sslpassword=topsecret");
    assert!(!info.redacted().contains("topsecret"));
    assert!(info.redacted().contains("sslpassword=********"));
    assert!(!format!("{info:?}").contains("topsecret"));
}

fn config_err(conninfo: &str) -> String {
    let text =
        format!("[auth]\nauth_file = \"users.txt\"\n[databases.app]\nconninfo = \"{conninfo}\"\n");
    match Config::parse(&text, Path::new("/etc/pgharbor/pgharbor.toml")) {
        Ok(_) => panic!("{conninfo}: accepted"),
        Err(e) => e.to_string(),
    }
}

/// At `check` and start-up the error names the database entry and the key.
#[test]
fn config_errors_name_the_database_and_the_key() {
    for (conninfo, key) in [
        ("host=h channel_binding=maybe", "channel_binding"),
        ("host=h gssencmode=require", "gssencmode"),
        ("host=h sslcert=client.crt", "sslkey"),
        (
            "hostaddr=127.0.0.1 sslmode=verify-full sslrootcert=ca.crt",
            "host",
        ),
        ("host=h sslsni=yes", "sslsni"),
    ] {
        let e = config_err(conninfo);
        assert!(
            e.starts_with("databases.app.conninfo: ") && e.contains(key),
            "{conninfo}: {e}"
        );
    }
}

#[test]
fn relative_files_are_resolved_against_the_config() {
    let text = "[auth]\nauth_file = \"users.txt\"\n[databases.app]\n\
                conninfo = \"host=h sslcert=c.crt sslkey=/abs/c.key sslcrl=r.crl\"\n";
    let c = Config::parse(text, Path::new("/etc/pgharbor/pgharbor.toml")).unwrap();
    let tls = &c.databases["app"].conninfo.tls;
    assert_eq!(tls.sslcert, Some(PathBuf::from("/etc/pgharbor/c.crt")));
    assert_eq!(tls.sslkey, Some(PathBuf::from("/abs/c.key")));
    assert_eq!(tls.sslcrl, Some(PathBuf::from("/etc/pgharbor/r.crl")));
}
