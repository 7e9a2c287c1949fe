//! Decides, in transaction pooling mode, whether a SQL text leaves session
//! state behind so that the client must keep its backend.
//!
//! This runs on every Query and Parse message, so it lexes the bytes once,
//! never allocates on the common path and never trusts the text to be valid
//! UTF-8 or even complete. It errs towards pinning: a needless pin costs one
//! backend, a missed one hands a stranger our client's session.
//!
//! `standard_conforming_strings` is assumed on (the default since 9.1): a
//! backslash only escapes inside `E'...'`.

use std::borrow::Cow;

/// Why a client must keep its backend until it disconnects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinReason {
    /// `SET` / `SET SESSION` of a parameter the pooler does not track.
    SessionSet,
    /// `SET [SESSION] ROLE`: later transactions would run as another role.
    SetRole,
    /// `SET SESSION AUTHORIZATION`: later transactions would run as another user.
    SessionAuthorization,
    /// `SET SESSION CHARACTERISTICS AS TRANSACTION`: changes every later transaction.
    SessionCharacteristics,
    /// `set_config(...)`: its third argument may make it session-wide, and we cannot evaluate it.
    SetConfig,
    /// A temporary table, view, sequence or function lives until the session ends.
    TempObject,
    /// Session-level advisory locks outlive the transaction that took them.
    AdvisoryLock,
    /// `LISTEN`: notifications are delivered to the session, not the transaction.
    Listen,
    /// `DECLARE ... WITH HOLD`: the cursor outlives its transaction.
    HoldCursor,
    /// SQL-level `PREPARE`: the statement stays on the backend.
    SqlPrepare,
    /// `LOAD`: the library stays loaded in the backend.
    Load,
}

impl PinReason {
    /// Short text for logs and SHOW CLIENTS, e.g. "SET of an untracked parameter", "temporary object".
    pub fn describe(self) -> &'static str {
        match self {
            PinReason::SessionSet => "SET of an untracked parameter",
            PinReason::SetRole => "SET ROLE",
            PinReason::SessionAuthorization => "SET SESSION AUTHORIZATION",
            PinReason::SessionCharacteristics => "SET SESSION CHARACTERISTICS",
            PinReason::SetConfig => "set_config() call",
            PinReason::TempObject => "temporary object",
            PinReason::AdvisoryLock => "session advisory lock",
            PinReason::Listen => "LISTEN",
            PinReason::HoldCursor => "cursor WITH HOLD",
            PinReason::SqlPrepare => "SQL PREPARE",
            PinReason::Load => "LOAD of a library",
        }
    }
}

/// What a SQL text does to state that outlives its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionEffects {
    /// First reason found to pin the client (None: the text leaves no session state behind).
    pub pin: Option<PinReason>,
    /// DISCARD ALL or DEALLOCATE ALL (also `DEALLOCATE PREPARE ALL`): every prepared statement on the backend is gone.
    pub drops_prepared: bool,
}

/// Classifies `sql`. `tracked(name)` is asked, with the parameter name lower-cased (quoted identifiers keep their case) and schema-qualified names joined with '.', whether the pooler follows that parameter itself (then a plain SET of it does not pin).
///
/// PostgreSQL matches parameter names case-insensitively, so `SET "TimeZone"`
/// sets `timezone`; `tracked` gets `"TimeZone"` as written and should compare
/// case-insensitively if such a SET is not to pin.
pub fn classify(sql: &[u8], tracked: &dyn Fn(&str) -> bool) -> SessionEffects {
    let mut fx = SessionEffects::default();
    let mut stmt = Stmt::default();
    for tok in (Lexer { s: sql, pos: 0 }) {
        if tok == Tok::Punct(b';') {
            stmt.finish(sql, tracked, &mut fx);
            stmt = Stmt::default();
        } else {
            stmt.feed(sql, tok, fx.pin.is_none());
        }
    }
    stmt.finish(sql, tracked, &mut fx);
    fx
}

