//! PgBouncer's ini syntax: `[section]` headers, `key = value` lines, `;` and
//! `#` comment lines, `%include FILE`. Keys may be double-quoted (database
//! names with spaces); a value is the rest of the line, trimmed, with one
//! pair of surrounding double quotes removed.

use std::path::{Path, PathBuf};

use super::ImportError;

/// Nested `%include`s followed before the file is refused as a loop.
const MAX_INCLUDE_DEPTH: usize = 8;

/// One `key = value` line, with where it came from for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The section it appeared under, lower-cased (`pgbouncer`, `databases`, …).
    pub section: String,
    /// The key as written (database and user names keep their case).
    pub key: String,
    /// The value, trimmed.
    pub value: String,
    /// `file:line`, for messages.
    pub at: String,
}

/// Reads `path` and the files it includes, in order.
pub fn read(path: &Path) -> Result<Vec<Entry>, ImportError> {
    let mut out = Vec::new();
    let mut section = String::new();
    read_into(path, 0, &mut section, &mut out)?;
    Ok(out)
}

fn read_into(
    path: &Path,
    depth: usize,
    section: &mut String,
    out: &mut Vec<Entry>,
) -> Result<(), ImportError> {
    if depth > MAX_INCLUDE_DEPTH {
        return Err(ImportError::Syntax {
            at: path.display().to_string(),
            reason: format!("more than {MAX_INCLUDE_DEPTH} nested %include files"),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    for (n, raw) in text.lines().enumerate() {
        let at = format!("{}:{}", path.display(), n + 1);
        match parse_line(raw).map_err(|reason| ImportError::Syntax {
            at: at.clone(),
            reason,
        })? {
            Line::Blank => {}
            Line::Section(name) => *section = name.to_ascii_lowercase(),
            Line::Include(file) => {
                let file = resolve(path, file);
                read_into(&file, depth + 1, section, out)?;
            }
            Line::Pair(key, value) => out.push(Entry {
                section: section.clone(),
                key,
                value,
                at,
            }),
        }
    }
    Ok(())
}

/// Relative includes are read next to the including file, so an imported
/// tree does not depend on the directory the command runs in.
fn resolve(including: &Path, file: &str) -> PathBuf {
    let file = Path::new(file);
    match including.parent() {
        Some(dir) if file.is_relative() => dir.join(file),
        _ => file.to_path_buf(),
    }
}

/// What one line of the file is.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    Blank,
    Section(&'a str),
    Include(&'a str),
    Pair(String, String),
}

fn parse_line(raw: &str) -> Result<Line<'_>, String> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
        return Ok(Line::Blank);
    }
    if let Some(file) = line.strip_prefix("%include") {
        let file = file.trim();
        if file.is_empty() {
            return Err("%include without a file name".into());
        }
        return Ok(Line::Include(file));
    }
    if let Some(rest) = line.strip_prefix('[') {
        let name = rest
            .strip_suffix(']')
            .ok_or_else(|| format!("section header without \"]\": {line}"))?;
        return Ok(Line::Section(name.trim()));
    }
    let (key, value) = if let Some(quoted) = line.strip_prefix('"') {
        let end = quoted
            .find('"')
            .ok_or_else(|| "a quoted key that never ends".to_string())?;
        let rest = quoted[end + 1..].trim_start();
        let value = rest
            .strip_prefix('=')
            .ok_or_else(|| format!("missing \"=\" after \"{}\"", &quoted[..end]))?;
        (quoted[..end].to_string(), value)
    } else {
        let eq = line
            .find('=')
            .ok_or_else(|| format!("not a section, comment or key = value: {line}"))?;
        (line[..eq].trim().to_string(), &line[eq + 1..])
    };
    if key.is_empty() {
        return Err("\"=\" with no key before it".into());
    }
    Ok(Line::Pair(key, unquote(value.trim()).to_string()))
}

fn unquote(value: &str) -> &str {
    match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(inner) => inner,
        None => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(k: &str, v: &str) -> Line<'static> {
        Line::Pair(k.into(), v.into())
    }

    #[test]
    fn lines() {
        assert_eq!(parse_line("  ; comment"), Ok(Line::Blank));
        assert_eq!(parse_line("# comment"), Ok(Line::Blank));
        assert_eq!(parse_line(""), Ok(Line::Blank));
        assert_eq!(parse_line("[PgBouncer]"), Ok(Line::Section("PgBouncer")));
        assert_eq!(
            parse_line("listen_port=6432"),
            Ok(pair("listen_port", "6432"))
        );
        assert_eq!(
            parse_line("foo = host=a dbname='x y'  "),
            Ok(pair("foo", "host=a dbname='x y'"))
        );
        assert_eq!(
            parse_line("\"my db\" = host=a"),
            Ok(pair("my db", "host=a"))
        );
        assert_eq!(parse_line("* = host=b"), Ok(pair("*", "host=b")));
        assert_eq!(parse_line("admin_users ="), Ok(pair("admin_users", "")));
        assert_eq!(parse_line("x = \"quoted\""), Ok(pair("x", "quoted")));
        assert_eq!(
            parse_line("%include /etc/x.ini"),
            Ok(Line::Include("/etc/x.ini"))
        );
    }

    #[test]
    fn malformed_lines_are_errors_not_guesses() {
        for bad in [
            "[pgbouncer",
            "listen_port 6432",
            "= 5",
            "\"open = 1",
            "\"k\" 1",
            "%include",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn includes_are_followed_relative_to_the_including_file_and_loops_refused() {
        let dir = std::env::temp_dir().join(format!("pgharbor-ini-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let main = dir.join("main.ini");
        std::fs::write(&main, "[pgbouncer]\nlisten_port = 1\n%include more.ini\n").expect("write");
        std::fs::write(dir.join("more.ini"), "pool_mode = transaction\n").expect("write");
        let entries = read(&main).expect("read");
        let keys: Vec<_> = entries
            .iter()
            .map(|e| (e.section.as_str(), e.key.as_str()))
            .collect();
        assert_eq!(
            keys,
            [("pgbouncer", "listen_port"), ("pgbouncer", "pool_mode")]
        );
        assert!(entries[1].at.ends_with("more.ini:1"), "{}", entries[1].at);

        std::fs::write(dir.join("more.ini"), "%include main.ini\n").expect("write");
        let err = read(&main).expect_err("a loop");
        assert!(err.to_string().contains("nested"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
