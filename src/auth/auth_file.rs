//! The auth file: PgBouncer's `userlist.txt` format, one `"user" "secret"`
//! per line, where the secret is a plaintext password, an md5 hash or a
//! SCRAM-SHA-256 secret copied from `pg_authid`.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::secret::{ScramSecret, Secret, SCRAM_PREFIX};

/// PgBouncer's limits (MAX_USERNAME, MAX_PASSWORD), so a file PgBouncer
/// accepts is accepted here and a runaway line is not.
const MAX_USER_LEN: usize = 128;
const MAX_SECRET_LEN: usize = 2048;

/// Why the auth file could not be loaded; never contains a secret.
#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    /// The file could not be read.
    #[error("cannot read auth file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is malformed; `line` is 1-based.
    #[error("auth file line {line}: {reason}")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// What is wrong, in words that never quote the secret.
        reason: String,
    },
    /// A user is listed on two lines.
    #[error("auth file lines {first} and {again}: user \"{user}\" is listed twice")]
    Duplicate {
        /// The user.
        user: String,
        /// 1-based line of the first listing.
        first: usize,
        /// 1-based line of the second.
        again: usize,
    },
}

/// The users and secrets of an auth file.
#[derive(Default)]
pub struct AuthFile {
    users: foldhash::HashMap<String, Secret>,
}

/// One user line of an auth file, checked but with its secret still text.
pub struct Entry {
    /// 1-based line number.
    pub line: usize,
    /// The user name.
    pub user: String,
    secret: String,
}

impl AuthFile {
    /// Checks userlist.txt text without deriving anything: the syntax of
    /// every line, the form of SCRAM secrets, and that no user is listed
    /// twice. Cheap, so `pgharbor check` and start-up run it before
    /// [`AuthFile::parse`], which refuses exactly what this refuses.
    pub fn scan(text: &str) -> Result<Vec<Entry>, AuthFileError> {
        let mut entries: Vec<Entry> = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (index, line) in text.lines().enumerate() {
            let line_no = index + 1;
            let syntax = |reason: String| AuthFileError::Syntax {
                line: line_no,
                reason,
            };
            let Some((user, secret)) = parse_line(line).map_err(|r| syntax(r.to_string()))? else {
                continue;
            };
            if secret.starts_with(SCRAM_PREFIX) {
                ScramSecret::parse(&secret).map_err(|e| syntax(format!("user \"{user}\": {e}")))?;
            }
            // PgBouncer lets the last line win; two secrets for one user is
            // almost always an edit that went wrong, and which one logins
            // check should not depend on line order.
            if let Some(first) = seen.insert(user.clone(), line_no) {
                return Err(AuthFileError::Duplicate {
                    user,
                    first,
                    again: line_no,
                });
            }
            entries.push(Entry {
                line: line_no,
                user,
                secret,
            });
        }
        Ok(entries)
    }

    /// Parses userlist.txt text. Plaintext passwords run PBKDF2 once each
    /// (see [`Secret::Plain`]), so call this off the async executor.
    pub fn parse(text: &str) -> Result<AuthFile, AuthFileError> {
        let mut users = foldhash::HashMap::default();
        for entry in AuthFile::scan(text)? {
            let secret = Secret::parse(&entry.secret).map_err(|e| AuthFileError::Syntax {
                line: entry.line,
                reason: format!("user \"{}\": {e}", entry.user),
            })?;
            users.insert(entry.user, secret);
        }
        Ok(AuthFile { users })
    }

    /// Reads the file at `path` and [`AuthFile::scan`]s it.
    pub fn scan_file(path: impl AsRef<Path>) -> Result<Vec<Entry>, AuthFileError> {
        AuthFile::scan(&read(path.as_ref())?)
    }

    /// Reads and parses the file at `path` (blocking I/O and PBKDF2: use spawn_blocking).
    pub fn load(path: impl AsRef<Path>) -> Result<AuthFile, AuthFileError> {
        AuthFile::parse(&read(path.as_ref())?)
    }

