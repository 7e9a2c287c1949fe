//! The session-state classifier (`pgharbor::protocol::sql::classify`)
//! checked against an oracle: PostgreSQL itself.
//!
//! Every entry of the corpus (`tests/classifier_corpus/*.sql`, except
//! `setup.sql`, which runs once first) runs as one simple Query on a fresh
//! direct session. The session's state that outlives a transaction is
//! read before and after:
//!
//! - every `pg_settings` row (value and source), and the custom
//!   parameters in [`CUSTOM`] with `current_setting(name, true)` (NULL read
//!   as empty: a placeholder, once made, stays in the backend with an empty
//!   value even after a rollback, and no reset removes it, so pinning could
//!   not help);
//! - objects in the session's temporary schema (relations, functions, types);
//! - the session's advisory locks, `pg_listening_channels()`,
//!   `pg_prepared_statements`, `pg_cursors`, `current_user` and `session_user`;
//! - each sequence's `currval` (reported, never failed: pgharbor does not
//!   claim to handle it, see the printed report).
//!
//! Before its entry each session also prepares, at protocol level, a
//! statement named as pgharbor names the statements it prepares on a
//! backend ([`POOLER_STATEMENT`]), so that an entry which drops it shows.
//!
//! Then the classifier reads the entry (with the session's
//! standard_conforming_strings, and once more as `Strings::Unknown`, which
//! pgharbor uses while that setting may be changing: both readings must be
//! safe), and the test acts on it as pgharbor does ([`pooler_pin`]: `pin`,
//! or settings next to transaction control; otherwise pgharbor follows
//! `settings`, replaying each SET as written on the client's next
//! backends). Every change must be accounted for:
//!
//! - a parameter the server reports and pgharbor tracks (its built-in
//!   tracked parameters, when reported at login): the server reported the
//!   new value in a ParameterStatus, which is where pgharbor learns it (a
//!   change of source alone keeps the value);
//! - any other parameter, when not pinned: pgharbor's last followed SET of
//!   it, replayed on a fresh session, gives the same value and source (or
//!   its last followed RESET, and a fresh session has that value); and a
//!   followed SET must change no parameter but the one it is followed as;
//! - the pooler's statement disappearing needs `drops_prepared`;
//! - a ParameterStatus that changes standard_conforming_strings needs
//!   `changes_strings` (or a pin);
//! - anything else (temporary objects, advisory locks, LISTEN, cursors,
//!   SQL prepared statements, the user, loaded libraries' parameters)
//!   needs a pin.
//!
//! Entries that pin without changing anything are over-pinning: counted
//! and listed in the report, not failed. The report is printed when the
//! test passes (see it with `--nocapture`), is the panic message when it
//! fails (every failing entry with its diff and classifications), and is
//! written to `classifier_oracle.txt` in CARGO_TARGET_TMPDIR.
//!
//! Corpus format: text before a file's first `-- @@` line is a preamble.
//! Each `-- @@ [flags] [# note]` line starts an entry; the entry's text is
//! the lines up to the next such line, trimmed, with `{{CR}}`, `{{LF}}`,
//! `{{TAB}}`, `{{FF}}` and `{{VT}}` decoded to the control characters.
//! Lines `-- @before SQL` right after the header run (each as its own
//! Query, which must succeed) before the "before" snapshot; they may only
//! make state an unpinned client can have (followed settings), since any
//! other change the entry makes, undoing included, must pin. Flags:
//! `scs=off` runs the entry under `standard_conforming_strings = off`;
//! `error` says PostgreSQL must reject the entry, `may-fail` that it may
//! (the default: it must succeed); `pin` demands a pin for state the oracle
//! cannot see (LOAD of a library already loaded); `gap` marks state that
//! no reader of the SQL text can see (a function body in the database):
//! such an entry's unpinned changes are reported as known gaps, not failed.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::wire::{message, QueryResult, Session};
use common::{PgCluster, RawConn, Transport, TEST_DB};
use pgharbor::config::TRACKED_PARAMETERS;
use pgharbor::protocol::sql::{classify, SessionEffects, Setting, Strings};

