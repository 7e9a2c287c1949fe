//! The auth file: PgBouncer's `userlist.txt` format, one `"user" "secret"`
//! per line, where the secret is a plaintext password, an md5 hash or a
//! SCRAM-SHA-256 secret copied from `pg_authid`.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::secret::Secret;

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
}

/// The users and secrets of an auth file.
#[derive(Default)]
pub struct AuthFile {
    users: HashMap<String, Secret>,
}

impl AuthFile {
    /// Parses userlist.txt text. Plaintext passwords run PBKDF2 once each
    /// (see [`Secret::Plain`]), so call this off the async executor.
    pub fn parse(text: &str) -> Result<AuthFile, AuthFileError> {
        let mut users = HashMap::new();
        for (index, line) in text.lines().enumerate() {
            let syntax = |reason: String| AuthFileError::Syntax {
                line: index + 1,
                reason,
            };
            let Some((user, secret)) = parse_line(line).map_err(|r| syntax(r.to_string()))? else {
                continue;
            };
            let secret =
                Secret::parse(&secret).map_err(|e| syntax(format!("user \"{user}\": {e}")))?;
            // A repeated user replaces the earlier line, as in PgBouncer.
            users.insert(user, secret);
        }
        Ok(AuthFile { users })
    }

    /// Reads and parses the file at `path` (blocking I/O and PBKDF2: use spawn_blocking).
    pub fn load(path: impl AsRef<Path>) -> Result<AuthFile, AuthFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| AuthFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        AuthFile::parse(&text)
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
