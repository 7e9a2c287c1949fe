//! Decides, in transaction pooling mode, whether a SQL text leaves session
//! state behind so that the client must keep its backend.
//!
//! This runs on every Query and Parse message, so it lexes the bytes once,
//! never allocates on the common path and never trusts the text to be valid
//! UTF-8 or even complete. It errs towards pinning: a needless pin costs one
//! backend, a missed one hands a stranger our client's session.
//!
//! It lexes as PostgreSQL lexes for that client: a backslash escapes inside
//! `'...'` only when the client's `standard_conforming_strings` is off, and
//! when that setting may be changing (a SET of it not yet answered) the text
//! must mean the same under both readings, or the client is pinned.

mod lex;
mod set;
#[cfg(test)]
mod tests;

use lex::*;
pub use set::Setting;
use set::{changes_strings, set_effects};

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
    /// Text the pooler cannot read with certainty: it ends inside a quote
    /// or comment, or means different things under the two readings of a
    /// backslash while standard_conforming_strings may be changing.
    Unreadable,
    /// A query too large for the pooler to read whole.
    TooLarge,
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
            PinReason::Unreadable => "SQL the pooler cannot read with certainty",
            PinReason::TooLarge => "query too large to classify",
        }
    }
}

/// What a SQL text does to state that outlives its transaction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionEffects {
    /// First reason found to pin the client (None: the text leaves no session state behind).
    pub pin: Option<PinReason>,
    /// DISCARD ALL or DEALLOCATE ALL (also `DEALLOCATE PREPARE ALL`): every prepared statement on the backend is gone.
    pub drops_prepared: bool,
    /// A statement may change standard_conforming_strings (a SET, SET LOCAL
    /// or RESET of it, RESET ALL, DISCARD ALL): until it is answered, how
    /// the client's next SQL reads is not known.
    pub changes_strings: bool,
    /// The session settings the text changes, in order: SETs the pooler
    /// can follow, and every RESET. (A SET it cannot follow pins instead.)
    pub settings: Vec<Setting>,
    /// A statement controls the transaction (BEGIN, COMMIT, ROLLBACK...):
    /// whether the settings outlive it depends on where each one falls.
    pub controls_transaction: bool,
    /// A statement decides what lasts of earlier settings in a way the
    /// pooler does not follow: SAVEPOINT, RELEASE, ROLLBACK TO, PREPARE
    /// TRANSACTION.
    pub savepoint: bool,
}

/// How PostgreSQL reads a backslash in `'...'` for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strings {
    /// standard_conforming_strings on (the default): an ordinary character.
    Standard,
    /// off: an escape, as in `E'...'`.
    Escaped,
    /// Not known (a change is in flight): the text must read the same both ways.
    Unknown,
}

impl Strings {
    /// The reading a `standard_conforming_strings` value gives.
    pub fn from_setting(value: Option<&str>) -> Strings {
        match value {
            Some(v) if v.eq_ignore_ascii_case("off") => Strings::Escaped,
            _ => Strings::Standard,
        }
    }
}

/// Classifies `sql`, read as PostgreSQL reads it for a client whose
/// backslashes read as `strings` says. `tracked(name)` is asked, with the
/// parameter name lower-cased (quoted identifiers keep their case) and
/// schema-qualified names joined with '.', whether the pooler follows that
/// parameter itself (then a plain SET of it does not pin).
///
/// PostgreSQL matches parameter names case-insensitively, so `SET "TimeZone"`
/// sets `timezone`; `tracked` gets `"TimeZone"` as written and should compare
/// case-insensitively if such a SET is not to pin.
pub fn classify(sql: &[u8], strings: Strings, tracked: &dyn Fn(&str) -> bool) -> SessionEffects {
    let standard = match strings {
        Strings::Standard => true,
        Strings::Escaped => false,
        // Without a backslash both readings are the same text.
        Strings::Unknown if !sql.contains(&b'\\') => true,
        Strings::Unknown => {
            let on = classify_as(sql, true, tracked);
            let off = classify_as(sql, false, tracked);
            if on == off {
                return on;
            }
            return SessionEffects {
                pin: Some(PinReason::Unreadable),
                drops_prepared: on.drops_prepared || off.drops_prepared,
                changes_strings: on.changes_strings || off.changes_strings,
                settings: vec![Setting::ResetAll],
                controls_transaction: on.controls_transaction || off.controls_transaction,
                savepoint: on.savepoint || off.savepoint,
            };
        }
    };
    classify_as(sql, standard, tracked)
}