/// The protocol-level statement each session holds before its entry.
const POOLER_STATEMENT: &str = "PGHARBOR_1";

/// Custom parameters the corpus sets, read with `current_setting(name, true)`:
/// placeholders do not show in pg_settings, so one missing here is invisible.
const CUSTOM: &[&str] = &[
    "myext.foo",
    "myext.bar",
    "local.foo",
    "transaction.foo",
    "constraints.foo",
    "names.foo",
    "session.foo",
    "role.foo",
    "schema.foo",
    "time.zone",
    "xml.option",
    "characteristics.foo",
    "pg_catalog.timezone",
    "auto_explain.log_min_duration",
];

/// Settings every transaction sets afresh from their `default_` parameters
/// (a SET TRANSACTION leaves only their source behind): left out.
const PER_TRANSACTION: &str =
    "'transaction_isolation', 'transaction_read_only', 'transaction_deferrable'";

/// Startup options of every session: nothing an entry does may hang it.
const OPTIONS: &str = "-c lock_timeout=10s -c statement_timeout=60s";

/// One SELECT, so that rows need no separating: (kind, item, value).
const SNAPSHOT: &str = "\
SELECT 'setting'::text, s.name, s.setting FROM pg_catalog.pg_settings s
  WHERE s.name NOT IN ($PER_TRANSACTION$)
UNION ALL SELECT 'setting source', s.name, s.source FROM pg_catalog.pg_settings s
  WHERE s.name NOT IN ($PER_TRANSACTION$)
UNION ALL SELECT 'custom setting', n, coalesce(pg_catalog.current_setting(n, true), '')
  FROM pg_catalog.unnest($CUSTOM$::text[]) n
UNION ALL SELECT 'temp relation', c.relkind::text || ' ' || c.relname, ''
  FROM pg_catalog.pg_class c WHERE c.relnamespace = pg_catalog.pg_my_temp_schema()
UNION ALL SELECT 'temp function',
    p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')', ''
  FROM pg_catalog.pg_proc p WHERE p.pronamespace = pg_catalog.pg_my_temp_schema()
UNION ALL SELECT 'temp type', t.typname, ''
  FROM pg_catalog.pg_type t
  WHERE t.typnamespace = pg_catalog.pg_my_temp_schema() AND t.typrelid = 0
UNION ALL SELECT 'advisory lock', l.classid || ':' || l.objid || ':' || l.objsubid, l.mode
  FROM pg_catalog.pg_locks l
  WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid()
UNION ALL SELECT 'listen', ch, '' FROM pg_catalog.pg_listening_channels() ch
UNION ALL SELECT 'prepared statement', p.name, 'from_sql=' || p.from_sql
  FROM pg_catalog.pg_prepared_statements p
UNION ALL SELECT 'cursor', c.name, 'holdable=' || c.is_holdable FROM pg_catalog.pg_cursors c
UNION ALL SELECT 'user', 'current_user', current_user::text
UNION ALL SELECT 'user', 'session_user', session_user::text
UNION ALL SELECT 'sequence', q.seq, q.val FROM public.oracle_seq_state() q";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Succeeds,
    Fails,
    Either,
}

#[derive(Debug)]
struct Entry {
    /// `file.sql:line` of the header.
    origin: String,
    note: String,
    text: String,
    before: Vec<String>,
    scs_off: bool,
    outcome: Outcome,
    must_pin: bool,
    gap: bool,
}

fn decode(s: &str) -> String {
    s.replace("{{CR}}", "\r")
        .replace("{{LF}}", "\n")
        .replace("{{TAB}}", "\t")
        .replace("{{FF}}", "\x0c")
        .replace("{{VT}}", "\x0b")
}

