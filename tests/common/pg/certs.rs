//! The default cluster's TLS material: a CA and the server certificate it
//! signs, made with the openssl CLI at run time.

use std::path::Path;
use std::process::{Command, Stdio};

/// ECDSA P-256 CA and a server certificate it signs, CN=localhost with SAN
/// DNS:localhost and IP:127.0.0.1, written to `dir` as ca.crt/ca.key and
/// server.crt/server.key.
pub(super) fn make_certificates(dir: &Path) {
    std::fs::write(
        dir.join("openssl.cnf"),
        "[req]\n\
         distinguished_name = dn\n\
         prompt = no\n\
         [dn]\n\
         CN = pgharbor test CA\n\
         [v3_ca]\n\
         basicConstraints = critical,CA:TRUE\n\
         keyUsage = critical,keyCertSign,cRLSign\n\
         subjectKeyIdentifier = hash\n\
         [v3_server]\n\
         basicConstraints = critical,CA:FALSE\n\
         keyUsage = critical,digitalSignature\n\
         extendedKeyUsage = serverAuth\n\
         subjectAltName = DNS:localhost,IP:127.0.0.1\n\
         subjectKeyIdentifier = hash\n\
         authorityKeyIdentifier = keyid,issuer\n",
    )
    .expect("write openssl.cnf");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let steps: Vec<Vec<&str>> = vec![
        [
            &[
                "req",
                "-x509",
                "-config",
                "openssl.cnf",
                "-extensions",
                "v3_ca",
            ][..],
            &ec[..],
            &["-keyout", "ca.key", "-out", "ca.crt", "-days", "30"][..],
            &["-subj", "/CN=pgharbor test CA"][..],
        ]
        .concat(),
        [
            &["req", "-new", "-config", "openssl.cnf"][..],
            &ec[..],
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ][..],
        ]
        .concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "30",
            "-extfile",
            "openssl.cnf",
            "-extensions",
            "v3_server",
        ],
    ];
    for args in steps {
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .expect("run openssl (is the openssl CLI installed?)");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