/// One token; positions index into the SQL text so that nothing is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Tok {
    /// Unquoted identifier or keyword at `[start, end)`.
    Word(usize, usize),
    /// Quoted identifier; `[start, end)` lies between the quotes, `""` still doubled.
    Quoted(usize, usize),
    /// String literal: its contents never matter.
    Str,
    /// Contents of a dollar quote at `[start, end)`: may be code, so it is scanned too.
    Body(usize, usize),
    /// One byte of punctuation or operator.
    Punct(u8),
    /// Number, `$n` placeholder, or nothing at all (before the first token).
    #[default]
    Other,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn is_ident_cont(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit() || b == b'$'
}

/// Dollar-quote tags and words inside bodies: identifier characters without `$`.
fn is_tag_char(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit()
}

/// PostgreSQL's whitespace, which includes form feed and vertical tab.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn skip_while(s: &[u8], mut i: usize, f: impl Fn(u8) -> bool) -> usize {
    while s.get(i).is_some_and(|&c| f(c)) {
        i += 1;
    }
    i
}

/// Keyword test: only unquoted words are keywords.
fn is_kw(sql: &[u8], t: Tok, kw: &[u8]) -> bool {
    matches!(t, Tok::Word(s, e) if sql.get(s..e).is_some_and(|w| w.eq_ignore_ascii_case(kw)))
}

/// Name test for quoted or unquoted identifiers; case-blind because being wrong only pins.
fn ident_is(sql: &[u8], t: Tok, name: &[u8]) -> bool {
    match t {
        Tok::Word(s, e) | Tok::Quoted(s, e) => {
            sql.get(s..e).is_some_and(|w| w.eq_ignore_ascii_case(name))
        }
        _ => false,
    }
}

/// Splits SQL into tokens, skipping whitespace and comments. Every step
/// consumes at least one byte, and anything unterminated runs to the end.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Iterator for Lexer<'_> {
    type Item = Tok;

    fn next(&mut self) -> Option<Tok> {
        self.skip_blanks();
        let start = self.pos;
        let b = *self.s.get(start)?;
        self.pos += 1;
        Some(match b {
            b'\'' => self.string(false),
            b'"' => self.quoted(),
            b'$' => self.dollar(start),
            _ if is_ident_start(b) => self.word(start),
            _ if b.is_ascii_digit() => {
                self.pos = skip_while(self.s, self.pos, |c| c.is_ascii_alphanumeric() || c == b'_');
                Tok::Other
            }
            _ => Tok::Punct(b),
        })
    }
}