fn parse_corpus(file: &str, src: &str) -> Vec<Entry> {
    assert!(
        !src.contains('\r'),
        "{file}: write a carriage return as {{{{CR}}}}"
    );
    let mut out = Vec::new();
    let mut cur: Option<(Entry, Vec<&str>)> = None;
    let finish = |cur: Option<(Entry, Vec<&str>)>, out: &mut Vec<Entry>| {
        if let Some((mut e, body)) = cur {
            e.text = decode(body.join("\n").trim());
            assert!(!e.text.is_empty(), "{}: empty entry", e.origin);
            out.push(e);
        }
    };
    for (n, line) in src.split('\n').enumerate() {
        if let Some(header) = line.strip_prefix("-- @@") {
            finish(cur.take(), &mut out);
            let (flags, note) = header.split_once('#').unwrap_or((header, ""));
            let mut e = Entry {
                origin: format!("{file}:{}", n + 1),
                note: note.trim().to_string(),
                text: String::new(),
                before: Vec::new(),
                scs_off: false,
                outcome: Outcome::Succeeds,
                must_pin: false,
                gap: false,
            };
            for flag in flags.split_whitespace() {
                match flag {
                    "scs=off" => e.scs_off = true,
                    "error" => e.outcome = Outcome::Fails,
                    "may-fail" => e.outcome = Outcome::Either,
                    "pin" => e.must_pin = true,
                    "gap" => e.gap = true,
                    other => panic!("{file}:{}: unknown flag {other:?}", n + 1),
                }
            }
            cur = Some((e, Vec::new()));
        } else if let Some((e, body)) = cur.as_mut() {
            match line.strip_prefix("-- @before ") {
                Some(sql) if body.is_empty() => e.before.push(decode(sql.trim())),
                Some(_) => panic!("{file}:{}: -- @before after the entry's text", n + 1),
                None => body.push(line),
            }
        }
    }
    finish(cur, &mut out);
    out
}

fn load_corpus(dir: &Path) -> Vec<Entry> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|f| f.expect("read corpus dir").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .filter(|p| p.file_name().is_some_and(|n| n != "setup.sql"))
        .collect();
    files.sort();
    let mut entries = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let src = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        entries.extend(parse_corpus(&name, &src));
    }
    entries
}

/// (kind, item) -> value.
type Snapshot = BTreeMap<(String, String), String>;

fn must(c: &mut RawConn, sql: &str, what: &str) -> QueryResult {
    let r = c.query(sql);
    if let Some(e) = &r.error {
        panic!("{what}: {sql:?} failed: {} {}", e.code, e.message);
    }
    r
}

fn snapshot(c: &mut RawConn, sql: &str) -> Snapshot {
    let r = must(c, sql, "snapshot");
    r.rows
        .into_iter()
        .map(|row| {
            let col = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
            ((col(0), col(1)), col(2))
        })
        .collect()
}

/// Prepares [`POOLER_STATEMENT`] with Parse and Sync.
fn prepare_pooler_statement(c: &mut RawConn) {
    let mut body = format!("{POOLER_STATEMENT}\0SELECT 1\0").into_bytes();
    body.extend_from_slice(&[0, 0]);
    let mut bytes = message(b'P', &body);
    bytes.extend(message(b'S', &[]));
    c.send(&bytes).expect("send Parse");
    let r = c.read_query_result(WAIT);
    assert!(r.error.is_none(), "Parse {POOLER_STATEMENT}: {:?}", r.error);
}

const WAIT: Duration = Duration::from_secs(30);

/// What one entry did on PostgreSQL.
struct Run {
    before: Snapshot,
    after: Snapshot,
    error: Option<String>,
    /// ParameterStatus messages during the entry and its closing COMMIT/ROLLBACK.
    reported: Vec<(String, String)>,
    /// The entry left a transaction open (or failed): the harness ended it so.
    closed_with: Option<&'static str>,
    /// Parameter names the server reported at login.
    login_reported: Vec<String>,
    scs_at_start: String,
}

