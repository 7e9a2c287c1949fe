//! `pgharbor check` on TLS settings: a policy that needs TLS without a
//! certificate, missing, broken or mismatched certificate/key files,
//! client-certificate modes on the front end (refused), and a private key
//! others can read (a warning, as PostgreSQL gives). No PostgreSQL needed.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::tls::{tls_toml, Certs};
use common::Pooler;

/// A complete config whose `[tls]` table is `tls` and whose one database
/// has `conninfo`.
fn config(tls: &str, conninfo: &str) -> String {
    format!(
        "[listen]\naddresses = [\"127.0.0.1\"]\nport = 6432\nunix_socket_dir = \"{}\"\n\n\
         [tls]\n{tls}\n\
         [auth]\nmethod = \"scram-sha-256\"\nauth_file = \"userlist.txt\"\n\n\
         [pool]\nmode = \"session\"\n\n\
         [admin]\nusers = []\n\n\
         [databases.app]\nconninfo = \"{conninfo}\"\n",
        std::env::temp_dir().display()
    )
}

const SOCKET_BACKEND: &str = "host=/tmp port=5432 dbname=app";

fn check(tls: &str) -> (i32, String) {
    Pooler::run_check(&config(tls, SOCKET_BACKEND))
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn check_accepts_a_good_tls_config_without_warnings() {
    let c = Certs::generate("check-good");
    let tls = tls_toml(
        Some(&c),
        &[
            ("sslmode", "require"),
            ("socketsslmode", "prefer"),
            ("loopbacksslmode", "allow"),
            ("min_protocol_version", "TLSv1.2"),
        ],
    );
    let (code, out) = check(&tls);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("warning"), "{out}");
}

#[test]
fn check_refuses_a_policy_that_needs_tls_without_a_certificate() {
    for key in ["sslmode", "socketsslmode", "loopbacksslmode"] {
        for mode in ["allow", "prefer", "require"] {
            let (code, out) = check(&tls_toml(None, &[(key, mode)]));
            assert_ne!(
                code, 0,
                "tls.{key} = {mode:?} without a certificate accepted"
            );
            assert!(
                out.contains(&format!("tls.{key}")) && out.contains("tls.cert_file"),
                "tls.{key} = {mode:?}: message does not name the key and the missing file: {out}"
            );
        }
        // disable needs nothing.
        let (code, out) = check(&tls_toml(None, &[(key, "disable")]));
        assert_eq!(code, 0, "tls.{key} = disable: {out}");
    }
}

#[test]
fn check_refuses_client_certificate_modes_without_a_ca_file() {
    let c = Certs::generate("check-verify");
    let ca = c.ca.display().to_string();
    for key in ["sslmode", "socketsslmode", "loopbacksslmode"] {
        for mode in ["verify-ca", "verify-full"] {
            let (code, out) = check(&tls_toml(Some(&c), &[(key, mode)]));
            assert_ne!(code, 0, "tls.{key} = {mode:?} accepted");
            assert!(
                out.contains(&format!("tls.{key}")) && out.contains("needs tls.ca_file"),
                "tls.{key} = {mode:?}: {out}"
            );
            let (code, out) = check(&tls_toml(
                Some(&c),
                &[(key, mode), ("ca_file", ca.as_str())],
            ));
            assert_eq!(code, 0, "tls.{key} = {mode:?} with tls.ca_file: {out}");
        }
    }
}

#[test]
fn check_refuses_missing_broken_and_mismatched_files() {
    let a = Certs::generate("check-a");
    let b = Certs::generate("check-b");
    let broken = a.dir.join("broken.pem");
    std::fs::write(&broken, "-----BEGIN PRIVATE KEY-----\nnot base64\n").unwrap();
    chmod(&broken, 0o600);
    let missing = a.dir.join("missing.pem");
    let pair = |cert: &Path, key: &Path| {
        format!(
            "cert_file = \"{}\"\nkey_file = \"{}\"\nsslmode = \"prefer\"\n",
            cert.display(),
            key.display()
        )
    };
    let cases = [
        (
            "missing certificate",
            pair(&missing, &a.key),
            "tls.cert_file",
        ),
        ("missing key", pair(&a.cert, &missing), "tls.key_file"),
        ("broken key", pair(&a.cert, &broken), "tls.key_file"),
        ("broken certificate", pair(&broken, &a.key), "tls.cert_file"),
        (
            "key of another certificate",
            pair(&a.cert, &b.key),
            "tls.key_file",
        ),
        (
            "certificate without a key",
            format!("cert_file = \"{}\"\n", a.cert.display()),
            "tls.key_file",
        ),
    ];
    for (what, tls, key) in cases {
        let (code, out) = check(&tls);
        assert_ne!(code, 0, "{what}: accepted:\n{tls}");
        assert!(
            out.contains(key),
            "{what}: message does not name {key}: {out}"
        );
    }
}

#[test]
fn check_warns_about_a_key_others_can_read() {
    let c = Certs::generate("check-mode");
    chmod(&c.key, 0o644);
    let (code, out) = check(&tls_toml(Some(&c), &[("sslmode", "prefer")]));
    assert_eq!(code, 0, "a readable key is a warning, not an error: {out}");
    assert!(
        out.contains("warning") && out.contains("tls.key_file") && out.contains("0644"),
        "no warning naming tls.key_file and its mode: {out}"
    );
}

#[test]
fn check_refuses_backend_tls_settings_that_cannot_work() {
    let c = Certs::generate("check-backend");
    let tls = tls_toml(None, &[]);
    // An sslrootcert that does not exist.
    let conninfo = format!(
        "host=127.0.0.1 port=5432 dbname=app sslmode=verify-full sslrootcert={}",
        c.dir.join("missing-ca.crt").display()
    );
    let (code, out) = Pooler::run_check(&config(&tls, &conninfo));
    assert_ne!(code, 0, "missing sslrootcert accepted");
    assert!(out.contains("databases.app.conninfo"), "{out}");
    // An sslmode that is not libpq's.
    let (code, out) = Pooler::run_check(&config(&tls, "host=127.0.0.1 sslmode=verify"));
    assert_ne!(code, 0, "sslmode=verify accepted");
    assert!(out.contains("databases.app.conninfo"), "{out}");
    // verify-ca / verify-full without any sslrootcert: pgharbor has no
    // default root certificate (libpq's is ~/.postgresql/root.crt), so
    // every login to this database would fail; check must say so first.
    for mode in ["verify-ca", "verify-full"] {
        let (code, out) = Pooler::run_check(&config(
            &tls,
            &format!("host=127.0.0.1 port=5432 dbname=app sslmode={mode}"),
        ));
        assert_ne!(
            code, 0,
            "backend sslmode={mode} without sslrootcert accepted by check: {out}"
        );
        assert!(
            out.contains("databases.app.conninfo") && out.contains("sslrootcert"),
            "sslmode={mode}: {out}"
        );
    }
    // socketsslmode=require toward a socket is a valid setting (it fails at
    // connect time against stock PostgreSQL, with its own error).
    let (code, out) = Pooler::run_check(&config(
        &tls,
        "host=/tmp port=5432 dbname=app socketsslmode=require",
    ));
    assert_eq!(code, 0, "socketsslmode=require is a valid setting: {out}");
}