/// [`classify`] with standard_conforming_strings `standard`.
fn classify_as(sql: &[u8], standard: bool, tracked: &dyn Fn(&str) -> bool) -> SessionEffects {
    let mut fx = SessionEffects::default();
    let mut stmt = Stmt::default();
    let mut lexer = Lexer::new(sql, standard);
    while let Some(tok) = lexer.next() {
        if tok == Tok::Punct(b';') {
            stmt.finish(sql, tracked, &mut fx);
            stmt = Stmt::default();
        } else {
            stmt.feed(sql, (tok, lexer.start, lexer.pos), fx.pin.is_none());
        }
    }
    stmt.finish(sql, tracked, &mut fx);
    if lexer.unterminated {
        // PostgreSQL refuses such a text whole; a pin costs nothing then,
        // and guessing wrong would cost a session.
        fx.pin.get_or_insert(PinReason::Unreadable);
    }
    fx
}

/// True when `sql` is a statement PostgreSQL runs inside a failed
/// transaction (`IsTransactionExitStmt`: COMMIT/END, ROLLBACK/ABORT,
/// ROLLBACK TO, PREPARE TRANSACTION), or no statement at all; any other
/// statement there gets 25P02.
pub fn ends_failed_transaction(sql: &[u8]) -> bool {
    // The statement's first word never depends on how backslashes read.
    let mut toks = Lexer::new(sql, true).filter(|t| *t != Tok::Punct(b';'));
    let Some(first) = toks.next() else {
        return true;
    };
    let kw = |t: Tok, k: &[u8]| is_kw(sql, t, k);
    if ["COMMIT", "END", "ROLLBACK", "ABORT"]
        .iter()
        .any(|k| kw(first, k.as_bytes()))
    {
        return true;
    }
    kw(first, b"PREPARE") && toks.next().is_some_and(|t| kw(t, b"TRANSACTION"))
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
    /// Where each token of `head` starts and ends in the text.
    spans: [(usize, usize); HEAD],
    /// Tokens seen, including those past `head`.
    n: usize,
    /// Where the last token seen ends.
    end: usize,
    /// The last token that cannot be part of a SET value the pooler
    /// replays (see [`set::plain_value`]).
    last_unplain: Option<usize>,
    watch: Watch,
    /// First pin found by a pattern that may occur anywhere.
    found: Option<PinReason>,
    /// In a DECLARE before its FOR, where WITH HOLD may come.
    declare_open: bool,
}

impl Stmt {
    fn feed(&mut self, sql: &[u8], (tok, start, end): (Tok, usize, usize), want_pin: bool) {
        if let Some(slot) = self.head.get_mut(self.n) {
            *slot = tok;
        }
        if let Some(slot) = self.spans.get_mut(self.n) {
            *slot = (start, end);
        }
        if !set::plain_value(sql, tok, (start, end)) {
            self.last_unplain = Some(self.n);
        }
        self.end = end;
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
        fx.changes_strings |= changes_strings(sql, head);
        let tx_words = [
            &b"begin"[..],
            b"start",
            b"commit",
            b"end",
            b"rollback",
            b"abort",
            b"savepoint",
            b"release",
        ];
        fx.controls_transaction |=
            tx_words.iter().any(|k| kw(0, k)) || (kw(0, b"prepare") && kw(1, b"transaction"));
        fx.savepoint |= kw(0, b"savepoint")
            || kw(0, b"release")
            || (kw(0, b"prepare") && kw(1, b"transaction"))
            || (kw(0, b"rollback") && head.iter().skip(1).take(2).any(|&t| is_kw(sql, t, b"to")));
        let set_pin = set_effects(sql, self, tracked, &mut fx.settings);
        if fx.pin.is_some() {
            return;
        }
        let lead = if kw(0, b"set") {
            set_pin
        } else if kw(0, b"listen") {
            Some(PinReason::Listen)
        } else if kw(0, b"load") {
            Some(PinReason::Load)
        } else if kw(0, b"prepare") {
            // PREPARE TRANSACTION 'gid' detaches the transaction from the session.
            let two_phase = kw(1, b"transaction") && matches!(head.get(2), Some(Tok::Str));
            (!two_phase).then_some(PinReason::SqlPrepare)
        } else {
            None
        };
        fx.pin = lead.or(self.found);
    }
}