/// A fresh direct session as postgres, with plpgsql loaded (it adds its
/// parameters when first loaded, which must not show as a change).
fn open_session(pg: &PgCluster, what: &str) -> (RawConn, Session) {
    let mut c = RawConn::connect(&pg.endpoint(Transport::Unix));
    let session = c
        .login(
            &[
                ("user", "postgres"),
                ("database", TEST_DB),
                ("options", OPTIONS),
            ],
            None,
        )
        .unwrap_or_else(|err| panic!("{what}: login: {err:?}"));
    must(&mut c, "DO $$BEGIN END$$", what);
    (c, session)
}

/// Terminates and waits for the backend to go, so that its locks are
/// gone before the next session starts.
fn close_session(mut c: RawConn) {
    c.terminate();
    c.read_until_close(Duration::from_secs(10));
}

fn run_entry(pg: &PgCluster, e: &Entry, snapshot_sql: &str) -> Run {
    let (mut c, session) = open_session(pg, &e.origin);
    if e.scs_off {
        must(&mut c, "SET standard_conforming_strings = off", &e.origin);
    }
    for sql in &e.before {
        must(&mut c, sql, &e.origin);
    }
    prepare_pooler_statement(&mut c);
    let scs_at_start = must(&mut c, "SHOW standard_conforming_strings", &e.origin)
        .scalar()
        .unwrap_or_default();
    let before = snapshot(&mut c, snapshot_sql);
    let r = c.query(&e.text);
    let mut reported = r.params.clone();
    let closed_with = match r.status {
        b'T' => Some("COMMIT"),
        b'E' => Some("ROLLBACK"),
        _ => None,
    };
    if let Some(end) = closed_with {
        reported.extend(must(&mut c, end, &e.origin).params);
    }
    let after = snapshot(&mut c, snapshot_sql);
    close_session(c);
    Run {
        before,
        after,
        error: r.error.map(|e| format!("{} {}", e.code, e.message)),
        reported,
        closed_with,
        login_reported: session.params.keys().cloned().collect(),
        scs_at_start,
    }
}

/// How pgharbor acts on a classification (src/client/txn/rewrite): it pins
/// for `pin`, and also for a text with settings that controls the
/// transaction or has a savepoint command (which of its settings last then
/// is not followed); otherwise it follows `settings`, replaying each
/// followed SET as written on the client's later backends.
fn pooler_pin(fx: &SessionEffects) -> Option<String> {
    if let Some(p) = fx.pin {
        return Some(format!("{p:?}"));
    }
    let placed = fx.controls_transaction || fx.savepoint;
    (!fx.settings.is_empty() && placed)
        .then(|| "SessionSet (settings next to transaction control)".to_string())
}

/// What pgharbor believes parameter `name` is after the text: its last
/// followed SET (as SQL after `SET `), or its default.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Follow {
    Set(String),
    Default,
}

fn followed(fx: &SessionEffects, name: &str) -> Option<Follow> {
    let mut out = None;
    for s in &fx.settings {
        match s {
            Setting::Set { name: n, sql } if n.eq_ignore_ascii_case(name) => {
                out = Some(Follow::Set(sql.clone()))
            }
            Setting::Reset { name: n } if n.eq_ignore_ascii_case(name) => {
                out = Some(Follow::Default)
            }
            Setting::ResetAll => out = Some(Follow::Default),
            _ => {}
        }
    }
    out
}

