//! The lexical layer of pg_hba.conf and pg_ident.conf, with PostgreSQL's
//! rules (`tokenize_auth_file`, `next_field_expand`, `next_token` in
//! hba.c):
//!
//! - A backslash at the end of a line joins the next line to it, before
//!   anything else, so a continued comment or quoted string goes on too.
//!   A line keeps the number of its first physical line.
//! - A line is a list of fields separated by blanks (space, tab, CR); a
//!   field is a list of tokens joined by commas with no blank before the
//!   comma (`a,b` and `a, b` are one field, `a ,b` two).
//! - An unquoted `#` ends the line. Double quotes protect blanks, commas
//!   and `#`; `""` inside quotes is one `"`. A token is *quoted* when it
//!   starts with a quote: then it is never a keyword (`"all"` is a role
//!   named all) and `"@x"` is not an inclusion.
//! - `@file` (more than the `@`) is replaced by every token of that file,
//!   resolved against the including file's directory.
//! - A line of exactly two fields whose first is `include`,
//!   `include_if_exists` or `include_dir` includes files in its place.
//!
//! Nesting (of `@` and of the directives) stops at [`MAX_DEPTH`].
//! Unlike PostgreSQL, an unterminated quote is an error.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Files, HbaError};

/// PostgreSQL's `CONF_FILE_MAX_DEPTH`.
pub const MAX_DEPTH: usize = 10;

/// One token as written, less its quotes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The text, dequoted.
    pub text: String,
    /// Whether it began with a double quote.
    pub quoted: bool,
}

impl Token {
    /// An unquoted token spelling `keyword`.
    pub fn is_keyword(&self, keyword: &str) -> bool {
        !self.quoted && self.text == keyword
    }
}

/// One logical line: where it starts and its non-empty fields.
#[derive(Debug, Clone)]
pub struct Line {
    /// The file it is in.
    pub file: Arc<Path>,
    /// The 1-based number of its first physical line.
    pub number: usize,
    /// Its fields, each a non-empty list of tokens.
    pub fields: Vec<Vec<Token>>,
}

impl Line {
    /// An error located at this line.
    pub fn error(&self, message: impl Into<String>) -> HbaError {
        HbaError::new(&self.file, self.number, message)
    }
}

/// Reads `path` and every file it includes, into logical lines in order.
pub fn tokenize(files: &dyn Files, path: &Path) -> Result<Vec<Line>, HbaError> {
    let mut out = Vec::new();
    Tokenizer { files }.file(path, 0, None, false, &mut out)?;
    Ok(out)
}

/// Where an inclusion was asked for, to blame when it cannot be opened.
struct At<'a> {
    file: &'a Path,
    line: usize,
}

struct Tokenizer<'a> {
    files: &'a dyn Files,
}

