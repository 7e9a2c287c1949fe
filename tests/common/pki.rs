//! A test PKI for backend TLS made with the openssl CLI: a CA, a server
//! certificate that names only `db.pgharbor.test` (so its name differs from
//! the 127.0.0.1 it is reached at), a client certificate for `cert_user`
//! (plain and passphrase-encrypted keys), and CRLs before and after the
//! server certificate is revoked (a file, and a directory prepared with
//! `openssl rehash`). In a temp dir removed on drop.
//!
//! [`ClientPki`] is the front-end variant, for client certificates toward
//! pgharbor: a client CA, another CA, certificates signed by each, and one
//! revoked by the client CA's CRL (a file, and a rehashed directory).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::util::unique_temp_dir;

/// The only name in the server certificate.
pub const SERVER_NAME: &str = "db.pgharbor.test";
/// The role the client certificate is for (its CN).
pub const CERT_USER: &str = "cert_user";
/// The passphrase of `client_enc.key`.
pub const KEY_PASSWORD: &str = "key-pass-phrase";

pub struct Pki {
    pub dir: PathBuf,
}

/// A fresh directory set up for `openssl ca` (its config, index and CRL
/// number), for a CA whose files are `ca.crt` and `ca.key`.
fn ca_dir(label: &str) -> PathBuf {
    let dir = unique_temp_dir(label);
    std::fs::write(
        dir.join("ca.cnf"),
        "[ca]\ndefault_ca = testca\n\
         [testca]\ndatabase = index.txt\ncrlnumber = crlnumber\n\
         default_md = sha256\ndefault_crl_days = 30\n\
         certificate = ca.crt\nprivate_key = ca.key\n",
    )
    .expect("write ca.cnf");
    std::fs::write(dir.join("index.txt"), "").expect("index.txt");
    std::fs::write(dir.join("crlnumber"), "01\n").expect("crlnumber");
    dir
}

impl Pki {
    pub fn generate() -> Pki {
        let dir = ca_dir("pki");
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
        let steps = [
            format!(
                "req -x509 {ec} -keyout ca.key -out ca.crt -days 30 -subj /CN=pgharbor-test-CA \
                 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
            ),
            format!("req -new {ec} -keyout server.key -out server.csr -subj /CN={SERVER_NAME}"),
            "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
             -days 30 -extfile server.ext"
                .to_string(),
            format!("req -new {ec} -keyout client.key -out client.csr -subj /CN={CERT_USER}"),
            "x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 30"
                .to_string(),
            format!("pkey -in client.key -aes256 -passout pass:{KEY_PASSWORD} -out client_enc.key"),
            "ca -config ca.cnf -gencrl -out empty.crl".to_string(),
            "ca -config ca.cnf -revoke server.crt".to_string(),
            "ca -config ca.cnf -gencrl -out revoked.crl".to_string(),
        ];
        std::fs::write(
            dir.join("server.ext"),
            format!("subjectAltName=DNS:{SERVER_NAME}\nbasicConstraints=CA:FALSE\n"),
        )
        .expect("server.ext");
        for step in &steps {
            openssl(&dir, &step.split_whitespace().collect::<Vec<_>>());
        }
        std::fs::create_dir(dir.join("crldir")).expect("mkdir crldir");
        std::fs::copy(dir.join("revoked.crl"), dir.join("crldir/revoked.crl")).expect("copy crl");
        openssl(&dir, &["rehash", "crldir"]);
        use std::os::unix::fs::PermissionsExt;
        for key in ["ca.key", "server.key", "client.key", "client_enc.key"] {
            std::fs::set_permissions(dir.join(key), std::fs::Permissions::from_mode(0o600))
                .expect("chmod key");
        }
        Pki { dir }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

/// Copies the CA and the server certificate of the PKI in `pki_dir` into a
/// cluster's certs dir (for [`super::pg::Custom::certs`]).
pub fn install_server(pki_dir: &Path, certs: &Path) {
    for f in ["ca.crt", "ca.key", "server.crt", "server.key"] {
        std::fs::copy(pki_dir.join(f), certs.join(f)).expect("copy certificate");
    }
}

/// The CN of [`ClientPki`]'s `mapped` certificate: not a user name, but
/// mapped to `trust_user` by `certmap /^(.*)@example\.com$ \1`.
pub const MAPPED_CN: &str = "trust_user@example.com";

/// Client certificates toward pgharbor, each `NAME.crt` with `NAME.key`
/// (mode 0600): `trust` (CN trust_user) and `scram` (CN scram_user) and
/// `mapped` (CN [`MAPPED_CN`]) signed by `ca.crt`; `other` (CN trust_user)
/// signed by `other_ca.crt`; `revoked` (CN trust_user) signed by `ca.crt`
/// and listed in `ca.crl` and in the rehashed `crldir/`.
pub struct ClientPki {
    pub dir: PathBuf,
}

impl ClientPki {
    pub fn generate() -> ClientPki {
        let dir = ca_dir("client-pki");
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
        let ca_ext = "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign";
        let mut steps = vec![
            format!("req -x509 {ec} -keyout ca.key -out ca.crt -days 30 -subj /CN=pgharbor-client-CA {ca_ext}"),
            format!("req -x509 {ec} -keyout other_ca.key -out other_ca.crt -days 30 -subj /CN=pgharbor-other-CA {ca_ext}"),
        ];
        for (name, cn, ca) in [
            ("trust", "trust_user", "ca"),
            ("scram", "scram_user", "ca"),
            ("mapped", MAPPED_CN, "ca"),
            ("other", "trust_user", "other_ca"),
            ("revoked", "trust_user", "ca"),
        ] {
            steps.push(format!(
                "req -new {ec} -keyout {name}.key -out {name}.csr -subj /CN={cn}"
            ));
            steps.push(format!(
                "x509 -req -in {name}.csr -CA {ca}.crt -CAkey {ca}.key -CAcreateserial -out {name}.crt -days 30"
            ));
        }
        steps.push("ca -config ca.cnf -revoke revoked.crt".to_string());
        steps.push("ca -config ca.cnf -gencrl -out ca.crl".to_string());
        for step in &steps {
            openssl(&dir, &step.split_whitespace().collect::<Vec<_>>());
        }
        std::fs::create_dir(dir.join("crldir")).expect("mkdir crldir");
        std::fs::copy(dir.join("ca.crl"), dir.join("crldir/ca.crl")).expect("copy crl");
        openssl(&dir, &["rehash", "crldir"]);
        use std::os::unix::fs::PermissionsExt;
        for key in [
            "ca", "other_ca", "trust", "scram", "mapped", "other", "revoked",
        ] {
            let path = dir.join(format!("{key}.key"));
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .expect("chmod key");
        }
        ClientPki { dir }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

impl Drop for ClientPki {
    fn drop(&mut self) {
        if std::env::var_os("PGHARBOR_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Pki {
    fn drop(&mut self) {
        if std::env::var_os("PGHARBOR_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