/// The followed SETs of a classification, as SQL after `SET `.
fn followed_sets(fx: &SessionEffects) -> Vec<String> {
    fx.settings
        .iter()
        .filter_map(|s| match s {
            Setting::Set { sql, .. } => Some(sql.clone()),
            _ => None,
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A parameter the server reports, whose new value it reported.
    Reported,
    /// A followed SET: replayed on a fresh session, it gives this value.
    Replayed,
    /// A followed RESET: a fresh session has this value.
    ResetFollowed,
    /// The pooler's prepared statement is gone.
    PoolerStatementGone,
    /// Not the classifier's to judge (sequence state).
    Informational,
    /// Outlives the transaction and is not followed: only a pin makes it safe.
    NeedsPin,
}

/// One difference between the snapshots.
struct Change {
    kind: String,
    item: String,
    before: Option<String>,
    after: Option<String>,
}

impl Change {
    fn show(&self, class: Class) -> String {
        let show = |v: &Option<String>| match v {
            Some(v) => format!("{v:?}"),
            None => "(none)".to_string(),
        };
        format!(
            "{} {}: {} -> {} [{class:?}]",
            self.kind,
            self.item,
            show(&self.before),
            show(&self.after)
        )
    }
}

fn diff(run: &Run) -> Vec<Change> {
    let mut keys: Vec<&(String, String)> = run.before.keys().chain(run.after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| run.before.get(*k) != run.after.get(*k))
        .map(|(kind, item)| Change {
            kind: kind.clone(),
            item: item.clone(),
            before: run.before.get(&(kind.clone(), item.clone())).cloned(),
            after: run.after.get(&(kind.clone(), item.clone())).cloned(),
        })
        .collect()
}

/// What a change's class depends on besides the classification.
struct Context<'a> {
    tracked: &'a dyn Fn(&str) -> bool,
    run: &'a Run,
    /// Snapshots of fresh sessions after `SET <sql>`, by sql (Err: the SET failed).
    replays: &'a BTreeMap<String, Result<Snapshot, String>>,
    /// A fresh session's snapshot.
    baseline: &'a Snapshot,
}

fn class_of(c: &Change, fx: &SessionEffects, cx: &Context<'_>) -> Class {
    let key = (c.kind.clone(), c.item.clone());
    match c.kind.as_str() {
        "sequence" => Class::Informational,
        "prepared statement" if c.item == POOLER_STATEMENT && c.after.is_none() => {
            Class::PoolerStatementGone
        }
        "setting" | "setting source" if (cx.tracked)(&c.item) => {
            let reported = cx
                .run
                .reported
                .iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case(&c.item))
                .map(|(_, v)| v.clone());
            // A change of source alone keeps the value pgharbor knows; a
            // change of value also shows as a "setting" change.
            if c.kind == "setting source" || c.after == reported {
                Class::Reported
            } else {
                Class::NeedsPin
            }
        }
        "setting" | "setting source" | "custom setting" if pooler_pin(fx).is_none() => {
            match followed(fx, &c.item) {
                Some(Follow::Set(sql)) => match cx.replays.get(&sql) {
                    Some(Ok(snap)) if snap.get(&key) == c.after.as_ref() => Class::Replayed,
                    _ => Class::NeedsPin,
                },
                Some(Follow::Default) if cx.baseline.get(&key) == c.after.as_ref() => {
                    Class::ResetFollowed
                }
                _ => Class::NeedsPin,
            }
        }
        _ => Class::NeedsPin,
    }
}

