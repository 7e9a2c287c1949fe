//! What start-up refuses, found before it starts. `pgharbor check` and the
//! binary's start-up both call [`run`], so one cannot accept what the other
//! refuses; a reload loads the same files through the same loaders
//! ([`crate::tls::build_acceptor`], [`crate::tls::check_databases`],
//! [`AuthFile::scan`]) and so refuses the same things. What only a running
//! pooler meets (a port in use, a server that is down) is left to start-up.
//!
//! An admin user missing from the auth file is a warning, not an error:
//! the pooler serves every other client, and the user can be added and
//! reloaded without a restart.

use std::fmt;

use crate::auth::AuthFile;
use crate::config::{AuthMethod, Config, Severity};
use crate::tls;

/// One thing wrong (or unwise) with a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Warning (start anyway) or error (refuse to start).
    pub severity: Severity,
    /// What is wrong, beginning with the key that names it.
    pub message: String,
}

impl Finding {
    /// True for what start-up refuses.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    fn error(message: impl fmt::Display) -> Finding {
        Finding {
            severity: Severity::Error,
            message: message.to_string(),
        }
    }

    fn warning(message: impl fmt::Display) -> Finding {
        Finding {
            severity: Severity::Warning,
            message: message.to_string(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{level}: {}", self.message)
    }
}

/// Everything wrong with `config` and the files it names, warnings
/// included, in a stable order. Reads files and builds the TLS contexts;
/// no network.
pub fn run(config: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut unreadable = Vec::new();
    for p in config.check_files() {
        if p.is_error() {
            unreadable.push(p.key.clone());
        }
        out.push(Finding {
            severity: p.severity,
            message: format!("{}: {}", p.key, p.message),
        });
    }
    let tls_files_read = !unreadable
        .iter()
        .any(|k| k == "tls.cert_file" || k == "tls.key_file");
    if tls_files_read {
        if let Err(e) = tls::build_acceptor(&config.tls) {
            out.push(Finding::error(e));
        }
    }
    out.extend(
        tls::expiry_warnings(config)
            .into_iter()
            .map(Finding::warning),
    );
    if let Err(e) = tls::check_databases(config) {
        out.push(Finding::error(e));
    }
    if !unreadable.iter().any(|k| k == "auth.auth_file") {
        auth_file(config, &mut out);
    }
    if let Some(hba) = &config.auth.hba_file {
        let ident = config.auth.ident_file.as_deref();
        match crate::auth::hba::Hba::load(hba, ident) {
            Ok(rules) => {
                if let Err(e) = tls::verify::check_hba(&rules, &config.tls) {
                    out.push(Finding::error(format_args!("auth.hba_file: {e}")));
                }
            }
            Err(e) => out.push(Finding::error(format_args!("auth.hba_file: {e}"))),
        }
    }
    if let Err(e) =
        tls::verify::load_client_cert_map(&config.tls, config.auth.ident_file.as_deref())
    {
        out.push(Finding::error(format_args!("auth.ident_file: {e}")));
    }
    if let Some(name) = &config.service.user {
        if let Err(e) = crate::service::privileges::lookup(name) {
            out.push(Finding::error(e));
        }
    }
    out
}

/// The auth file's lines, and whether every admin user is in it.
fn auth_file(config: &Config, out: &mut Vec<Finding>) {
    let Some(path) = &config.auth.auth_file else {
        return;
    };
    let entries = match AuthFile::scan_file(path) {
        Ok(e) => e,
        Err(e) => {
            out.push(Finding::error(format_args!("auth.auth_file: {e}")));
            return;
        }
    };
    if config.auth.method == AuthMethod::Trust {
        return;
    }
    for admin in &config.admin.users {
        if !entries.iter().any(|e| &e.user == admin) {
            out.push(Finding::warning(format_args!(
                "admin.users: \"{admin}\" is not in auth.auth_file ({}), so it cannot log in to the admin console",
                path.display()
            )));
        }
    }
}