impl Lexer<'_> {
    fn skip_blanks(&mut self) {
        loop {
            match self.s.get(self.pos..).unwrap_or_default() {
                [c, ..] if is_space(*c) => self.pos += 1,
                [b'-', b'-', ..] => {
                    self.pos = skip_while(self.s, self.pos, |c| c != b'\n');
                }
                [b'/', b'*', ..] => self.block_comment(),
                _ => return,
            }
        }
    }

    /// `/* ... */` nests in PostgreSQL, unlike in C.
    fn block_comment(&mut self) {
        let mut depth = 0usize;
        while let Some(rest) = self.s.get(self.pos..).filter(|r| !r.is_empty()) {
            match rest {
                [b'/', b'*', ..] => {
                    depth += 1;
                    self.pos += 2;
                }
                [b'*', b'/', ..] => {
                    depth = depth.saturating_sub(1);
                    self.pos += 2;
                    if depth == 0 {
                        return;
                    }
                }
                _ => self.pos += 1,
            }
        }
    }

    /// A word, or the `E'`, `U&'` and `U&"` prefixes that start quotes.
    fn word(&mut self, start: usize) -> Tok {
        match self.s.get(start..).unwrap_or_default() {
            [b'e' | b'E', b'\'', ..] => {
                self.pos = start + 2;
                self.string(true)
            }
            [b'u' | b'U', b'&', b'\'', ..] => {
                self.pos = start + 3;
                self.string(false)
            }
            [b'u' | b'U', b'&', b'"', ..] => {
                self.pos = start + 3;
                self.quoted()
            }
            _ => {
                self.pos = skip_while(self.s, self.pos, is_ident_cont);
                Tok::Word(start, self.pos)
            }
        }
    }

    /// The rest of a string literal after its opening quote.
    fn string(&mut self, backslash: bool) -> Tok {
        let s = self.s;
        let mut i = self.pos;
        while let Some(&c) = s.get(i) {
            i += 1;
            match c {
                b'\\' if backslash => i += 1,
                b'\'' if s.get(i) == Some(&b'\'') => i += 1,
                b'\'' => break,
                _ => {}
            }
        }
        self.pos = i.min(s.len());
        Tok::Str
    }

    /// The rest of a quoted identifier after its opening quote.
    fn quoted(&mut self) -> Tok {
        let s = self.s;
        let start = self.pos;
        let mut i = start;
        while let Some(&c) = s.get(i) {
            if c == b'"' {
                if s.get(i + 1) != Some(&b'"') {
                    self.pos = i + 1;
                    return Tok::Quoted(start, i);
                }
                i += 1;
            }
            i += 1;
        }
        self.pos = s.len();
        Tok::Quoted(start, s.len())
    }

    /// `$tag$...$tag$`, or a `$1` placeholder (a tag cannot start with a digit).
    fn dollar(&mut self, start: usize) -> Tok {
        let s = self.s;
        let tag_end = skip_while(s, start + 1, is_tag_char);
        let first = s.get(start + 1).copied().unwrap_or(b'0');
        if s.get(tag_end) != Some(&b'$') || first.is_ascii_digit() {
            self.pos = skip_while(s, start + 1, |c| c.is_ascii_digit());
            return Tok::Other;
        }
        let body = tag_end + 1;
        let delim = s.get(start..body).unwrap_or_default();
        let end = find_delim(s, body, delim).unwrap_or(s.len());
        self.pos = (end + delim.len()).min(s.len());
        Tok::Body(body, end)
    }
}

/// First `delim` at or after `from`. Linear: `delim`'s tag holds no `$`, so the
/// bytes matched before a mismatch are never the start of another candidate.
fn find_delim(s: &[u8], from: usize, delim: &[u8]) -> Option<usize> {
    let mut i = from;
    while let Some(off) = s.get(i..)?.iter().position(|&c| c == b'$') {
        let p = i + off;
        let rest = s.get(p..).unwrap_or_default();
        if rest.len() >= delim.len() && rest.iter().zip(delim).all(|(a, b)| a == b) {
            return Some(p);
        }
        i = p + 1;
    }
    None
}

/// Scans a dollar-quoted body as flat words, ignoring quotes and comments on
/// purpose: dynamic SQL in `EXECUTE '...'` runs too, and a false hit only pins.
fn scan_body(sql: &[u8], start: usize, end: usize) -> Option<PinReason> {
    let body = sql.get(..end)?;
    let mut watch = Watch {
        in_body: true,
        ..Watch::default()
    };
    let mut i = start;
    while let Some(&c) = body.get(i) {
        let from = i;
        i += 1;
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
            return Some(pin);
        }
    }
    None
}

/// Patterns that pin wherever they occur in a statement (or a body).
#[derive(Default)]
struct Watch {
    /// Inside a dollar-quoted body: also look for LISTEN and SET statements.
    in_body: bool,
    prev: Tok,
    prev2: Tok,
    /// Just after `CREATE [OR REPLACE] [GLOBAL|LOCAL]`, where TEMP may come.
    after_create: bool,
    /// Just after a SET that starts a statement inside a body.
    after_set: bool,
}