/// Why a classification is not safe for what the entry did; empty when it is.
fn check_reading(
    e: &Entry,
    changes: &[Change],
    strings_changed: bool,
    fx: &SessionEffects,
    cx: &Context<'_>,
) -> Vec<String> {
    let mut out = Vec::new();
    let pinned = pooler_pin(fx).is_some();
    let classes: Vec<Class> = changes.iter().map(|c| class_of(c, fx, cx)).collect();
    let needs_pin = classes.iter().filter(|c| **c == Class::NeedsPin).count();
    if needs_pin > 0 && !pinned {
        out.push(format!(
            "{needs_pin} change(s) outlive the transaction, are not followed, and nothing pins"
        ));
    }
    if classes.contains(&Class::PoolerStatementGone) && !fx.drops_prepared {
        out.push(format!(
            "{POOLER_STATEMENT} is gone from the backend but drops_prepared is false"
        ));
    }
    if strings_changed && !fx.changes_strings && !pinned {
        out.push("standard_conforming_strings changed but changes_strings is false".into());
    }
    if e.must_pin && !pinned {
        out.push("the entry is marked `pin` and nothing pins".into());
    }
    if !pinned && cx.run.error.is_none() {
        for s in &fx.settings {
            let Setting::Set { name, sql } = s else {
                continue;
            };
            match cx.replays.get(sql) {
                Some(Err(err)) => out.push(format!(
                    "the followed `SET {sql}` fails when replayed: {err}"
                )),
                Some(Ok(snap)) => {
                    let others = changed_parameters(cx.baseline, snap)
                        .into_iter()
                        .filter(|p| !p.eq_ignore_ascii_case(name))
                        .collect::<Vec<_>>();
                    if !others.is_empty() {
                        out.push(format!(
                            "pgharbor follows this as {name:?}, but `SET {sql}` changes {others:?}"
                        ));
                    }
                }
                None => {}
            }
        }
    }
    out
}

/// The parameters whose value or source differ between two snapshots.
fn changed_parameters(a: &Snapshot, b: &Snapshot) -> Vec<String> {
    let kinds = ["setting", "setting source", "custom setting"];
    let mut out: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|(kind, _)| kinds.contains(&kind.as_str()))
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|(_, name)| name.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

struct Verdict<'a> {
    entry: &'a Entry,
    run: Run,
    changes: Vec<Change>,
    classes: Vec<Class>,
    fx: SessionEffects,
    fx_unknown: SessionEffects,
    problems: Vec<String>,
}

fn show_fx(fx: &SessionEffects) -> String {
    format!(
        "pin={:?} drops_prepared={} changes_strings={} settings={:?}{}{}",
        fx.pin,
        fx.drops_prepared,
        fx.changes_strings,
        fx.settings,
        if fx.controls_transaction {
            " controls_transaction"
        } else {
            ""
        },
        if fx.savepoint { " savepoint" } else { "" }
    )
}

impl Verdict<'_> {
    fn substantive(&self) -> bool {
        self.classes.iter().any(|c| *c != Class::Informational)
    }

    fn describe(&self, out: &mut String) {
        let e = self.entry;
        let _ = writeln!(out, "--- {} {}", e.origin, e.note);
        let _ = writeln!(out, "    text: {:?}", e.text);
        if e.scs_off || !e.before.is_empty() {
            let _ = writeln!(
                out,
                "    session: standard_conforming_strings={} before={:?}",
                self.run.scs_at_start, e.before
            );
        }
        let _ = writeln!(
            out,
            "    PostgreSQL: {}{}",
            self.run.error.as_deref().unwrap_or("ok"),
            self.run
                .closed_with
                .map(|c| format!(" (left a transaction open: the harness ran {c})"))
                .unwrap_or_default()
        );
        let _ = writeln!(out, "    classify: {}", show_fx(&self.fx));
        if self.fx_unknown != self.fx {
            let _ = writeln!(
                out,
                "    classify as Strings::Unknown: {}",
                show_fx(&self.fx_unknown)
            );
        }
        if !self.run.reported.is_empty() {
            let _ = writeln!(out, "    ParameterStatus: {:?}", self.run.reported);
        }
        for (c, class) in self.changes.iter().zip(&self.classes) {
            let _ = writeln!(out, "    {}", c.show(*class));
        }
        for p in &self.problems {
            let _ = writeln!(out, "    PROBLEM: {p}");
        }
    }
}

/// A fresh session after `SET <sql>`, as pgharbor would replay it.
fn replay(pg: &PgCluster, sql: &str, snapshot_sql: &str) -> Result<Snapshot, String> {
    let (mut c, _) = open_session(pg, "replay");
    let set = format!("SET {sql}");
    let r = c.query(&set);
    let out = match r.error {
        Some(e) => Err(format!("{} {}", e.code, e.message)),
        None => Ok(snapshot(&mut c, snapshot_sql)),
    };
    close_session(c);
    out
}

