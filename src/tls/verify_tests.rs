//! The pure parts of client-certificate checking: the CN, the load-time
//! rule for hba lines, and the verify-full map's file.

use std::path::Path;

use openssl::asn1::{Asn1Time, Asn1Type};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::PKey;
use openssl::x509::{X509Builder, X509NameBuilder, X509};

use super::*;
use crate::auth::hba::MemoryFiles;
use crate::config::Config;

/// A self-signed certificate whose subject has these (NID, value) entries.
fn cert(subject: &[(Nid, &str)]) -> X509 {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
    let mut name = X509NameBuilder::new().unwrap();
    for (nid, value) in subject {
        name.append_entry_by_nid_with_type(*nid, value, Asn1Type::UTF8STRING)
            .unwrap();
    }
    let name = name.build();
    let mut b = X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&Asn1Time::days_from_now(1).unwrap())
        .unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    b.build()
}

#[test]
fn the_common_name_is_the_first_cn_and_must_be_clean_text() {
    let alice = cert(&[
        (Nid::ORGANIZATIONNAME, "example"),
        (Nid::COMMONNAME, "alice"),
    ]);
    assert_eq!(common_name(&alice).as_deref(), Ok("alice"));
    let two = cert(&[(Nid::COMMONNAME, "bob"), (Nid::COMMONNAME, "carol")]);
    assert_eq!(common_name(&two).as_deref(), Ok("bob"));
    let none = cert(&[(Nid::ORGANIZATIONNAME, "example")]);
    assert_eq!(common_name(&none), Err(CnError::Missing));
    let empty = cert(&[(Nid::COMMONNAME, "")]);
    assert_eq!(common_name(&empty), Err(CnError::Missing));
    // CVE-2009-4034: a CA may sign "alice\0.evil.example" for someone else.
    let nul = cert(&[(Nid::COMMONNAME, "alice\0.evil")]);
    assert_eq!(common_name(&nul), Err(CnError::EmbeddedNull));
    assert_eq!(
        CnError::Missing.to_string(),
        "client certificate contains no user name"
    );
    assert_eq!(subject_text(&alice), "O=example, CN=alice");
}

fn tls_config() -> TlsConfig {
    let text = "[auth]\nmethod = \"trust\"\n";
    Config::parse(text, Path::new("/etc/pgharbor/pgharbor.toml"))
        .unwrap()
        .tls
}

fn hba(text: &str) -> Hba {
    let files = MemoryFiles::default().with("/h/pg_hba.conf", text);
    Hba::load_from(&files, Path::new("/h/pg_hba.conf"), None).unwrap()
}

#[test]
fn certificate_rules_without_a_ca_file_are_refused_naming_the_line() {
    let mut tls = tls_config();
    let plain = hba("host all all all scram-sha-256\nhostssl all all all trust\n");
    assert_eq!(check_hba(&plain, &tls), Ok(()));
    for rule in [
        "hostssl all all all cert",
        "hostssl all all all scram-sha-256 clientcert=verify-ca",
        "hostssl all all all trust clientcert=verify-full",
    ] {
        let rules = hba(&format!("local all all trust\n{rule}\n"));
        let e = check_hba(&rules, &tls).unwrap_err();
        assert_eq!(e.line, 2, "{rule}");
        assert_eq!(
            e.to_string(),
            format!("/h/pg_hba.conf:2: {NO_ROOT_STORE} (set tls.ca_file)")
        );
        tls.ca_file = Some("/etc/pgharbor/ca.crt".into());
        assert_eq!(check_hba(&rules, &tls), Ok(()), "{rule}");
        tls.ca_file = None;
    }
}

#[test]
fn the_verify_full_map_must_be_defined_in_the_ident_file() {
    let mut tls = tls_config();
    assert_eq!(load_client_cert_map(&tls, None), Ok(None));
    let dir = std::env::temp_dir().join(format!("pgharbor-certmap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ident = dir.join("pg_ident.conf");
    std::fs::write(&ident, "certmap /^(.*)@example\\.com$ \\1\n").unwrap();
    tls.client_cert_map = Some("certmap".into());
    let maps = load_client_cert_map(&tls, Some(&ident)).unwrap().unwrap();
    assert!(maps.allows("certmap", "alice@example.com", "alice"));
    assert!(!maps.allows("certmap", "alice@example.org", "alice"));
    tls.client_cert_map = Some("other".into());
    let e = load_client_cert_map(&tls, Some(&ident)).unwrap_err();
    assert!(
        e.to_string().contains("ident map \"other\" is not defined"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
