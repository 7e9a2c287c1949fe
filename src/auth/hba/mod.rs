//! `auth.hba_file` and `auth.ident_file`: PostgreSQL's pg_hba.conf and
//! pg_ident.conf formats, parsed into typed rules and matched first-match,
//! as PostgreSQL's `src/backend/libpq/hba.c` does. Pure except for reading
//! the files (through [`Files`], so tests use [`MemoryFiles`]) and listing
//! the machine's interfaces for `samehost`/`samenet` (through
//! [`Interfaces`], so tests pass fixed ones).
//!
//! # What is PostgreSQL's, and what is refused
//!
//! Accepted as PostgreSQL 16 accepts them:
//!
//! - the lexical rules ([`tokens`]): `#` comments, double quotes (`""` is a
//!   quote inside quotes, and a quoted keyword is a plain name),
//!   comma-separated lists, backslash line continuation, `@file` inclusion
//!   relative to the including file, and the `include`, `include_if_exists`
//!   and `include_dir` directives, nested at most 10 deep (an include loop
//!   ends there with PostgreSQL's "maximum nesting depth exceeded");
//! - connection types `local`, `host`, `hostssl`, `hostnossl`;
//! - database keywords `all`, `sameuser`, `replication`; user keyword `all`;
//!   names; regular expressions written `/regex` (PostgreSQL 16), run with
//!   the `regex` crate, which is close to but not PostgreSQL's ARE flavour
//!   (no back-references or look-around; leftmost-first captures);
//! - addresses `all`, `samehost`, `samenet`, `ADDR/BITS`, `ADDR MASK`,
//!   compared within one address family only, as PostgreSQL does (an IPv4
//!   client seen on an IPv6 socket as `::ffff:a.b.c.d` does not match an
//!   IPv4 range: the caller should pass what the socket reports);
//! - methods `trust`, `reject`, `md5`, `scram-sha-256`, `password`, `peer`
//!   (local only; `ident` on a `local` line means `peer`, as in PostgreSQL)
//!   and `cert` (hostssl only, implying `clientcert=verify-full`);
//! - options `clientcert=verify-ca|verify-full` (hostssl only) and
//!   `map=NAME` (peer and cert only), whose map must exist in the ident file.
//!
//! Refused with an error naming the file and line, because pgharbor cannot
//! honour them and a rule that silently never matched could let a later,
//! looser rule admit someone:
//!
//! - `hostgssenc` / `hostnogssenc` (pgharbor answers `N` to GSSENCRequest);
//! - role membership: `+group` users and the `samerole`/`samegroup`
//!   database keywords (pgharbor would have to query PostgreSQL for it);
//! - host names in the address field (they need reverse and forward DNS);
//! - methods `ident` (on TCP), `gss`, `sspi`, `pam`, `bsd`, `ldap`,
//!   `radius`, and their options; the `clientname` option;
//! - an unterminated double quote (PostgreSQL silently takes the rest of
//!   the line).
//!
//! `replication` never matches: pgharbor does not pool replication
//! connections, so it is what PostgreSQL does for an ordinary connection.
//!
//! # Matching
//!
//! [`Hba::decide`] returns the first rule whose connection type, address,
//! database and user match, or a [`HbaRefusal`] carrying PostgreSQL's own
//! FATAL 28000 text: `no pg_hba.conf entry for host "...", user "...",
//! database "...", no encryption` for no rule, `pg_hba.conf rejects
//! connection ...` for a `reject` rule. [`Hba::usermap_allows`] applies a
//! rule's `map=` as PostgreSQL's `check_usermap` does.

mod ident;
mod matcher;
mod os_names;
mod parse;
mod rule;
pub mod tokens;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_errors;
#[cfg(test)]
mod tests_fuzz;
#[cfg(test)]
mod tests_ident;
#[cfg(test)]
mod tests_tokens;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use ident::{ident_allows, IdentLine, IdentMaps, IdentPgUser, IdentSystemUser};
pub use matcher::{ConnFacts, HbaRefusal, Interface, Interfaces, SystemInterfaces, Transport};
pub use os_names::OsNames;
pub use rule::{Address, ClientCert, ConnType, DatabaseMatch, Method, NameRegex, Rule, UserMatch};

/// A bad line (or a file that cannot be read), located as `pgharbor check`
/// reports it. `line` is 1-based; 0 means the file as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}", location(.file, *.line), .message)]
pub struct HbaError {
    /// The file the bad line is in (an included file if it is there).
    pub file: PathBuf,
    /// 1-based line number, 0 for the whole file.
    pub line: usize,
    /// What is wrong, in PostgreSQL's words where it has them.
    pub message: String,
}

fn location(file: &Path, line: usize) -> String {
    match line {
        0 => format!("{}: ", file.display()),
        n => format!("{}:{n}: ", file.display()),
    }
}