#[test]
fn postgresql_agrees_with_the_classifier_on_every_corpus_entry() {
    let started = Instant::now();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/classifier_corpus");
    let entries = load_corpus(&dir);
    assert!(entries.len() > 100, "corpus too small: {}", entries.len());
    let pg = PgCluster::shared();
    let setup = std::fs::read_to_string(dir.join("setup.sql")).expect("read setup.sql");
    {
        let mut c = RawConn::connect(&pg.endpoint(Transport::Unix));
        c.login(&[("user", "postgres"), ("database", TEST_DB)], None)
            .expect("setup login");
        must(&mut c, &setup, "setup.sql");
        close_session(c);
    }
    let custom = format!(
        "ARRAY[{}]",
        CUSTOM
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let snapshot_sql = SNAPSHOT
        .replace("$CUSTOM$", &custom)
        .replace("$PER_TRANSACTION$", PER_TRANSACTION);
    let baseline = {
        // The snapshot must be stable in an idle session.
        let (mut c, _) = open_session(pg, "baseline");
        let a = snapshot(&mut c, &snapshot_sql);
        let b = snapshot(&mut c, &snapshot_sql);
        assert_eq!(a, b, "two snapshots of an idle session differ");
        close_session(c);
        a
    };

    let mut replays: BTreeMap<String, Result<Snapshot, String>> = BTreeMap::new();
    let mut verdicts = Vec::new();
    for e in &entries {
        let run = run_entry(pg, e, &snapshot_sql);
        let login_reported = run.login_reported.clone();
        let tracked = move |name: &str| {
            TRACKED_PARAMETERS
                .iter()
                .any(|t| t.eq_ignore_ascii_case(name))
                && login_reported.iter().any(|r| r.eq_ignore_ascii_case(name))
        };
        let strings = if e.scs_off {
            Strings::Escaped
        } else {
            Strings::Standard
        };
        let fx = classify(e.text.as_bytes(), strings, &tracked);
        let fx_unknown = classify(e.text.as_bytes(), Strings::Unknown, &tracked);
        for sql in followed_sets(&fx)
            .into_iter()
            .chain(followed_sets(&fx_unknown))
        {
            if let std::collections::btree_map::Entry::Vacant(slot) = replays.entry(sql) {
                let r = replay(pg, slot.key(), &snapshot_sql);
                slot.insert(r);
            }
        }
        let changes = diff(&run);
        let strings_changed = run.reported.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("standard_conforming_strings") && *v != run.scs_at_start
        });
        let cx = Context {
            tracked: &tracked,
            run: &run,
            replays: &replays,
            baseline: &baseline,
        };
        let classes = changes.iter().map(|c| class_of(c, &fx, &cx)).collect();
        let mut problems = check_reading(e, &changes, strings_changed, &fx, &cx);
        for p in check_reading(e, &changes, strings_changed, &fx_unknown, &cx) {
            problems.push(format!("read as Strings::Unknown: {p}"));
        }
        match (e.outcome, &run.error) {
            (Outcome::Succeeds, Some(err)) => {
                problems.push(format!("corpus: the entry should succeed, got {err}"))
            }
            (Outcome::Fails, None) => {
                problems.push("corpus: the entry should fail on PostgreSQL and did not".into())
            }
            _ => {}
        }
        verdicts.push(Verdict {
            entry: e,
            run,
            changes,
            classes,
            fx,
            fx_unknown,
            problems,
        });
    }
    let elapsed = started.elapsed();
    let report = report(&verdicts, elapsed);
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("classifier_oracle.txt");
    let _ = std::fs::write(&path, &report);
    let failures = verdicts.iter().filter(|v| is_failure(v)).count();
    if failures == 0 {
        println!("{report}\n(report also in {})", path.display());
    }
    assert!(
        failures == 0,
        "{failures} corpus entries disagree with PostgreSQL (report also in {}):\n{report}",
        path.display()
    );
}

