//! A look at the raw bytes that settles most queries without the lexer:
//! one ordinary statement (SELECT, INSERT, UPDATE, DELETE, WITH, VALUES,
//! TABLE) with nothing in it that could pin. The lexer and the watch
//! cost about 50 instructions a byte; this costs a few.
//!
//! It only ever answers "nothing to do". Whenever the text holds anything
//! whose reading needs the lexer (a string, a dollar quote, a comment, a
//! second statement, a `U&"..."` name) or a word any pattern of the
//! classifier starts from, it answers "don't know" and the full classifier
//! runs.

use super::lex::{is_ident_cont, is_space};

/// Bytes that send the text to the full classifier, or that start a word
/// it may have to look at (see [`quick_needle`]).
static STOP: [bool; 256] = {
    let mut t = [false; 256];
    let stops = b"'\"$;-/&\\tTaAsSpP";
    let mut i = 0;
    while i < stops.len() {
        t[stops[i] as usize] = true;
        i += 1;
    }
    t
};

/// True when `sql` is one ordinary statement the full classifier would
/// find nothing in (no pin, no setting, no transaction control), whatever
/// standard_conforming_strings is: it holds no string literal, so no
/// backslash can mean anything.
pub(super) fn nothing_to_do(sql: &[u8]) -> bool {
    let Some(first_word_end) = starts_plain(sql) else {
        return false;
    };
    let mut quotes = 0usize;
    for (i, &c) in sql.iter().enumerate().skip(first_word_end) {
        if !STOP[c as usize] {
            continue;
        }
        match c {
            // Quoted names are read below by counting: without strings,
            // comments or dollar quotes, every `"` opens, closes or
            // doubles inside a name, so an odd count is one left open.
            b'"' => quotes += 1,
            // A placeholder (`$1`) is harmless; anything else may be a
            // dollar quote, or a name with `$` in it.
            b'$' if sql.get(i + 1).is_some_and(u8::is_ascii_digit) => {}
            // A closing `;` is fine; a second statement is not.
            b';' if sql[i + 1..].iter().all(|&b| is_space(b)) => return quotes % 2 == 0,
            b'-' if sql.get(i + 1) != Some(&b'-') => {}
            b'/' if sql.get(i + 1) != Some(&b'*') => {}
            b'&' if sql.get(i + 1) != Some(&b'"') => {}
            b'\'' | b'$' | b';' | b'-' | b'/' | b'&' | b'\\' => return false,
            _ if quick_needle(&sql[i..]) => return false,
            _ => {}
        }
    }
    quotes % 2 == 0
}

/// The words the classifier pins on wherever they are, in any case, by
/// their first letter: `temp` (also in `pg_temp` and `temporary`), the
/// advisory lock functions, `set_config` and `pg_settings`. Matching inside
/// longer words only sends more text to the full classifier.
fn quick_needle(at: &[u8]) -> bool {
    let needle: &[u8] = match at.first().map(|c| c | 0x20) {
        Some(b't') => b"temp",
        Some(b'a') => b"advisory_lock",
        Some(b's') => b"set_config",
        Some(b'p') => b"pg_settings",
        _ => return false,
    };
    // Case folded by one bit, on both sides: a byte that only matches
    // this way (`_` and DEL) just sends the text to the full classifier.
    at.len() >= needle.len() && at.iter().zip(needle).all(|(a, n)| a | 0x20 == n | 0x20)
}

/// Where the ordinary statement's first word that starts the text (after
/// whitespace) ends; `None` when it starts otherwise.
fn starts_plain(sql: &[u8]) -> Option<usize> {
    let start = sql.iter().position(|&b| !is_space(b))?;
    let rest = &sql[start..];
    let len = rest
        .iter()
        .position(|&b| !b.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    if rest.get(len).is_some_and(|&b| is_ident_cont(b)) {
        return None;
    }
    let word = &rest[..len];
    [
        &b"select"[..],
        b"insert",
        b"update",
        b"delete",
        b"with",
        b"values",
        b"table",
    ]
    .iter()
    .any(|k| word.eq_ignore_ascii_case(k))
    .then_some(start + len)
}
