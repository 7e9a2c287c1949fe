//! Checks on the files a validated config names, for `pgharbor check` and
//! start-up: can they be opened, is the private key protected. The contents
//! are parsed where they are used (`tls`, `auth`), not here.

use std::fmt;
use std::fs::File;
use std::path::Path;

use super::Config;

/// How bad a [`FileProblem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The pooler can run, but something is unwise (e.g. key permissions).
    Warning,
    /// The pooler cannot start with this file as it is.
    Error,
}

/// One problem with a file named in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    /// Warning or error.
    pub severity: Severity,
    /// Dotted key naming the file, e.g. `tls.key_file`.
    pub key: String,
    /// What is wrong, with the path.
    pub message: String,
}

impl FileProblem {
    /// True for problems the pooler cannot start with.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{level}: {}: {}", self.key, self.message)
    }
}

pub(super) fn check(config: &Config) -> Vec<FileProblem> {
    let mut problems = Vec::new();
    if let Some(path) = &config.auth.auth_file {
        if readable(&mut problems, "auth.auth_file", path) {
            auth_file_permissions(&mut problems, path);
        }
    }
    if let Some(path) = &config.auth.hba_file {
        readable(&mut problems, "auth.hba_file", path);
    }
    if let Some(path) = &config.auth.ident_file {
        readable(&mut problems, "auth.ident_file", path);
    }
    if let Some(path) = &config.tls.cert_file {
        readable(&mut problems, "tls.cert_file", path);
    }
    if let Some(path) = &config.tls.key_file {
        if readable(&mut problems, "tls.key_file", path) {
            key_permissions(&mut problems, path);
        }
    }
    if let Some(dir) = &config.listen.unix_socket_dir {
        if let Err(message) = socket_dir_usable(dir, config.listen.port) {
            problems.push(FileProblem {
                severity: Severity::Error,
                key: "listen.unix_socket_dir".to_string(),
                message,
            });
        }
    }
    // A backend's sslrootcert is read (and judged) where its TLS is built,
    // and only if its sslmode uses it, as libpq does.
    problems
}

/// The socket file must be creatable in `dir`: tried with a file of our
/// own, since permission bits do not tell (root, ACLs, read-only mounts).
fn socket_dir_usable(dir: &Path, port: u16) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!("{} is not an existing directory", dir.display()));
    }
    let probe = dir.join(format!(
        ".s.PGSQL.{port}.pgharbor-check-{}",
        std::process::id()
    ));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot create the socket file in {}: {e}",
            dir.display()
        )),
    }
}

/// Opens `path` for reading; records an error and returns false if it cannot.
fn readable(problems: &mut Vec<FileProblem>, key: &str, path: &Path) -> bool {
    match File::open(path) {
        Ok(_) => true,
        Err(e) => {
            problems.push(FileProblem {
                severity: Severity::Error,
                key: key.to_string(),
                message: format!("cannot read {}: {e}", path.display()),
            });
            false
        }
    }
}

/// PostgreSQL refuses a server key that group or others can read; we warn.
#[cfg(unix)]
fn key_permissions(problems: &mut Vec<FileProblem>, path: &Path) {
    use std::os::unix::fs::PermissionsExt;

    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        problems.push(FileProblem {
            severity: Severity::Warning,
            key: "tls.key_file".to_string(),
            message: format!(
                "{} has mode {mode:04o}: group or others can access the private key (use chmod 0600)",
                path.display()
            ),
        });
    }
}

#[cfg(not(unix))]
fn key_permissions(_problems: &mut Vec<FileProblem>, _path: &Path) {}

/// Passwords and SCRAM secrets that any local user can read are as good as
/// published; group access is left alone (a service group may need it).
#[cfg(unix)]
fn auth_file_permissions(problems: &mut Vec<FileProblem>, path: &Path) {
    use std::os::unix::fs::PermissionsExt;

    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o004 != 0 {
        problems.push(FileProblem {
            severity: Severity::Warning,
            key: "auth.auth_file".to_string(),
            message: format!(
                "{} has mode {mode:04o}: every local user can read the secrets (use chmod 0600 or 0640)",
                path.display()
            ),
        });
    }
}