impl HbaError {
    pub(crate) fn new(file: &Path, line: usize, message: impl Into<String>) -> HbaError {
        HbaError {
            file: file.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

/// Where the parser reads files from: the disk ([`DiskFiles`]) or, in
/// tests, memory ([`MemoryFiles`]).
pub trait Files {
    /// The whole text of `path`.
    fn read(&self, path: &Path) -> io::Result<String>;
    /// The `*.conf` files of `dir` not starting with `.`, sorted by name,
    /// as PostgreSQL's `include_dir` takes them.
    fn conf_files_in(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
}

/// The real file system (blocking reads: call from `spawn_blocking`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskFiles;

impl Files for DiskFiles {
    fn read(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn conf_files_in(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".conf") {
                continue;
            }
            if entry.file_type()?.is_dir() {
                continue;
            }
            found.push(entry.path());
        }
        found.sort();
        Ok(found)
    }
}

/// Files held in memory, for tests and for parsing a text that is not on
/// disk.
#[derive(Debug, Clone, Default)]
pub struct MemoryFiles(pub HashMap<PathBuf, String>);

impl MemoryFiles {
    /// Adds (or replaces) one file.
    pub fn with(mut self, path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        self.0.insert(path.into(), text.into());
        self
    }
}

impl Files for MemoryFiles {
    fn read(&self, path: &Path) -> io::Result<String> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn conf_files_in(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut found: Vec<PathBuf> = (self.0.keys())
            .filter(|p| p.parent() == Some(dir))
            .filter(|p| {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default();
                !name.starts_with('.') && name.ends_with(".conf")
            })
            .cloned()
            .collect();
        if found.is_empty() && !self.0.keys().any(|p| p.starts_with(dir)) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        found.sort();
        Ok(found)
    }
}

/// A parsed `auth.hba_file`, with its `auth.ident_file` if one is set, and
/// the source of interface addresses for `samehost`/`samenet`.
#[derive(Clone)]
pub struct Hba {
    rules: Vec<Rule>,
    ident: Option<IdentMaps>,
    interfaces: Arc<dyn Interfaces>,
    /// The OS user names peer logins looked up under these rules.
    os_names: Arc<OsNames>,
}

impl std::fmt::Debug for Hba {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hba")
            .field("rules", &self.rules)
            .field("ident", &self.ident)
            .finish_non_exhaustive()
    }
}

impl Hba {
    /// Reads and parses `hba_file` and, if given, `ident_file` from disk
    /// (blocking I/O). Any bad line fails the whole load, so a RELOAD can
    /// keep the rules it had.
    pub fn load(hba_file: &Path, ident_file: Option<&Path>) -> Result<Hba, HbaError> {
        Hba::load_from(&DiskFiles, hba_file, ident_file)
    }

    /// As [`Hba::load`], reading through `files`.
    pub fn load_from(
        files: &dyn Files,
        hba_file: &Path,
        ident_file: Option<&Path>,
    ) -> Result<Hba, HbaError> {
        let ident = match ident_file {
            Some(path) => Some(IdentMaps::load_from(files, path)?),
            None => None,
        };
        let lines = tokens::tokenize(files, hba_file)?;
        let rules = (lines.iter())
            .map(parse::parse_rule)
            .collect::<Result<Vec<_>, _>>()?;
        if rules.is_empty() {
            let message = format!(
                "configuration file \"{}\" contains no entries",
                hba_file.display()
            );
            return Err(HbaError::new(hba_file, 0, message));
        }
        for rule in &rules {
            check_map(rule, ident.as_ref(), ident_file)?;
        }
        Ok(Hba {
            rules,
            ident,
            interfaces: Arc::new(SystemInterfaces),
            os_names: Arc::default(),
        })
    }

    /// Replaces the source of interface addresses (tests pass fixed ones).
    pub fn with_interfaces(mut self, interfaces: Arc<dyn Interfaces>) -> Hba {
        self.interfaces = interfaces;
        self
    }

    /// The OS user names of peer logins' uids (see [`OsNames`]).
    pub fn os_names(&self) -> &OsNames {
        &self.os_names
    }

    /// The rules, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The ident maps, if an ident file was given.
    pub fn ident(&self) -> Option<&IdentMaps> {
        self.ident.as_ref()
    }

    /// Whether `system_user` may log in as `pg_user` under `map` (a rule's
    /// `map=`), as PostgreSQL's `check_usermap`: without a map the two
    /// names must be equal; with one, some line of that map must allow it.
    pub fn usermap_allows(&self, map: Option<&str>, system_user: &str, pg_user: &str) -> bool {
        match map {
            None | Some("") => system_user == pg_user,
            Some(map) => {
                (self.ident.as_ref()).is_some_and(|ident| ident.allows(map, system_user, pg_user))
            }
        }
    }
}

/// A rule's `map=` must name a map the ident file defines.
fn check_map(
    rule: &Rule,
    ident: Option<&IdentMaps>,
    ident_file: Option<&Path>,
) -> Result<(), HbaError> {
    let Some(map) = &rule.map else {
        return Ok(());
    };
    let message = match (ident, ident_file) {
        (Some(ident), _) if ident.contains(map) => return Ok(()),
        (Some(_), Some(path)) => format!(
            "ident map \"{map}\" is not defined in \"{}\"",
            path.display()
        ),
        _ => format!("authentication option \"map={map}\" needs auth.ident_file, which is not set"),
    };
    Err(HbaError::new(&rule.file, rule.line, message))
}