impl Watch {
    fn feed(&mut self, sql: &[u8], tok: Tok) -> Option<PinReason> {
        // Before word_pin, which may arm it for the next token.
        let set = self.body_set_pin(sql, tok);
        let pin = match tok {
            Tok::Punct(b'(') => call_pin(sql, self.prev),
            Tok::Word(..) => self.word_pin(sql, tok),
            Tok::Quoted(..) if ident_is(sql, tok, b"pg_temp") => Some(PinReason::TempObject),
            _ => None,
        };
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
        if kw(b"pg_temp") {
            return Some(PinReason::TempObject);
        }
        if kw(b"temp") || kw(b"temporary") {
            let into = is_kw(sql, self.prev, b"into")
                && !is_kw(sql, self.prev2, b"insert")
                && !is_kw(sql, self.prev2, b"merge");
            if self.after_create || into {
                return Some(PinReason::TempObject);
            }
        }
        if self.in_body && kw(b"listen") {
            return Some(PinReason::Listen);
        }
        if self.in_body && kw(b"set") && self.at_statement_start(sql) {
            self.after_set = true;
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

/// A call of a function that can change session state; any schema counts.
fn call_pin(sql: &[u8], name: Tok) -> Option<PinReason> {
    const LOCKS: [&[u8]; 4] = [
        b"pg_advisory_lock",
        b"pg_advisory_lock_shared",
        b"pg_try_advisory_lock",
        b"pg_try_advisory_lock_shared",
    ];
    if LOCKS.iter().any(|n| ident_is(sql, name, n)) {
        Some(PinReason::AdvisoryLock)
    } else if ident_is(sql, name, b"set_config") {
        Some(PinReason::SetConfig)
    } else {
        None
    }
}

/// Enough leading tokens for the longest form we read: `SET SESSION "a"."b" = DEFAULT`.
const HEAD: usize = 8;

/// One statement being read.
#[derive(Default)]
struct Stmt {
    head: [Tok; HEAD],
    /// Tokens seen, including those past `head`.
    n: usize,
    watch: Watch,
    /// First pin found by a pattern that may occur anywhere.
    found: Option<PinReason>,
    /// In a DECLARE before its FOR, where WITH HOLD may come.
    declare_open: bool,
}

impl Stmt {
    fn feed(&mut self, sql: &[u8], tok: Tok, want_pin: bool) {
        if let Some(slot) = self.head.get_mut(self.n) {
            *slot = tok;
        }
        self.n = self.n.saturating_add(1);
        if !want_pin || self.found.is_some() {
            return;
        }
        if self.n == 1 {
            self.declare_open = is_kw(sql, tok, b"declare");
        }
        let cursor = self.cursor_pin(sql, tok);
        let anywhere = self.watch.feed(sql, tok);
        let body = match tok {
            Tok::Body(s, e) => scan_body(sql, s, e),
            _ => None,
        };
        self.found = cursor.or(anywhere).or(body);
    }

    fn cursor_pin(&mut self, sql: &[u8], tok: Tok) -> Option<PinReason> {
        if !self.declare_open {
            None
        } else if is_kw(sql, tok, b"for") {
            self.declare_open = false;
            None
        } else if is_kw(sql, tok, b"hold") && is_kw(sql, self.watch.prev, b"with") {
            Some(PinReason::HoldCursor)
        } else {
            None
        }
    }

    /// Leading keywords come first in the text, so they win over `found`.
    fn finish(&self, sql: &[u8], tracked: &dyn Fn(&str) -> bool, fx: &mut SessionEffects) {
        let head = &self.head[..self.n.min(HEAD)];
        let kw = |i: usize, k: &[u8]| head.get(i).is_some_and(|&t| is_kw(sql, t, k));
        fx.drops_prepared |= (kw(0, b"discard") && kw(1, b"all"))
            || (kw(0, b"deallocate") && (kw(1, b"all") || (kw(1, b"prepare") && kw(2, b"all"))));
        if fx.pin.is_some() {
            return;
        }
        let lead = if kw(0, b"set") {
            set_pin(sql, head, self.n, tracked)
        } else if kw(0, b"listen") {
            Some(PinReason::Listen)
        } else if kw(0, b"load") {
            Some(PinReason::Load)
        } else if kw(0, b"prepare") {
            // PREPARE TRANSACTION 'gid' detaches the transaction from the session.
            let two_phase = kw(1, b"transaction") && head.get(2) == Some(&Tok::Str);
            (!two_phase).then_some(PinReason::SqlPrepare)
        } else {
            None
        };
        fx.pin = lead.or(self.found);
    }
}

/// A SET statement; `n` counts all its tokens, `head` holds the first few.
fn set_pin(
    sql: &[u8],
    head: &[Tok],
    n: usize,
    tracked: &dyn Fn(&str) -> bool,
) -> Option<PinReason> {
    let kw = |i: usize, k: &[u8]| head.get(i).is_some_and(|&t| is_kw(sql, t, k));
    if kw(1, b"local") || kw(1, b"transaction") || kw(1, b"constraints") {
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
        return Some(PinReason::SessionSet);
    };
    // `SET x TO DEFAULT` is RESET under another name: harmless.
    let resets = value + 1 == n && kw(value, b"default");
    (!resets && !tracked(&name)).then_some(PinReason::SessionSet)
}

/// The parameter a SET names at `head[i]`, and where its value starts.
/// None when the name is malformed or does not fit in `head`.
fn set_target(sql: &[u8], head: &[Tok], i: usize) -> Option<(Cow<'static, str>, usize)> {
    let kw = |i: usize, k: &[u8]| head.get(i).is_some_and(|&t| is_kw(sql, t, k));
    const SPECIAL: [(&[u8], &[u8], &str); 4] = [
        (b"time", b"zone", "timezone"),
        (b"xml", b"option", "xmloption"),
        (b"names", b"", "client_encoding"),
        (b"schema", b"", "search_path"),
    ];
    for (first, second, name) in SPECIAL {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use PinReason::*;

    fn tracked(name: &str) -> bool {
        matches!(
            name,
            "search_path" | "timezone" | "client_encoding" | "application_name"
        )
    }

    fn pin(sql: &str) -> Option<PinReason> {
        classify(sql.as_bytes(), &tracked).pin
    }

    fn check(cases: &[(&str, Option<PinReason>)]) {
        for (sql, want) in cases {
            assert_eq!(pin(sql), *want, "{sql}");
        }
    }

    /// The names a SET asked `tracked` about.
    fn asked(sql: &str) -> Vec<String> {
        let seen = RefCell::new(Vec::new());
        classify(sql.as_bytes(), &|n| {
            seen.borrow_mut().push(n.to_string());
            false
        });
        seen.into_inner()
    }

    #[test]
    fn ordinary_queries_pin_nothing() {
        for q in [
            "SELECT abalance FROM pgbench_accounts WHERE aid = 123;",
            "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
            "SELECT settings, my_set_config_col, set_config_x(1) FROM t",
            "BEGIN; SET LOCAL work_mem = '1MB'; COMMIT",
            "",
            ";;",
        ] {
            assert_eq!(
                classify(q.as_bytes(), &tracked),
                SessionEffects::default(),
                "{q}"
            );
        }
    }

    #[test]
    fn set_forms() {
        check(&[
            ("SET LOCAL work_mem = '1MB'", None),
            ("set local role admin", None),
            ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", None),
            ("SET TRANSACTION SNAPSHOT '00000003-1'", None),
            ("SET CONSTRAINTS ALL DEFERRED", None),
            ("SET SESSION AUTHORIZATION bob", Some(SessionAuthorization)),
            (
                "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
                Some(SessionCharacteristics),
            ),
            ("SET ROLE admin", Some(SetRole)),
            ("set session role admin", Some(SetRole)),
            ("/* SET LOCAL */ SET work_mem = 1", Some(SessionSet)),
            ("SET statement_timeout = 0", Some(SessionSet)),
            ("SET search_path = app, public", None),
            ("SET SESSION application_name TO 'x'", None),
            ("SET TIME ZONE 'UTC'", None),
            ("SET", Some(SessionSet)),
            ("SET 1 = 2", Some(SessionSet)),
        ]);
    }

    #[test]
    fn reset_and_set_to_default_do_not_pin() {
        check(&[
            ("RESET ALL", None),
            ("RESET ROLE", None),
            ("RESET SESSION AUTHORIZATION", None),
            ("SET work_mem TO DEFAULT", None),
            ("SET SESSION work_mem = default", None),
            ("SET TIME ZONE DEFAULT", None),
            ("SET work_mem TO \"default\"", Some(SessionSet)),
        ]);
        assert!(asked("SET work_mem TO DEFAULT").is_empty());
    }

    #[test]
    fn set_asks_tracked_with_the_parameter_name() {
        assert_eq!(asked("SET TIME ZONE 'UTC'"), ["timezone"]);
        assert_eq!(asked("SET SESSION NAMES 'UTF8'"), ["client_encoding"]);
        assert_eq!(asked("SET SCHEMA 'app'"), ["search_path"]);
        assert_eq!(asked("SET XML OPTION DOCUMENT"), ["xmloption"]);
        assert_eq!(asked("SET Work_Mem TO '1MB'"), ["work_mem"]);
        assert_eq!(asked("SET myapp.User_Id = 7"), ["myapp.user_id"]);
        assert_eq!(asked(r#"SET "My""App".X = 7"#), [r#"My"App.x"#]);
        assert_eq!(asked("SET search_path FROM CURRENT"), ["search_path"]);
    }

    #[test]
    fn quoted_parameter_names_keep_their_case() {
        assert_eq!(asked(r#"SET "TimeZone" = 'UTC'"#), ["TimeZone"]);
        assert_eq!(pin(r#"SET "TimeZone" = 'UTC'"#), Some(SessionSet));
        let blind = |n: &str| n.eq_ignore_ascii_case("timezone");
        assert_eq!(classify(br#"SET "TimeZone" = 'UTC'"#, &blind).pin, None);
    }

    #[test]
    fn listen_prepare_load_declare() {
        check(&[
            ("LISTEN jobs", Some(Listen)),
            ("UNLISTEN *", None),
            ("PREPARE q(int) AS SELECT $1", Some(SqlPrepare)),
            ("PREPARE TRANSACTION 'gid-1'", None),
            ("LOAD 'auto_explain'", Some(Load)),
            ("SELECT listen, load, prepare FROM t", None),
            ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", Some(HoldCursor)),
            (
                "declare c no scroll cursor with hold for select 1",
                Some(HoldCursor),
            ),
            ("DECLARE c CURSOR WITHOUT HOLD FOR SELECT 1", None),
            ("DECLARE c CURSOR FOR SELECT 1", None),
            (
                "DECLARE c CURSOR FOR WITH hold AS (SELECT 1) SELECT * FROM hold",
                None,
            ),
        ]);
    }

    #[test]
    fn temporary_objects() {
        check(&[
            ("CREATE TEMP TABLE t (a int)", Some(TempObject)),
            ("create global temporary table t (a int)", Some(TempObject)),
            ("CREATE LOCAL TEMP TABLE t AS SELECT 1", Some(TempObject)),
            (
                "CREATE OR REPLACE TEMP VIEW v AS SELECT 1",
                Some(TempObject),
            ),
            ("CREATE TEMP SEQUENCE s", Some(TempObject)),
            ("CREATE TABLE pg_temp.t (a int)", Some(TempObject)),
            (
                "CREATE FUNCTION \"pg_temp\".f() RETURNS int AS 'SELECT 1'",
                Some(TempObject),
            ),
            ("SELECT * INTO TEMP t FROM u", Some(TempObject)),
            ("SELECT 1 AS a INTO TEMPORARY TABLE t", Some(TempObject)),
            (
                "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
                Some(TempObject),
            ),
            ("SET search_path = pg_temp, public", Some(TempObject)),
            ("CREATE TABLE t (temp int, temporary text)", None),
            ("CREATE INDEX temp ON t (a)", None),
            ("INSERT INTO temp VALUES (1)", None),
            ("MERGE INTO temp USING u ON true DO NOTHING", None),
            ("SELECT temp, 'pg_temp' FROM my_pg_temp", None),
            ("DISCARD TEMP", None),
        ]);
    }

    #[test]
    fn discard_and_deallocate_all() {
        let drops = |q: &str| classify(q.as_bytes(), &tracked).drops_prepared;
        assert!(drops("DISCARD ALL") && drops("deallocate all"));
        assert!(drops("DEALLOCATE PREPARE ALL"));
        assert!(!drops("DEALLOCATE q") && !drops("DEALLOCATE \"all\"") && !drops("DISCARD PLANS"));
        assert_eq!(pin("DISCARD ALL"), None);
    }

    #[test]
    fn session_functions() {
        check(&[
            ("SELECT pg_advisory_lock(1)", Some(AdvisoryLock)),
            ("SELECT pg_advisory_lock_shared(1), 2", Some(AdvisoryLock)),
            ("select PG_TRY_ADVISORY_LOCK (1)", Some(AdvisoryLock)),
            (
                "SELECT pg_catalog.pg_try_advisory_lock_shared/* */(1, 2)",
                Some(AdvisoryLock),
            ),
            (
                "SELECT x FROM t WHERE pg_advisory_lock(id) IS NOT NULL",
                Some(AdvisoryLock),
            ),
            ("SELECT set_config('a.b', '1', false)", Some(SetConfig)),
            ("SELECT pg_catalog.set_config\n(x, y, z)", Some(SetConfig)),
            ("SELECT pg_advisory_xact_lock(1)", None),
            ("SELECT pg_try_advisory_xact_lock_shared(1)", None),
            ("SELECT pg_advisory_unlock(1)", None),
            (
                "SELECT 'pg_advisory_lock(1)', E'set_config(\\'', U&'set_config('",
                None,
            ),
            ("SELECT \"pg_advisory_lock(\" FROM t", None),
            ("SELECT pg_advisory_lock FROM t", None),
            ("SELECT my_set_config_col(1)", None),
            ("-- SELECT pg_advisory_lock(1)\nSELECT 1", None),
            ("/* /* SET ROLE x */ pg_advisory_lock( */ SELECT 1", None),
        ]);
    }

    #[test]
    fn dollar_bodies_are_scanned() {
        check(&[
            (
                "DO $$BEGIN PERFORM pg_advisory_lock(1); END$$",
                Some(AdvisoryLock),
            ),
            (
                "DO $f$ BEGIN EXECUTE 'CREATE TEMP TABLE t()'; END $f$",
                Some(TempObject),
            ),
            (
                "DO $$ BEGIN EXECUTE 'LISTEN ' || quote_ident(ch); END $$",
                Some(Listen),
            ),
            ("DO $$BEGIN SET work_mem = '1MB'; END$$", Some(SessionSet)),
            (
                "DO $$BEGIN IF x THEN SET ROLE admin; END IF; END$$",
                Some(SetRole),
            ),
            ("SELECT $q$ it's $q$, $$set_config($$", Some(SetConfig)),
            (
                "CREATE FUNCTION f() AS $b$ SELECT 1 INTO TEMP t $b$ LANGUAGE sql",
                Some(TempObject),
            ),
            (
                "DO $$BEGIN UPDATE t SET a = 1; SET LOCAL work_mem = 1; END$$",
                None,
            ),
            (
                "SELECT $1, $2::text, $tag$ pg_advisory_xact_lock(1) $tag$",
                None,
            ),
            ("SELECT a$b$c FROM t", None),
        ]);
    }

    #[test]
    fn quotes_and_comments_hide_semicolons() {
        check(&[
            ("SELECT 'a;b''; SET ROLE x'", None),
            ("SELECT E'\\'; SET ROLE x'", None),
            ("SELECT \"a;\"\"; SET ROLE x\"", None),
            ("SELECT U&\"; SET ROLE x\"", None),
            ("SELECT $x$ ; LOAD 'y' $x$", None),
            ("SELECT 1 /* ; /* ; */ SET ROLE x */", None),
            ("SELECT 1 -- ; SET ROLE x", None),
            ("SELECT 'it''s'; SET ROLE x", Some(SetRole)),
            ("SELECT $1; SET ROLE x", Some(SetRole)),
            ("SELECT 1 -- c\n; SET ROLE x", Some(SetRole)),
            ("SELECT e'\\\\'; SET ROLE x", Some(SetRole)),
        ]);
    }

    #[test]
    fn several_statements() {
        check(&[
            ("SELECT 1; SET work_mem = '1MB'", Some(SessionSet)),
            ("BEGIN; SET LOCAL x = 1; COMMIT", None),
            ("LISTEN a; SELECT pg_advisory_lock(1)", Some(Listen)),
            ("PREPARE p AS SELECT pg_advisory_lock($1)", Some(SqlPrepare)),
        ]);
        let fx = classify(b"DISCARD ALL; LOAD 'x'; DEALLOCATE ALL", &tracked);
        assert_eq!(
            fx,
            SessionEffects {
                pin: Some(Load),
                drops_prepared: true
            }
        );
    }

    #[test]
    fn malformed_and_non_utf8_input() {
        assert_eq!(
            classify(b"SET \xff\xfe = 1", &tracked).pin,
            Some(SessionSet)
        );
        assert_eq!(
            classify(b"SELECT \xc3\xa9t\xe9; LISTEN x", &tracked).pin,
            Some(Listen)
        );
        for q in [
            "SELECT 'abc",
            "SELECT \"ab",
            "SELECT $$ab",
            "SELECT $a$ $a",
            "/* /* */",
            "E'\\",
        ] {
            assert_eq!(pin(q), None, "{q}");
        }
        assert_eq!(pin("SELECT $$pg_advisory_lock(1)"), Some(AdvisoryLock));
    }

    /// xorshift64: deterministic noise without a new crate.
    fn noise(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn never_panics() {
        let tricky: &[&[u8]] = &[
            b"SET SESSION \"a\"\"b\".c TO DEFAULT; DO $x$ SET ROLE r; $x$ -- e'\\",
            b"U&'\\' E'\\\\'' $1$a$ /* /* */ */ $$ $ab$ SELECT INTO TEMP $ab$ \"",
            b"DECLARE c CURSOR WITH HOLD FOR SELECT set_config(\xff\x80, 'x')",
            b"CREATE OR REPLACE GLOBAL TEMP; PREPARE TRANSACTION; DEALLOCATE PREPARE",
        ];
        for t in tricky {
            for end in 0..=t.len() {
                classify(&t[..end], &tracked);
                classify(&t[end..], &tracked);
            }
        }
        let alphabet = b"'\"$-/*;(.=\\&eEuU_aZ0 \n\x80SETtmpLIS";
        let mut state = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let len = (noise(&mut state) % 40) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| match noise(&mut state) % 4 {
                    0 => noise(&mut state) as u8,
                    _ => alphabet[(noise(&mut state) % alphabet.len() as u64) as usize],
                })
                .collect();
            classify(&text, &tracked);
        }
    }

    #[test]
    fn large_inputs_stay_linear() {
        let mut deep = b"/*".repeat(200_000);
        deep.extend_from_slice(&b"*/".repeat(200_000));
        deep.extend_from_slice(b"; SET ROLE x");
        assert_eq!(classify(&deep, &tracked).pin, Some(SetRole));
        let mut dollars = format!("${}$", "a".repeat(100_000)).into_bytes();
        dollars.extend_from_slice(&b"$aaaa".repeat(100_000));
        assert_eq!(classify(&dollars, &tracked).pin, None);
    }
}
