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
mod quick;
mod set;
#[cfg(test)]
mod tests;
mod watch;

use lex::*;
pub use set::Setting;
use set::{changes_strings, set_effects};
use watch::{scan_body, Watch};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
// The names as a takeover sends them.
#[serde(rename_all = "kebab-case")]
pub enum Strings {
    /// standard_conforming_strings on (the default): an ordinary character.
    #[default]
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
    // Most queries in transaction pooling: settled without the lexer.
    if quick::nothing_to_do(sql) {
        return SessionEffects::default();
    }
    if quick::bare_transaction_control(sql) {
        return SessionEffects {
            controls_transaction: true,
            ..SessionEffects::default()
        };
    }
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
        if let Tok::Punct(b';') = tok {
            stmt.finish(sql, tracked, &mut fx);
            stmt = Stmt::default();
        } else {
            stmt.feed(sql, (tok, lexer.start, lexer.pos), fx.pin.is_none());
        }
    }
    stmt.finish(sql, tracked, &mut fx);
    if lexer.unterminated || lexer.escaped_ident {
        // PostgreSQL refuses an unterminated text whole, so a pin costs
        // nothing then; a U&"..." name may spell any name the pooler looks
        // for. Guessing wrong would cost a session.
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

/// True for a statement whose first word is SELECT, INSERT, UPDATE, DELETE,
/// WITH, VALUES or TABLE: no leading keyword of it changes the session.
fn plain_statement(sql: &[u8], first: Tok) -> bool {
    matches!(first, Tok::Word(s, e) if sql.get(s..e).is_some_and(plain_first_word))
}

/// [`plain_statement`]'s first words, any case.
fn plain_first_word(word: &[u8]) -> bool {
    const WORDS: [&[u8]; 7] = [
        b"select", b"insert", b"update", b"delete", b"with", b"values", b"table",
    ];
    WORDS.iter().any(|k| word.eq_ignore_ascii_case(k))
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
    /// A body in the statement may deallocate prepared statements.
    deallocates: bool,
    /// The statement is a SET (its value may be replayed).
    is_set: bool,
}

impl Stmt {
    fn feed(&mut self, sql: &[u8], (tok, start, end): (Tok, usize, usize), want_pin: bool) {
        if let Some(slot) = self.head.get_mut(self.n) {
            *slot = tok;
        }
        if self.n == 0 || self.is_set {
            if let Some(slot) = self.spans.get_mut(self.n) {
                *slot = (start, end);
            }
        }
        if self.n == 0 {
            self.is_set = is_kw(sql, tok, b"set");
            // UPDATE pg_settings, also inside WITH, calls set_config.
            self.watch.updating = is_kw(sql, tok, b"update") || is_kw(sql, tok, b"with");
        }
        // Only a SET's value is ever replayed.
        if self.is_set && !set::plain_value(sql, tok, (start, end)) {
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
        // The body of a DO or CREATE FUNCTION may be a plain string too.
        let routine = |t| is_kw(sql, t, b"do") || is_kw(sql, t, b"create");
        let (body, deallocates) = match tok {
            Tok::Body(s, e) => scan_body(sql, s, e),
            Tok::Str if routine(self.head[0]) => scan_body(sql, start, end),
            _ => (None, false),
        };
        self.deallocates |= deallocates;
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
        // Most statements are queries and DML: only what was found anywhere
        // in them matters (one look at the first word, not twenty).
        if plain_statement(sql, self.head[0]) {
            fx.pin = fx.pin.or(self.found);
            fx.drops_prepared |= self.deallocates;
            return;
        }
        let head = &self.head[..self.n.min(HEAD)];
        let kw = |i: usize, k: &[u8]| head.get(i).is_some_and(|&t| is_kw(sql, t, k));
        // DEALLOCATE of a name in the pooler's namespace drops one of its
        // statements: the pooler forgets them all on this backend.
        let name_at = if kw(1, b"prepare") { 2 } else { 1 };
        let ours = head
            .get(name_at)
            .and_then(|&t| match t {
                Tok::Word(s, e) | Tok::Quoted(s, e) => sql.get(s..e),
                _ => None,
            })
            .is_some_and(|n| n.len() >= 9 && n[..9].eq_ignore_ascii_case(b"pgharbor_"));
        fx.drops_prepared |= (kw(0, b"discard") && kw(1, b"all"))
            || (kw(0, b"deallocate") && (kw(name_at, b"all") || ours))
            || self.deallocates;
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
