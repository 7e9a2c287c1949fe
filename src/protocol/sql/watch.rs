//! Patterns that pin wherever they occur in a statement, and the scan of
//! function and DO bodies for the statements they run.

use super::lex::*;
use super::PinReason;

/// Scans a function or DO body (dollar-quoted or a string) as flat words,
/// ignoring quotes on purpose: dynamic SQL in `EXECUTE '...'` runs too, and
/// a false hit only pins. Comments are skipped, as PL/pgSQL skips them.
/// Also says whether the body may deallocate prepared statements.
pub(super) fn scan_body(sql: &[u8], start: usize, end: usize) -> (Option<PinReason>, bool) {
    let Some(body) = sql.get(..end) else {
        return (None, false);
    };
    let mut watch = Watch {
        in_body: true,
        ..Watch::default()
    };
    let mut i = start;
    while let Some(&c) = body.get(i) {
        let from = i;
        i += 1;
        if c == b'-' && body.get(i) == Some(&b'-') {
            i = skip_while(body, i, |c| c != b'\n' && c != b'\r');
            continue;
        }
        if c == b'/' && body.get(i) == Some(&b'*') {
            i = body[i..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(body.len(), |p| i + p + 2);
            continue;
        }
        let tok = if is_tag_char(c) {
            i = skip_while(body, i, is_tag_char);
            if c.is_ascii_digit() {
                Tok::Other
            } else {
                Tok::Word(from, i)
            }
        } else if is_space(c) {
            continue;
        } else {
            Tok::Punct(c)
        };
        if let Some(pin) = watch.feed(sql, tok) {
            return (Some(pin), watch.deallocates);
        }
    }
    (None, watch.deallocates)
}

/// Patterns that pin wherever they occur in a statement (or a body).
#[derive(Default)]
pub(super) struct Watch {
    /// Inside a dollar-quoted body: also look for LISTEN and SET statements.
    in_body: bool,
    pub(super) prev: Tok,
    prev2: Tok,
    /// Just after `CREATE [OR REPLACE] [GLOBAL|LOCAL]`, where TEMP may come.
    after_create: bool,
    /// Just after a SET that starts a statement inside a body.
    after_set: bool,
    /// After UPDATE: an UPDATE of pg_settings calls set_config.
    pub(super) updating: bool,
    /// A body runs DEALLOCATE: the pooler's statements may be gone.
    deallocates: bool,
}

impl Watch {
    pub(super) fn feed(&mut self, sql: &[u8], tok: Tok) -> Option<PinReason> {
        // Before word_pin, which may arm it for the next token.
        let set = self.body_set_pin(sql, tok);
        let pin = match tok {
            Tok::Punct(b'(') => call_pin(sql, self.prev),
            Tok::Word(..) => self.word_pin(sql, tok),
            Tok::Quoted(..) if ident_is(sql, tok, PG_TEMP) => Some(PinReason::TempObject),
            _ => None,
        };
        // An UPDATE of pg_settings calls set_config (the statement's own
        // are checked by the statement, which knows its first word).
        if self.in_body {
            self.updating |= is_kw(sql, tok, b"update");
        }
        let pin = pin.or_else(|| {
            (self.updating && ident_is(sql, tok, PG_SETTINGS)).then_some(PinReason::SetConfig)
        });
        let pin = set.or(pin);
        let create_mod = [&b"or"[..], b"replace", b"global", b"local"];
        self.after_create = is_kw(sql, tok, b"create")
            || (self.after_create && create_mod.iter().any(|k| is_kw(sql, tok, k)));
        self.prev2 = self.prev;
        self.prev = tok;
        pin
    }

    fn word_pin(&mut self, sql: &[u8], tok: Tok) -> Option<PinReason> {
        let kw = |k: &[u8]| is_kw(sql, tok, k);
        // pg_temp also catches `SET search_path = pg_temp`, after which a plain
        // CREATE TABLE makes a temporary table.
        if kw(PG_TEMP) {
            return Some(PinReason::TempObject);
        }
        if kw(TEMP) || kw(TEMPORARY) {
            let scope = is_kw(sql, self.prev, b"local") || is_kw(sql, self.prev, b"global");
            let into = (is_kw(sql, self.prev, b"into")
                && !is_kw(sql, self.prev2, b"insert")
                && !is_kw(sql, self.prev2, b"merge"))
                || (scope && is_kw(sql, self.prev2, b"into"));
            if self.after_create || into {
                return Some(PinReason::TempObject);
            }
        }
        if self.in_body && kw(b"listen") {
            return Some(PinReason::Listen);
        }
        if self.in_body && self.at_statement_start(sql) {
            if kw(b"set") {
                self.after_set = true;
            } else if kw(b"prepare") {
                return Some(PinReason::SqlPrepare);
            } else if kw(b"load") {
                return Some(PinReason::Load);
            } else if kw(b"deallocate") || kw(b"discard") {
                self.deallocates = true;
            }
        }
        if self.in_body && kw(b"hold") && is_kw(sql, self.prev, b"with") {
            return Some(PinReason::HoldCursor);
        }
        None
    }

    /// A guess, for bodies only: after `;`, a quote (dynamic SQL), a `$` or a
    /// block keyword. `UPDATE t SET` follows a name, so it does not count.
    fn at_statement_start(&self, sql: &[u8]) -> bool {
        let block = [&b"begin"[..], b"then", b"else", b"loop"];
        match self.prev {
            Tok::Other | Tok::Punct(b';' | b'\'' | b'$') => true,
            prev => block.iter().any(|k| is_kw(sql, prev, k)),
        }
    }

    fn body_set_pin(&mut self, sql: &[u8], tok: Tok) -> Option<PinReason> {
        if !std::mem::take(&mut self.after_set) {
            return None;
        }
        let local = [&b"local"[..], b"transaction", b"constraints"];
        if local.iter().any(|k| is_kw(sql, tok, k)) {
            None
        } else if is_kw(sql, tok, b"role") {
            Some(PinReason::SetRole)
        } else {
            Some(PinReason::SessionSet)
        }
    }
}

/// The session advisory lock functions (the transaction ones end with it).
const LOCKS: [&[u8]; 4] = [
    b"pg_advisory_lock",
    b"pg_advisory_lock_shared",
    b"pg_try_advisory_lock",
    b"pg_try_advisory_lock_shared",
];
const SET_CONFIG: &[u8] = b"set_config";
const PG_SETTINGS: &[u8] = b"pg_settings";
const PG_TEMP: &[u8] = b"pg_temp";
const TEMP: &[u8] = b"temp";
const TEMPORARY: &[u8] = b"temporary";

/// Every name the watch looks for outside bodies (as a keyword or a name,
/// quoted or not): a statement without a body that holds none of them
/// pins nowhere, which is what [`super::quick`] relies on.
pub(super) const NAMES: [&[u8]; 9] = [
    LOCKS[0],
    LOCKS[1],
    LOCKS[2],
    LOCKS[3],
    SET_CONFIG,
    PG_SETTINGS,
    PG_TEMP,
    TEMP,
    TEMPORARY,
];

/// A call of a function that can change session state; any schema counts.
fn call_pin(sql: &[u8], name: Tok) -> Option<PinReason> {
    if LOCKS.iter().any(|n| ident_is(sql, name, n)) {
        Some(PinReason::AdvisoryLock)
    } else if ident_is(sql, name, SET_CONFIG) {
        Some(PinReason::SetConfig)
    } else {
        None
    }
}