#[cfg(not(unix))]
fn auth_file_permissions(_problems: &mut Vec<FileProblem>, _path: &Path) {}

/// Tests that touch the file system: loading, file checks, the shipped configs.
#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::path::PathBuf;

    use super::super::{AuthMethod, ConfigError};
    use super::*;
    use crate::config::SslMode;
    use crate::test_dir::TempDir;

    const AUTH: &str = "[auth]\nauth_file = \"users.txt\"\n";

    #[test]
    fn load_reads_the_file_and_reports_io_errors() {
        let tmp = TempDir::new("config-load");
        let path = tmp.path().join("pgharbor.toml");
        std::fs::write(&path, AUTH).unwrap();
        let c = Config::load(&path).unwrap();
        assert_eq!(c.path, path);
        assert_eq!(c.auth.auth_file, Some(tmp.path().join("users.txt")));

        let missing = tmp.path().join("nope.toml");
        let e = Config::load(&missing).unwrap_err();
        assert!(matches!(e, ConfigError::Io { .. }));
        let msg = e.to_string();
        assert!(
            msg.starts_with("cannot read config file ") && msg.contains("nope.toml"),
            "{msg}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn check_files_reports_unreadable_files_and_open_keys() {
        use std::os::unix::fs::PermissionsExt;

        let tmp = TempDir::new("config-files");
        std::fs::write(tmp.path().join("users.txt"), "").unwrap();
        let users = tmp.path().join("users.txt");
        std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(tmp.path().join("server.crt"), "").unwrap();
        let key = tmp.path().join("server.key");
        std::fs::write(&key, "").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let text = "[listen]\nunix_socket_dir = \"sock\"\n[tls]\ncert_file = \"server.crt\"\nkey_file = \"server.key\"\n\
             [auth]\nauth_file = \"users.txt\"\n[databases.app]\nconninfo = \"sslrootcert=missing.pem\"\n";
        let c = Config::parse(text, &tmp.path().join("pgharbor.toml")).unwrap();
        let problems: Vec<String> = c.check_files().iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0].starts_with("warning: auth.auth_file: ") && problems[0].contains("0644"),
            "{problems:#?}"
        );
        assert!(
            problems[1].starts_with("warning: tls.key_file: ") && problems[1].contains("mode 0644")
        );
        assert!(problems[2].starts_with("error: listen.unix_socket_dir: "));

        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::create_dir(tmp.path().join("sock")).unwrap();
        std::fs::remove_file(tmp.path().join("users.txt")).unwrap();
        let problems = c.check_files();
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(problems.iter().all(FileProblem::is_error));
        assert_eq!(problems[0].key, "auth.auth_file");
        let left: Vec<_> = std::fs::read_dir(tmp.path().join("sock"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "the probe stayed behind: {left:?}");
    }

    #[test]
    fn shipped_configs_parse() {
        let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf");

        let full = Config::load(&conf.join("pgharbor.toml")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(full.auth.auth_file, Some(conf.join("userlist.txt")));
        assert_eq!(full.tls.loopbacksslmode, Some(SslMode::Prefer));
        assert_eq!(full.admin.users, ["admin"]);
        assert_eq!(full.databases.len(), 2);
        assert_eq!(full.databases["reports"].conninfo.sslmode, SslMode::Require);

        let min =
            Config::load(&conf.join("pgharbor-minimal.toml")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            min.listen.addresses,
            vec![IpAddr::from(Ipv4Addr::LOCALHOST)]
        );
        assert_eq!(
            min.listen.unix_socket_path(),
            Some(PathBuf::from("/tmp/.s.PGSQL.6432"))
        );
        assert_eq!(min.auth.method, AuthMethod::ScramSha256);
        assert_eq!(min.auth.auth_file, Some(conf.join("userlist.txt")));
        let app = &min.databases["app"].conninfo;
        assert_eq!(app.dbname.as_deref(), Some("app"));
        assert_eq!(
            app.first_host().socket_path(),
            Some(PathBuf::from("/var/run/postgresql/.s.PGSQL.5432"))
        );
    }
}
