//! SET's own grammar, PgBouncer's `SET key = arg`: a dotted key, `=`, and a
//! bare value or a single-quoted one (`''` for a quote, `;` allowed inside).

use super::Command;
use crate::protocol::PgError;

/// `key = value` or `key = 'value'` (`''` for a quote), PgBouncer's SET.
pub(super) fn parse_set(rest: &str) -> Result<Command, PgError> {
    let usage = || {
        PgError::error("42601", "syntax error in SET: expected SET key = value").with_hint(
            "For example: SET pool.idle_transaction_timeout = '30s' (keys as SHOW CONFIG names them).",
        )
    };
    let (key, value) = rest.split_once('=').ok_or_else(usage)?;
    let key = key.trim_matches(|c: char| c.is_ascii_whitespace());
    let key_chars = |c: char| c.is_alphanumeric() || "_.*\"-".contains(c);
    if key.is_empty() || !key.chars().all(key_chars) {
        return Err(usage());
    }
    let value = value.trim_matches(|c: char| c.is_ascii_whitespace());
    let bare = |c: char| !(c.is_whitespace() || c.is_control() || "'\";".contains(c));
    let value = match value.strip_prefix('\'') {
        Some(quoted) => single_quoted(quoted).ok_or_else(usage)?,
        None if !value.is_empty() && value.chars().all(bare) => value.to_string(),
        None => return Err(usage()),
    };
    Ok(Command::Set {
        key: key.to_string(),
        value,
    })
}

/// The body of a `'...'` string (after its opening quote), which must end
/// the text; `''` stands for one quote.
fn single_quoted(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' if chars.peek() == Some(&'\'') => {
                out.push('\'');
                chars.next();
            }
            '\'' => return chars.next().is_none().then_some(out),
            c if c.is_control() => return None,
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::super::tests::code;
    use super::*;

    #[test]
    fn set_takes_a_bare_or_quoted_value() {
        let set = |key: &str, value: &str| Command::Set {
            key: key.into(),
            value: value.into(),
        };
        let cases = [
            (
                "SET pool.mode = transaction",
                set("pool.mode", "transaction"),
            ),
            ("set pool.mode='session';", set("pool.mode", "session")),
            (
                "SET pool.server_check_query = 'select ''a;b'''",
                set("pool.server_check_query", "select 'a;b'"),
            ),
            ("Set admin.users = ''", set("admin.users", "")),
            (
                "SET databases.\"a.b\".pool_mode = statement",
                set("databases.\"a.b\".pool_mode", "statement"),
            ),
            (
                "SET\tpool.max_prepared_statements=10",
                set("pool.max_prepared_statements", "10"),
            ),
        ];
        for (sql, want) in cases {
            assert_eq!(parse(sql), Ok(want), "{sql:?}");
        }
        for sql in [
            "SET",
            "SET pool.mode",
            "SET pool.mode transaction",
            "SET = 1",
            "SET pool.mode =",
            "SET pool.mode = 'unterminated",
            "SET pool.mode = 'a' b",
            "SET pool.mode = a b",
            "SET pool mode = a",
            "SET pool.mode = a;b",
            "SET pool.mode = 'a\0b'",
        ] {
            assert_eq!(code(sql), "42601", "{sql:?}");
        }
    }
}
