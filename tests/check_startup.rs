//! `pgharbor check` agrees with start-up (issue 14 item 5): on each bad
//! config both the real `check` and the real start-up refuse, with the same
//! error lines; on each unwise one both warn, in the same words, and start
//! anyway. The configs' backend is never reached, so no PostgreSQL is
//! needed.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use openssl::asn1::Asn1Time;
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::rsa::Rsa;
use openssl::x509::{X509Builder, X509NameBuilder};

use common::pooler::write_userlist;
use common::util::{free_port, kill, unique_temp_dir};
use common::wait::{wait_child, wait_until};

/// A config in a temp dir of its own (removed on drop).
struct Case {
    dir: PathBuf,
    tls: String,
    conninfo: String,
    userlist: String,
    admins: String,
    socket_dir: Option<PathBuf>,
    /// Appended to the config.
    extra: String,
}

impl Case {
    fn new(label: &str) -> Case {
        let dir = unique_temp_dir(&format!("check-startup-{label}"));
        std::fs::create_dir(dir.join("sock")).expect("mkdir sock");
        Case {
            dir,
            tls: String::new(),
            conninfo: "host=127.0.0.1 port=1 dbname=app sslmode=disable".into(),
            userlist: "\"alice\" \"secret\"\n\"ops\" \"secret\"\n".into(),
            admins: "[\"ops\"]".into(),
            socket_dir: None,
            extra: String::new(),
        }
    }

    /// Writes the config and userlist; returns the config's path.
    fn write(&self) -> PathBuf {
        let sock = self.socket_dir.clone().unwrap_or(self.dir.join("sock"));
        let text = format!(
            "[listen]\naddresses = [\"127.0.0.1\"]\nport = {}\nunix_socket_dir = \"{}\"\n\n\
             [tls]\n{}\n\
             [auth]\nmethod = \"scram-sha-256\"\nauth_file = \"userlist.txt\"\n\n\
             [admin]\nusers = {}\n\n\
             [pool]\n# Within the suite's own ulimit -n, or start-up warns.\nmax_client_conn = 100\n\n\
             [databases.app]\nconninfo = \"{}\"\n{}",
            free_port(),
            sock.display(),
            self.tls,
            self.admins,
            self.conninfo,
            self.extra
        );
        let path = self.dir.join("pgharbor.toml");
        std::fs::write(&path, text).expect("write config");
        let userlist = self.dir.join("userlist.txt");
        if !userlist.exists() {
            write_userlist(&userlist, &self.userlist);
        }
        path
    }