    /// The secret for `user`, if the file lists it.
    pub fn get(&self, user: &str) -> Option<&Secret> {
        self.users.get(user)
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// True when the file lists no user.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// The user names, in no particular order.
    pub fn users(&self) -> impl Iterator<Item = &str> {
        self.users.keys().map(String::as_str)
    }
}

impl fmt::Debug for AuthFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // User names are not secret, but listing thousands helps no one.
        f.debug_struct("AuthFile")
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<String, AuthFileError> {
    std::fs::read_to_string(path).map_err(|source| AuthFileError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// One line: `Ok(None)` for blank and comment lines, else the two unquoted
/// fields. Anything after the second field is ignored, as PgBouncer does.
fn parse_line(line: &str) -> Result<Option<(String, String)>, &'static str> {
    let rest = line.trim_start();
    if rest.is_empty() || rest.starts_with(';') || rest.starts_with('#') {
        return Ok(None);
    }
    let (user, rest) = quoted_field(rest).ok_or("expected a double-quoted user name")?;
    let (user, rest) = match user {
        Field::Complete(user) => (user, rest),
        Field::Unterminated => return Err("unterminated quote in user name"),
    };
    if user.is_empty() {
        return Err("empty user name");
    }
    if user.len() > MAX_USER_LEN {
        return Err("user name longer than 128 bytes");
    }
    let rest = rest.trim_start();
    if rest.is_empty() {
        return Err("missing secret after the user name");
    }
    match quoted_field(rest) {
        None => Err("expected a double-quoted secret after the user name"),
        Some((Field::Unterminated, _)) => Err("unterminated quote in secret"),
        Some((Field::Complete(secret), _)) if secret.len() > MAX_SECRET_LEN => {
            Err("secret longer than 2048 bytes")
        }
        Some((Field::Complete(secret), _)) => Ok(Some((user, secret))),
    }
}

enum Field {
    Complete(String),
    Unterminated,
}

/// Reads a `"..."` field at the start of `text`, where `""` stands for one
/// quote; returns the unquoted value and the text after the closing quote.
fn quoted_field(text: &str) -> Option<(Field, &str)> {
    let body = text.strip_prefix('"')?;
    let mut value = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        if c != '"' {
            value.push(c);
            continue;
        }
        if body[i + 1..].starts_with('"') {
            value.push('"');
            chars.next();
            continue;
        }
        return Some((Field::Complete(value), &body[i + 1..]));
    }
    Some((Field::Unterminated, ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::secret::{md5_password_hash, ScramSecret};

    #[test]
    fn parses_pgbouncer_userlist() {
        let scram = ScramSecret::generate("s3cret");
        let md5 = md5_password_hash("bob", "pw");
        let text = format!(
            "; PgBouncer comment\n\
             # another comment\n\
             \n\
             \"alice\" \"plain\"\"pass\" trailing fields ignored\n\
             \t\"bob\"\t\"{md5}\"\n\
             \"carol\" \"{}\"\r\n\
             \"d\"\"q\" \"x\"\n",
            scram.to_pg_format()
        );
        let file = AuthFile::parse(&text).unwrap();
        assert_eq!(file.len(), 4);
        assert!(!file.is_empty());
        let Some(Secret::Plain { password, .. }) = file.get("alice") else {
            panic!("alice should have a plaintext password");
        };
        assert_eq!(password, "plain\"pass");
        assert!(matches!(file.get("bob"), Some(Secret::Md5 { hash }) if *hash == md5));
        assert!(matches!(file.get("carol"), Some(Secret::Scram(s)) if *s == scram));
        assert!(file.get("d\"q").is_some());
        assert!(file.get("nobody").is_none());
        assert!(!format!("{file:?}").contains("plain"));
    }

    #[test]
    fn errors_name_the_line_and_hide_the_secret() {
        let good = "\"ok\" \"fine\"\n";
        let cases = [
            ("\"u\" \"hunter2", "unterminated quote in secret"),
            ("\"u hunter2", "unterminated quote in user name"),
            ("\"u\"", "missing secret"),
            ("\"u\"   ", "missing secret"),
            ("u \"hunter2\"", "expected a double-quoted user name"),
            ("\"u\" hunter2", "expected a double-quoted secret"),
            ("\"\" \"hunter2\"", "empty user name"),
            (
                "\"u\" \"SCRAM-SHA-256$4096:aHVudGVyMg==$hunter2:hunter2\"",
                "invalid SCRAM secret",
            ),
            ("\"u\" \"SCRAM-SHA-256$hunter2\"", "invalid SCRAM secret"),
        ];
        for (line, reason) in cases {
            let text = format!("{good}\n{line}\n{good}");
            let err = AuthFile::parse(&text).unwrap_err();
            let message = err.to_string();
            assert!(
                matches!(err, AuthFileError::Syntax { line: 3, .. }),
                "{message}"
            );
            assert!(message.starts_with("auth file line 3: "), "{message}");
            assert!(message.contains(reason), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
            assert!(!message.contains("aHVudGVyMg"), "{message}");
        }
        let long = format!("\"u\" \"{}\"", "x".repeat(MAX_SECRET_LEN + 1));
        assert!(AuthFile::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("longer"));
    }

    #[test]
    fn a_user_listed_twice_is_refused_naming_both_lines() {
        let text = "\"a\" \"x\"\n; comment\n\"b\" \"y\"\n\"a\" \"hunter2\"\n";
        for err in [
            AuthFile::scan(text).err().unwrap(),
            AuthFile::parse(text).err().unwrap(),
        ] {
            let message = err.to_string();
            assert_eq!(
                message, "auth file lines 1 and 4: user \"a\" is listed twice",
                "{message}"
            );
        }
        let entries = AuthFile::scan("\"a\" \"x\"\n\n\"b\" \"y\"\n").unwrap();
        let lines: Vec<_> = entries.iter().map(|e| (e.line, e.user.as_str())).collect();
        assert_eq!(lines, [(1, "a"), (3, "b")]);
    }

    #[test]
    fn load_reads_a_file_and_reports_missing_ones() {
        let dir = std::env::temp_dir().join(format!("pgharbor-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("userlist.txt");
        std::fs::write(&path, "\"u\" \"md5d41d8cd98f00b204e9800998ecf8427e\"\n").unwrap();
        assert_eq!(AuthFile::load(&path).unwrap().len(), 1);
        std::fs::remove_file(&path).unwrap();
        let err = AuthFile::load(&path).unwrap_err();
        assert!(matches!(err, AuthFileError::Io { .. }));
        assert!(err.to_string().contains("userlist.txt"));
        std::fs::remove_dir(&dir).unwrap();
    }
}
