//! SET and RESET: which session settings a statement changes, and whether
//! the pooler can follow the change (replay it on another backend) or must
//! pin the client.

use std::borrow::Cow;

use super::lex::{ident_is, is_kw, Tok};
use super::{PinReason, Stmt, HEAD};

/// A change of a session setting, in the form the pooler follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// `SET [SESSION] name {= | TO} value`.
    Set {
        /// The parameter, lower-cased as PostgreSQL matches it.
        name: String,
        /// The statement as written after `SET [SESSION]`: `SET <sql>`
        /// does the same on any backend of the pool.
        sql: String,
    },
    /// `RESET name` or `SET name TO DEFAULT`.
    Reset {
        /// The parameter, lower-cased.
        name: String,
    },
    /// `RESET ALL` or `DISCARD ALL` (or a SET whose name cannot be read).
    ResetAll,
}

/// Parameters whose SET changes who the session is or what the current
/// transaction is: never followed.
const NEVER_FOLLOWED: [&str; 5] = [
    "role",
    "session_authorization",
    "transaction_isolation",
    "transaction_read_only",
    "transaction_deferrable",
];

/// True for a token that may be part of a SET value the pooler replays
/// as written: names, numbers, strings whose meaning does not depend on
/// standard_conforming_strings (no backslash), and the punctuation of a
/// list or a signed number.
pub(super) fn plain_value(sql: &[u8], tok: Tok, (start, end): (usize, usize)) -> bool {
    match tok {
        Tok::Word(..) | Tok::Quoted(..) | Tok::Body(..) | Tok::Other => true,
        Tok::Str => !sql.get(start..end).unwrap_or_default().contains(&b'\\'),
        Tok::Punct(c) => matches!(c, b',' | b'-' | b'+' | b'.'),
    }
}

/// Appends the settings a finished statement changes to `settings`, and
/// returns why a SET must pin instead, if it must. `tracked(name)` says the
/// pooler follows that parameter from the server's reports (no setting is
/// recorded for it then).
pub(super) fn set_effects(
    sql: &[u8],
    stmt: &Stmt,
    tracked: &dyn Fn(&str) -> bool,
    settings: &mut Vec<Setting>,
) -> Option<PinReason> {
    let head = &stmt.head[..stmt.n.min(HEAD)];
    // A keyword, unless it starts a qualified name (`SET local.foo = 1`
    // sets a custom parameter).
    let kw = |i: usize, k: &[u8]| {
        head.get(i).is_some_and(|&t| is_kw(sql, t, k))
            && (i == 0 || head.get(i + 1) != Some(&Tok::Punct(b'.')))
    };
    if (kw(0, b"reset") || kw(0, b"discard")) && kw(1, b"all") {
        settings.push(Setting::ResetAll);
        return None;
    }
    if kw(0, b"reset") {
        match set_target(sql, head, 1) {
            Some((name, _)) if !tracked(&name) => settings.push(Setting::Reset {
                name: name.to_ascii_lowercase(),
            }),
            Some(_) => {}
            None => settings.push(Setting::ResetAll),
        }
        return None;
    }
    if !kw(0, b"set") || kw(1, b"local") || kw(1, b"transaction") || kw(1, b"constraints") {
        return None;
    }
    let mut i = 1;
    if kw(1, b"session") {
        if kw(2, b"authorization") {
            return Some(PinReason::SessionAuthorization);
        }
        if kw(2, b"characteristics") {
            return Some(PinReason::SessionCharacteristics);
        }
        i = 2;
    }
    if kw(i, b"role") {
        return Some(PinReason::SetRole);
    }
    let Some((name, value)) = set_target(sql, head, i) else {
        settings.push(Setting::ResetAll);
        return Some(PinReason::SessionSet);
    };
    if tracked(&name) {
        return None;
    }
    // `SET name value` without `=` or TO is only for the special forms
    // (TIME ZONE, NAMES, SCHEMA, XML OPTION); `FROM CURRENT` is not a value.
    let assigns = matches!(name, Cow::Borrowed(_))
        || kw(value - 1, b"to")
        || head.get(value - 1) == Some(&Tok::Punct(b'='));
    let name = name.to_ascii_lowercase();
    // `SET x TO DEFAULT` is RESET under another name.
    if value + 1 == stmt.n && kw(value, b"default") {
        settings.push(Setting::Reset { name });
        return None;
    }
    let start = stmt.spans.get(i).map(|s| s.0);
    let plain = assigns && value < stmt.n && stmt.last_unplain.is_none_or(|u| u < value);
    match start.and_then(|s| sql.get(s..stmt.end)) {
        Some(text) if plain && !NEVER_FOLLOWED.contains(&name.as_str()) => {
            settings.push(Setting::Set {
                name,
                sql: String::from_utf8_lossy(text).into_owned(),
            });
            None
        }
        _ => {
            settings.push(Setting::Reset { name });
            Some(PinReason::SessionSet)
        }
    }
}

/// True for a statement that may change standard_conforming_strings.
pub(super) fn changes_strings(sql: &[u8], head: &[Tok]) -> bool {
    let kw = |i: usize, k: &[u8]| head.get(i).is_some_and(|&t| is_kw(sql, t, k));
    let names_it = |i: usize| {
        head.get(i)
            .is_some_and(|&t| ident_is(sql, t, b"standard_conforming_strings"))
    };
    let all = (kw(0, b"discard") || kw(0, b"reset")) && kw(1, b"all");
    let reset = kw(0, b"reset") && names_it(1);
    let set =
        kw(0, b"set") && (names_it(1) || ((kw(1, b"local") || kw(1, b"session")) && names_it(2)));
    all || reset || set
}

/// The parameter a SET names at `head[i]`, and where its value starts.
/// None when the name is malformed or does not fit in `head`.
fn set_target(sql: &[u8], head: &[Tok], i: usize) -> Option<(Cow<'static, str>, usize)> {
    let kw = |i: usize, k: &[u8]| head.get(i).is_some_and(|&t| is_kw(sql, t, k));
    let starts_name = |i: usize| head.get(i + 1) == Some(&Tok::Punct(b'.'));
    const SPECIAL: [(&[u8], &[u8], &str); 4] = [
        (b"time", b"zone", "timezone"),
        (b"xml", b"option", "xmloption"),
        (b"names", b"", "client_encoding"),
        (b"schema", b"", "search_path"),
    ];
    for (first, second, name) in SPECIAL {
        if starts_name(i) {
            break;
        }
        if kw(i, first) && second.is_empty() {
            return Some((Cow::Borrowed(name), i + 1));
        }
        if kw(i, first) && kw(i + 1, second) {
            return Some((Cow::Borrowed(name), i + 2));
        }
    }
    let mut name = String::new();
    let mut i = i;
    loop {
        match *head.get(i)? {
            Tok::Word(s, e) => name.push_str(
                &std::str::from_utf8(sql.get(s..e)?)
                    .ok()?
                    .to_ascii_lowercase(),
            ),
            Tok::Quoted(s, e) => name.push_str(
                &std::str::from_utf8(sql.get(s..e)?)
                    .ok()?
                    .replace("\"\"", "\""),
            ),
            _ => return None,
        }
        i += 1;
        if head.get(i) != Some(&Tok::Punct(b'.')) {
            break;
        }
        name.push('.');
        i += 1;
    }
    if kw(i, b"to") || head.get(i) == Some(&Tok::Punct(b'=')) {
        i += 1;
    }
    Some((Cow::Owned(name), i))
}