fn corpus_problem(v: &Verdict) -> bool {
    v.problems.iter().any(|p| p.starts_with("corpus:"))
}

fn is_failure(v: &Verdict) -> bool {
    !v.problems.is_empty() && (!v.entry.gap || corpus_problem(v))
}

fn report(verdicts: &[Verdict], elapsed: Duration) -> String {
    let failures: Vec<&Verdict> = verdicts.iter().filter(|v| is_failure(v)).collect();
    let gaps: Vec<&Verdict> = verdicts
        .iter()
        .filter(|v| v.entry.gap && !v.problems.is_empty() && !corpus_problem(v))
        .collect();
    let stale_gaps: Vec<&Verdict> = verdicts
        .iter()
        .filter(|v| v.entry.gap && v.problems.is_empty())
        .collect();
    let changed = verdicts.iter().filter(|v| v.substantive()).count();
    let pinned: Vec<&Verdict> = verdicts
        .iter()
        .filter(|v| pooler_pin(&v.fx).is_some())
        .collect();
    let followed = verdicts
        .iter()
        .filter(|v| pooler_pin(&v.fx).is_none() && v.classes.contains(&Class::Replayed))
        .count();
    let over: Vec<&&Verdict> = pinned
        .iter()
        .filter(|v| !v.substantive() && !v.entry.must_pin)
        .collect();
    let informational: Vec<&Verdict> = verdicts
        .iter()
        .filter(|v| v.classes.contains(&Class::Informational))
        .collect();
    let errored = verdicts.iter().filter(|v| v.run.error.is_some()).count();

    let mut out = String::new();
    let _ = writeln!(
        out,
        "classifier oracle: {} entries in {:.1} s; {errored} rejected by PostgreSQL; \
         {changed} changed session state; {} pinned; {followed} followed by replaying SETs",
        verdicts.len(),
        elapsed.as_secs_f64(),
        pinned.len()
    );
    let _ = writeln!(
        out,
        "failures: {}; known gaps: {}; over-pinning (pinned, nothing changed): {} of {} pinned",
        failures.len(),
        gaps.len(),
        over.len(),
        pinned.len()
    );
    let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
    for v in &over {
        *by_reason
            .entry(pooler_pin(&v.fx).unwrap_or_default())
            .or_default() += 1;
    }
    let _ = writeln!(out, "over-pinning by reason: {by_reason:?}");
    if !failures.is_empty() {
        let _ = writeln!(out, "\n=== FAILURES ===");
        for v in &failures {
            v.describe(&mut out);
        }
    }
    if !gaps.is_empty() {
        let _ = writeln!(
            out,
            "\n=== known gaps: state no reader of the text can see (not failed) ==="
        );
        for v in &gaps {
            v.describe(&mut out);
        }
    }
    if !stale_gaps.is_empty() {
        let _ = writeln!(out, "\n=== entries marked `gap` that are now safe ===");
        for v in &stale_gaps {
            let _ = writeln!(
                out,
                "{} {:?} {}",
                v.entry.origin,
                v.entry.text,
                show_fx(&v.fx)
            );
        }
    }
    let _ = writeln!(out, "\n=== over-pinning ===");
    for v in &over {
        let _ = writeln!(
            out,
            "{} {:?}: {}{}",
            v.entry.origin,
            v.entry.text,
            pooler_pin(&v.fx).unwrap_or_default(),
            v.run
                .error
                .as_deref()
                .map(|e| format!(" (PostgreSQL: {e})"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(
        out,
        "\n=== sequence state left behind (currval; pgharbor does not follow it) ==="
    );
    for v in &informational {
        let pin = pooler_pin(&v.fx).unwrap_or_else(|| "not pinned".into());
        let _ = writeln!(out, "{} {:?}: {pin}", v.entry.origin, v.entry.text);
    }
    out
}