    /// A self-signed certificate and its key (mode 0600), valid from
    /// `from` to `to` days from now.
    fn cert(&self, name: &str, from: i64, to: i64) -> (PathBuf, PathBuf) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let at = |days: i64| Asn1Time::from_unix(now + days * 86_400).unwrap();
        let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let mut subject = X509NameBuilder::new().unwrap();
        subject.append_entry_by_text("CN", "localhost").unwrap();
        let subject = subject.build();
        let mut b = X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&subject).unwrap();
        b.set_issuer_name(&subject).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&at(from)).unwrap();
        b.set_not_after(&at(to)).unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        let cert = self.dir.join(format!("{name}.crt"));
        let key_path = self.dir.join(format!("{name}.key"));
        std::fs::write(&cert, b.build().to_pem().unwrap()).unwrap();
        std::fs::write(&key_path, key.private_key_to_pem_pkcs8().unwrap()).unwrap();
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
        (cert, key_path)
    }

    fn tls_pair(&mut self, cert: &Path, key: &Path) {
        self.tls = format!(
            "cert_file = \"{}\"\nkey_file = \"{}\"\nsslmode = \"prefer\"\n",
            cert.display(),
            key.display()
        );
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `pgharbor check`: exit code and stderr + stdout.
fn check(config: &Path) -> (i32, String) {
    let out = Command::new(common::Pooler::binary())
        .args(["check", "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .output()
        .expect("run pgharbor check");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    (out.status.code().unwrap_or(-1), text)
}

/// Starts pgharbor on `config`: `Err(log)` when it exits by itself (a
/// refused start), `Ok(log)` once it has started (it is then stopped).
fn start(config: &Path) -> Result<String, String> {
    let log = config.with_file_name("start.log");
    let file = std::fs::File::create(&log).expect("create log");
    let mut child = Command::new(common::Pooler::binary())
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("dup log"))
        .stderr(file)
        .spawn()
        .expect("spawn pgharbor");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let mut exited = None;
    let settled = wait_until(Duration::from_secs(20), || {
        exited = child.try_wait().ok().flatten();
        exited.is_some() || read().contains("pgharbor started")
    });
    assert!(settled, "pgharbor neither started nor exited:\n{}", read());
    if let Some(status) = exited {
        assert!(!status.success(), "start-up exited 0:\n{}", read());
        return Err(read());
    }
    kill(child.id(), libc::SIGTERM);
    if wait_child(&mut child, Duration::from_secs(10)).is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(read())
}

/// The `pgharbor: error: ...` lines of an output.
fn errors(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("pgharbor: error: "))
        .map(str::to_string)
        .collect()
}

/// Both refuse, with the same error lines, each containing every word of `words`.
fn both_refuse(what: &str, case: &Case, words: &[&str]) {
    let config = case.write();
    let (code, out) = check(&config);
    assert_ne!(code, 0, "{what}: check accepted:\n{out}");
    let from_check = errors(&out);
    let log = start(&config).expect_err(&format!("{what}: start-up accepted"));
    let from_start = errors(&log);
    assert!(!from_check.is_empty(), "{what}: no error line:\n{out}");
    assert_eq!(
        from_check, from_start,
        "{what}: check and start-up disagree\ncheck:\n{out}\nstart-up:\n{log}"
    );
    for word in words {
        assert!(
            from_check.iter().any(|l| l.contains(word)),
            "{what}: no error names {word:?}:\n{out}"
        );
    }
    // OpenSSL's internals (function names, source files) help no one.
    assert!(
        !out.contains(".c:") && !out.contains("BIO_"),
        "{what}: OpenSSL internals in the message:\n{out}"
    );
}

/// Both warn with a line containing every word of `words`, and go on.
fn both_warn(what: &str, case: &Case, words: &[&str]) {
    let config = case.write();
    let (code, out) = check(&config);
    assert_eq!(code, 0, "{what}: check refused:\n{out}");
    let warning = out
        .lines()
        .filter_map(|l| l.strip_prefix("pgharbor: warning: "))
        .find(|l| words.iter().all(|w| l.contains(w)))
        .unwrap_or_else(|| panic!("{what}: no warning with {words:?}:\n{out}"));
    let log = start(&config).unwrap_or_else(|log| panic!("{what}: start-up refused:\n{log}"));
    let line = log
        .lines()
        .find(|l| l.contains(warning))
        .unwrap_or_else(|| panic!("{what}: start-up did not log {warning:?}:\n{log}"));
    assert!(line.contains("WARN"), "{what}: not at WARN: {line}");
}

#[test]
fn a_good_config_passes_both_without_warnings() {
    let mut case = Case::new("good");
    let (cert, key) = case.cert("server", -1, 365);
    case.tls_pair(&cert, &key);
    let config = case.write();
    let (code, out) = check(&config);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("warning"), "{out}");
    let log = start(&config).unwrap_or_else(|log| panic!("refused:\n{log}"));
    assert!(!log.contains("WARN"), "{log}");
}

#[test]
fn backend_root_certificates_that_cannot_work_are_refused_by_both() {
    let mut case = Case::new("rootcert");
    let missing = case.dir.join("missing-ca.pem");
    case.conninfo = format!(
        "host=127.0.0.1 port=1 dbname=app sslmode=require sslrootcert={}",
        missing.display()
    );
    both_refuse(
        "missing sslrootcert",
        &case,
        &["databases.app.conninfo", "sslrootcert", "missing-ca.pem"],
    );
    let garbage = case.dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    case.conninfo = format!(
        "host=127.0.0.1 port=1 dbname=app sslmode=verify-ca sslrootcert={}",
        garbage.display()
    );
    both_refuse(
        "sslrootcert that holds no certificate",
        &case,
        &["databases.app.conninfo", "garbage.pem"],
    );
}

