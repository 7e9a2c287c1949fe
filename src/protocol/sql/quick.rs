//! A look at the raw bytes that settles most queries without the lexer:
//! one ordinary statement (SELECT, INSERT, UPDATE, DELETE, WITH, VALUES,
//! TABLE) with nothing in it that could pin, or one bare BEGIN, COMMIT,
//! END, ROLLBACK or ABORT. The lexer and the watch cost about 50
//! instructions a byte; this costs a few.
//!
//! It only ever answers "nothing to do" or "a bare transaction control".
//! Whenever the text holds anything whose reading needs the lexer (a
//! string, a dollar quote, a comment, a second statement, a `U&"..."`
//! name) or a name any pattern of the classifier looks for, it answers
//! "don't know" and the full classifier runs.

use super::lex::{is_ident_cont, is_space, letter, skip_while};

/// True when `sql` is one ordinary statement the full classifier would
/// find nothing in (no pin, no setting, no transaction control), whatever
/// standard_conforming_strings is: it holds no string literal, so no
/// backslash can mean anything.
///
/// It walks the text by the lexer's tokens where they matter: a word (and
/// a number, or a `$1` placeholder) is skipped whole, as the lexer reads
/// it, so only whole words are compared with the patterns' names.
pub(super) fn nothing_to_do(sql: &[u8]) -> bool {
    let Some(mut i) = starts_plain(sql) else {
        return false;
    };
    while let Some(&c) = sql.get(i) {
        i = match STEP[usize::from(c)] {
            Step::Pass => i + 1,
            Step::Word => {
                let end = skip_while(sql, i + 1, is_ident_cont);
                if pins_by_name(&sql[i..end]) {
                    return false;
                }
                end
            }
            Step::Number => skip_while(sql, i + 1, |c| c.is_ascii_alphanumeric() || c == b'_'),
            Step::Look => match look(sql, i, c) {
                Look::Next(next) => next,
                Look::Answer(answer) => return answer,
            },
        };
    }
    true
}

/// What [`nothing_to_do`] does at a byte.
#[derive(Clone, Copy)]
enum Step {
    /// Whitespace or an operator, comma or bracket: the next byte.
    Pass,
    /// A word starts: skip it whole, and compare it with the names.
    Word,
    /// A number starts: skip it whole, as the lexer reads it.
    Number,
    /// A byte whose meaning depends on what follows it: see [`look`].
    Look,
}

/// [`Step`] by byte. A `static`, as the lexer's class table is.
static STEP: [Step; 256] = {
    let mut t = [Step::Pass; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if letter(c) {
            Step::Word
        } else if c.is_ascii_digit() {
            Step::Number
        } else if matches!(c, b'$' | b'"' | b';' | b'-' | b'/' | b'&' | b'\\' | b'\'') {
            Step::Look
        } else {
            Step::Pass
        };
        b += 1;
    }
    t
};

/// Where [`nothing_to_do`] goes on from a [`Step::Look`] byte.
enum Look {
    /// Read on from here.
    Next(usize),
    /// The answer for the whole text.
    Answer(bool),
}

/// The reading of the [`Step::Look`] byte `c`, at `i`.
fn look(sql: &[u8], i: usize, c: u8) -> Look {
    let next = sql.get(i + 1).copied();
    match c {
        // A placeholder: `$` and its digits, nothing more.
        b'$' if next.is_some_and(|n| n.is_ascii_digit()) => {
            Look::Next(skip_while(sql, i + 1, |c| c.is_ascii_digit()))
        }
        b'"' => match quoted_name(sql, i + 1) {
            Some((name, after)) if !pins_by_name(name) => Look::Next(after),
            _ => Look::Answer(false),
        },
        // A closing `;` is fine; a second statement is not.
        b';' => Look::Answer(sql[i + 1..].iter().all(|&b| is_space(b))),
        b'-' if next != Some(b'-') => Look::Next(i + 1),
        b'/' if next != Some(b'*') => Look::Next(i + 1),
        b'&' if next != Some(b'"') => Look::Next(i + 1),
        // Strings (with their prefixes' quote), dollar quotes and names
        // with `$`, comments, `U&"..."`, and a backslash.
        _ => Look::Answer(false),
    }
}

/// True when `sql` is one bare transaction-control statement: BEGIN,
/// COMMIT, END, ROLLBACK or ABORT, alone or with WORK or TRANSACTION, and
/// at most a closing `;`, in any case and spacing. The full classifier's
/// answer to each is the same (it controls the transaction, nothing else),
/// and drivers and pgbench send them around every transaction.
pub(super) fn bare_transaction_control(sql: &[u8]) -> bool {
    let mut text = trim_spaces(sql);
    if let Some(before) = text.strip_suffix(b";") {
        text = trim_spaces(before);
    }
    let mut words = text.split(|&b| is_space(b)).filter(|w| !w.is_empty());
    let first = words.next().unwrap_or_default();
    let second = words.next();
    let any = |word: &[u8], of: &[&str]| of.iter().any(|k| word.eq_ignore_ascii_case(k.as_bytes()));
    words.next().is_none()
        && any(first, &["BEGIN", "COMMIT", "END", "ROLLBACK", "ABORT"])
        && second.is_none_or(|w| any(w, &["WORK", "TRANSACTION"]))
}

/// `text` without the whitespace (as the lexer reads it) at either end.
fn trim_spaces(text: &[u8]) -> &[u8] {
    let start = text
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(start, |e| e + 1);
    &text[start..end]
}

/// A quoted name's contents (doubled quotes left doubled, as the lexer
/// leaves them) and where the name ends; `None` if it never ends.
fn quoted_name(sql: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let mut i = from;
    loop {
        match (sql.get(i)?, sql.get(i + 1)) {
            (b'"', Some(b'"')) => i += 2,
            (b'"', _) => return Some((&sql[from..i], i + 1)),
            _ => i += 1,
        }
    }
}

/// Whether `word` (a word, or a quoted name's contents) is one the
/// classifier pins on wherever it is ([`super::watch::NAMES`]), whole and
/// case-blind; as a keyword or a name, called or not: a needless match
/// only sends the text to the full classifier.
fn pins_by_name(word: &[u8]) -> bool {
    // Most words are no name's length: one test instead of nine.
    let len = word.len();
    len < u32::BITS as usize
        && NAME_LENGTHS & (1 << len) != 0
        && super::watch::NAMES
            .iter()
            .any(|n| word.eq_ignore_ascii_case(n))
}

/// Bit `n` is set when some name of [`super::watch::NAMES`] has `n` bytes.
const NAME_LENGTHS: u32 = {
    let mut mask = 0u32;
    let mut i = 0;
    while i < super::watch::NAMES.len() {
        // Every name is shorter than 32 bytes (checked at compile time).
        assert!(super::watch::NAMES[i].len() < 32);
        mask |= 1 << super::watch::NAMES[i].len();
        i += 1;
    }
    mask
};

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
    super::plain_first_word(&rest[..len]).then_some(start + len)
}