impl Tokenizer<'_> {
    fn file(
        &self,
        path: &Path,
        depth: usize,
        from: Option<&At<'_>>,
        missing_ok: bool,
        out: &mut Vec<Line>,
    ) -> Result<(), HbaError> {
        let blame = |message: String| match from {
            Some(at) => HbaError::new(at.file, at.line, message),
            None => HbaError::new(path, 0, message),
        };
        if depth > MAX_DEPTH {
            return Err(blame(format!(
                "could not open file \"{}\": maximum nesting depth exceeded",
                path.display()
            )));
        }
        let text = match self.files.read(path) {
            Ok(text) => text,
            Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                let why = os_reason(&e);
                return Err(blame(format!(
                    "could not open file \"{}\": {why}",
                    path.display()
                )));
            }
        };
        let file: Arc<Path> = Arc::from(path);
        for (number, raw) in logical_lines(&text) {
            let at = At {
                file: path,
                line: number,
            };
            let fields = self.fields(raw.as_bytes(), &at, depth)?;
            if fields.is_empty() || self.directive(&fields, &at, depth, out)? {
                continue;
            }
            out.push(Line {
                file: file.clone(),
                number,
                fields,
            });
        }
        Ok(())
    }

    /// Carries out an include directive; false if the line is not one.
    fn directive(
        &self,
        fields: &[Vec<Token>],
        at: &At<'_>,
        depth: usize,
        out: &mut Vec<Line>,
    ) -> Result<bool, HbaError> {
        let [first, second] = fields else {
            return Ok(false);
        };
        let target = resolve(at.file, &second[0].text);
        match first[0].text.as_str() {
            "include" => self.file(&target, depth + 1, Some(at), false, out)?,
            "include_if_exists" => self.file(&target, depth + 1, Some(at), true, out)?,
            "include_dir" => {
                let listed = self.files.conf_files_in(&target).map_err(|e| {
                    let why = os_reason(&e);
                    let message =
                        format!("could not open directory \"{}\": {why}", target.display());
                    HbaError::new(at.file, at.line, message)
                })?;
                for path in listed {
                    self.file(&path, depth + 1, Some(at), false, out)?;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Splits one logical line into fields, expanding `@file` tokens.
    fn fields(&self, line: &[u8], at: &At<'_>, depth: usize) -> Result<Vec<Vec<Token>>, HbaError> {
        let mut fields = Vec::new();
        let mut pos = 0;
        while pos < line.len() {
            let mut field = Vec::new();
            loop {
                let raw =
                    next_token(line, &mut pos).map_err(|m| HbaError::new(at.file, at.line, m))?;
                let Some(raw) = raw else { break };
                if !raw.initial_quote && raw.text.len() > 1 && raw.text.starts_with('@') {
                    self.expand(&raw.text[1..], at, depth + 1, &mut field)?;
                } else {
                    field.push(Token {
                        text: raw.text,
                        quoted: raw.initial_quote,
                    });
                }
                if !raw.trailing_comma {
                    break;
                }
            }
            // An empty @file leaves no field at all, as in PostgreSQL.
            if !field.is_empty() {
                fields.push(field);
            }
        }
        Ok(fields)
    }

    /// `@name`: every token of every line of that file, in order.
    fn expand(
        &self,
        name: &str,
        at: &At<'_>,
        depth: usize,
        into: &mut Vec<Token>,
    ) -> Result<(), HbaError> {
        let mut lines = Vec::new();
        self.file(&resolve(at.file, name), depth, Some(at), false, &mut lines)?;
        into.extend(lines.into_iter().flat_map(|l| l.fields).flatten());
        Ok(())
    }
}

/// A name relative to the including file's directory, or absolute as is.
fn resolve(including: &Path, name: &str) -> PathBuf {
    let name = Path::new(name);
    if name.is_absolute() {
        return name.to_path_buf();
    }
    including.parent().unwrap_or(Path::new("")).join(name)
}

/// The OS's reason without Rust's " (os error N)" suffix, like `%m`.
fn os_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// The logical lines of a file with the numbers of their first physical
/// lines: trailing CR/LF stripped, backslash continuations joined.
pub fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pieces = text.split_inclusive('\n');
    let mut number = 1;
    loop {
        let mut buf = String::new();
        let mut got = false;
        let mut last_backslash = 0;
        let mut continuations = 0;
        for piece in pieces.by_ref() {
            got = true;
            buf.push_str(piece);
            let kept = buf.trim_end_matches(['\r', '\n']).len();
            buf.truncate(kept);
            // The backslash must be new, so that `\` + empty line + `\`
            // does not join three lines.
            if buf.len() > last_backslash && buf.ends_with('\\') {
                buf.pop();
                last_backslash = buf.len();
                continuations += 1;
                continue;
            }
            break;
        }
        if !got {
            return out;
        }
        out.push((number, buf));
        number += continuations + 1;
    }
}

/// A token before `@` expansion.
#[derive(Debug, PartialEq, Eq)]
pub struct RawToken {
    /// Dequoted text.
    pub text: String,
    /// It began with a quote.
    pub initial_quote: bool,
    /// A comma ended it: the field goes on.
    pub trailing_comma: bool,
}

fn is_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r')
}

/// The next token of `line` from `*pos`, or `None` at the end of the line
/// (or at a comment).
pub fn next_token(line: &[u8], pos: &mut usize) -> Result<Option<RawToken>, String> {
    while *pos < line.len() && (is_blank(line[*pos]) || line[*pos] == b',') {
        *pos += 1;
    }
    let mut buf = Vec::new();
    let (mut in_quote, mut was_quote, mut saw_quote) = (false, false, false);
    let (mut initial_quote, mut trailing_comma) = (false, false);
    while *pos < line.len() && (in_quote || !is_blank(line[*pos])) {
        let c = line[*pos];
        if c == b'#' && !in_quote {
            *pos = line.len();
            break;
        }
        if c == b',' && !in_quote {
            // Left in place: the next call skips it.
            trailing_comma = true;
            break;
        }
        if c != b'"' || was_quote {
            buf.push(c);
        }
        // `""` inside quotes: the second quote is kept and reopens.
        was_quote = in_quote && c == b'"' && !was_quote;
        if c == b'"' {
            in_quote = !in_quote;
            saw_quote = true;
            if buf.is_empty() {
                initial_quote = true;
            }
        }
        *pos += 1;
    }
    if in_quote {
        return Err("unterminated quoted string".to_owned());
    }
    if !saw_quote && buf.is_empty() {
        return Ok(None);
    }
    Ok(Some(RawToken {
        // Only ASCII bytes were removed, so this is the input's UTF-8.
        text: String::from_utf8_lossy(&buf).into_owned(),
        initial_quote,
        trailing_comma,
    }))
}