#[test]
fn certificates_out_of_their_dates_are_refused_by_both() {
    let mut case = Case::new("dates");
    let (cert, key) = case.cert("expired", -60, -1);
    case.tls_pair(&cert, &key);
    both_refuse(
        "expired tls.cert_file",
        &case,
        &["tls.cert_file", "expired"],
    );
    let (cert, key) = case.cert("future", 2, 365);
    case.tls_pair(&cert, &key);
    both_refuse(
        "tls.cert_file not yet valid",
        &case,
        &["tls.cert_file", "not valid before"],
    );
    let (good, _) = case.cert("good", -1, 365);
    let (_, other_key) = case.cert("other", -1, 365);
    case.tls_pair(&good, &other_key);
    both_refuse("key of another certificate", &case, &["does not match"]);

    let mut backend = Case::new("dates-backend");
    let (cert, key) = backend.cert("client", -60, -1);
    backend.conninfo = format!(
        "host=127.0.0.1 port=1 dbname=app sslmode=require sslcert={} sslkey={}",
        cert.display(),
        key.display()
    );
    both_refuse(
        "expired backend sslcert",
        &backend,
        &["databases.app.conninfo", "sslcert", "expired"],
    );
}

#[test]
fn a_certificate_expiring_within_30_days_is_a_warning_in_both() {
    let mut case = Case::new("soon");
    let (cert, key) = case.cert("soon", -1, 10);
    case.tls_pair(&cert, &key);
    both_warn(
        "expiring tls.cert_file",
        &case,
        &["tls.cert_file", "expires in"],
    );
}

#[test]
fn auth_file_problems() {
    let mut case = Case::new("dup");
    case.userlist = "\"alice\" \"a\"\n\"ops\" \"b\"\n\"alice\" \"c\"\n".into();
    both_refuse(
        "a user listed twice",
        &case,
        &["auth.auth_file", "lines 1 and 3", "\"alice\""],
    );

    let case = Case::new("open");
    case.write();
    let userlist = case.dir.join("userlist.txt");
    std::fs::set_permissions(&userlist, std::fs::Permissions::from_mode(0o644)).unwrap();
    both_warn(
        "world-readable auth file",
        &case,
        &["auth.auth_file", "0644"],
    );

    let mut case = Case::new("admin");
    case.admins = "[\"ops\", \"root_of_all\"]".into();
    both_warn(
        "admin user missing from the auth file",
        &case,
        &["admin.users", "root_of_all"],
    );
}

#[test]
fn a_socket_directory_that_cannot_hold_the_socket_is_refused_by_both() {
    let mut case = Case::new("sock");
    case.socket_dir = Some(case.dir.join("no-such-dir"));
    both_refuse(
        "missing unix_socket_dir",
        &case,
        &["listen.unix_socket_dir", "no-such-dir"],
    );
    // Root may write anywhere permission bits allow nothing; /proc takes no
    // new files from anyone.
    // SAFETY: geteuid cannot fail.
    let unwritable = if unsafe { libc::geteuid() } == 0 {
        PathBuf::from("/proc")
    } else {
        let d = case.dir.join("read-only");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o555)).unwrap();
        d
    };
    case.socket_dir = Some(unwritable);
    both_refuse(
        "unwritable unix_socket_dir",
        &case,
        &["listen.unix_socket_dir", "cannot create the socket file"],
    );
}

#[test]
fn a_service_user_that_does_not_exist_is_refused_by_both() {
    let mut case = Case::new("user");
    case.extra = "\n[service]\nuser = \"no_such_user_here\"\n".into();
    both_refuse(
        "unknown service.user",
        &case,
        &["service.user", "no_such_user_here"],
    );
}
