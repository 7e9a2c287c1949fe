//! The differential protocol harness (see `tests/common/diff`): seeded
//! sequences of frontend messages run against PostgreSQL directly and
//! through pgharbor in session, transaction and statement pooling; the
//! replies must be equal except for the documented differences listed in
//! `tests/common/diff/norm.rs`.
//!
//! Default run: `cargo test --test differential -- --nocapture` (a fixed
//! number of sequences per mode). Longer campaigns: `scripts/diff-campaign`.
//! Replay one sequence: `PGHARBOR_DIFF_SEED=<seed> PGHARBOR_DIFF_CASES=1
//! cargo test --test differential <mode>_mode -- --nocapture`.

mod common;

use std::collections::BTreeMap;

use common::diff::campaign::{campaign, parse_seed, run_mode, Against, Settings};
use common::diff::gen::{generate, Action, Mode, Until};
use common::diff::msg::{check_frontend, encode_all, Fe, Param, Text};
use common::diff::norm::{self, Norm, TAG_LEN};
use common::diff::run::cut_offsets;

fn check_mode(mode: Mode) {
    let settings = Settings::from_env();
    let failures = run_mode(mode, &settings);
    assert!(
        failures.is_empty(),
        "{} pooling differs from PostgreSQL in {} sequence(s) (reports above):\n{}",
        mode.name(),
        failures.len(),
        failures
            .iter()
            .map(|f| format!("  seed {:#x}: {}", f.seed, f.line))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn session_mode_matches_postgresql() {
    check_mode(Mode::Session);
}

#[test]
fn transaction_mode_matches_postgresql() {
    check_mode(Mode::Transaction);
}

#[test]
fn statement_mode_matches_postgresql() {
    check_mode(Mode::Statement);
}

/// The harness's own check: the same sequences run twice on PostgreSQL
/// (other tables, other connections) must give the same transcripts, or
/// the harness reports nondeterminism as pooler bugs.
#[test]
fn postgresql_agrees_with_itself() {
    let settings = Settings::from_env();
    let mut failures = Vec::new();
    for mode in [Mode::Transaction, Mode::Statement] {
        failures.extend(campaign(mode, &settings, Against::Itself));
    }
    assert!(
        failures.is_empty(),
        "PostgreSQL differs from itself (a harness artefact) in {} sequence(s):\n{}",
        failures.len(),
        failures
            .iter()
            .map(|f| format!("  {} seed {:#x}: {}", f.mode.name(), f.seed, f.line))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// ---------------------------------------------------------------------------
// The generator itself

#[test]
fn the_same_seed_gives_the_same_sequence() {
    for mode in Mode::ALL {
        for seed in (0..300u64).chain([u64::MAX, 0xd1ff_0000]) {
            let a = generate(seed, mode);
            let b = generate(seed, mode);
            assert_eq!(a, b, "seed {seed:#x} in {} mode", mode.name());
            assert_eq!(a.show(), b.show());
        }
        let distinct: std::collections::HashSet<String> =
            (0..50u64).map(|s| generate(s, mode).show()).collect();
        assert!(
            distinct.len() >= 48,
            "seeds give different sequences: {} of 50",
            distinct.len()
        );
    }
}

fn all_actions(acts: &[Action], out: &mut Vec<Action>) {
    for a in acts {
        out.push(a.clone());
        if let Action::IfCopyIn(inner) = a {
            all_actions(inner, out);
        }
    }
}

#[test]
fn every_generated_message_is_well_formed() {
    let tag_a = norm::tag(7, 'd', "txn");
    let tag_b = norm::tag(7, 'p', "txn");
    assert_eq!((tag_a.len(), tag_b.len()), (TAG_LEN, TAG_LEN));
    for mode in Mode::ALL {
        for seed in 0..120u64 {
            let seq = generate(seed, mode);
            for st in &seq.steps {
                let mut acts = Vec::new();
                all_actions(&st.actions, &mut acts);
                for act in acts {
                    let msgs = match &act {
                        Action::Send { msgs, .. } | Action::SendPartialAndClose { msgs, .. } => {
                            msgs
                        }
                        _ => continue,
                    };
                    for m in msgs {
                        let one = m.encode(&tag_a);
                        let tags = check_frontend(&one).unwrap_or_else(|e| {
                            panic!(
                                "seed {seed:#x} {}: {} is malformed: {e}",
                                mode.name(),
                                m.show()
                            )
                        });
                        assert_eq!(tags.len(), 1, "{}", m.show());
                        let len = u32::from_be_bytes(one[1..5].try_into().unwrap()) as usize;
                        assert_eq!(len + 1, one.len(), "length word of {}", m.show());
                        assert_eq!(
                            one.len(),
                            m.encode(&tag_b).len(),
                            "{} has the same length on every target",
                            m.show()
                        );
                        assert!(
                            !String::from_utf8_lossy(&one).contains("{T}"),
                            "placeholder left in {}",
                            m.show()
                        );
                    }
                    let all = encode_all(msgs, &tag_a);
                    assert_eq!(check_frontend(&all).unwrap().len(), msgs.len());
                    if let Action::Send { cuts, .. } = &act {
                        for o in cut_offsets(all.len(), cuts) {
                            assert!(o > 0 && o < all.len());
                        }
                    }
                    // Queries only between batches: a Query never follows an
                    // extended message before its Sync.
                    let mut open_batch = false;
                    for m in msgs {
                        match m {
                            Fe::Query(_) => assert!(
                                !open_batch,
                                "seed {seed:#x}: a Query inside an unsynced batch"
                            ),
                            Fe::Sync => open_batch = false,
                            Fe::Parse { .. }
                            | Fe::Bind { .. }
                            | Fe::Execute { .. }
                            | Fe::Describe { .. }
                            | Fe::Close { .. } => open_batch = true,
                            _ => {}
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_checker_rejects_malformed_messages() {
    let good = Fe::bind("p", "s", vec![Param::Text(Text::s("x")), Param::Null]).encode("");
    assert!(check_frontend(&good).is_ok());
    let mut long = good.clone();
    long[4] += 1;
    assert!(check_frontend(&long).is_err(), "length word too large");
    let mut short = good.clone();
    short[4] -= 1;
    assert!(check_frontend(&short).is_err(), "length word too small");
    let mut no_nul = Fe::query("SELECT 1").encode("");
    let n = no_nul.len();
    no_nul[n - 1] = b' ';
    assert!(check_frontend(&no_nul).is_err(), "unterminated query");
    let int4 = Fe::bind("", "", vec![Param::Int4(5), Param::Text(Text::s("a"))]).encode("");
    assert!(check_frontend(&int4).is_ok(), "per-parameter formats");
}

/// What a set of sequences covers, by feature.
fn coverage(mode: Mode, seeds: std::ops::Range<u64>) -> BTreeMap<&'static str, usize> {
    let mut c: BTreeMap<&'static str, usize> = BTreeMap::new();
    for seed in seeds {
        let seq = generate(seed, mode);
        let mut see = |k: &'static str| *c.entry(k).or_default() += 1;
        for st in &seq.steps {
            if st.cancel {
                see("cancel race");
            }
            let mut acts = Vec::new();
            all_actions(&st.actions, &mut acts);
            for a in &acts {
                match a {
                    Action::Send { msgs, cuts } => {
                        if !cuts.is_empty() {
                            see("split write");
                        }
                        if msgs.iter().filter(|m| matches!(m, Fe::Sync)).count() > 1 {
                            see("pipelined batches");
                        }
                        if matches!(msgs.last(), Some(Fe::Flush)) {
                            see("flush before sync");
                        }
                        for m in msgs {
                            let size = m.encode("").len();
                            if size > 1 << 20 {
                                see("message over 1 MiB");
                            }
                            match m {
                                Fe::Query(t) => {
                                    let s = t.show();
                                    if s.contains("; ") {
                                        see("multi-statement query");
                                    }
                                    if s.starts_with("\"BEGIN") {
                                        see("BEGIN");
                                    }
                                    if s.contains("ROLLBACK") {
                                        see("ROLLBACK");
                                    }
                                    if s.contains("LISTEN ") {
                                        see("LISTEN");
                                    }
                                    if s.contains("NOTIFY") {
                                        see("NOTIFY");
                                    }
                                    if s.contains("RAISE NOTICE") {
                                        see("notice");
                                    }
                                    if s.contains("repeat(") {
                                        see("large reply");
                                    }
                                    if s.contains("COPY") && s.contains("FROM STDIN") {
                                        see("COPY FROM STDIN, simple");
                                    }
                                    if s.contains("TO STDOUT") {
                                        see("COPY TO STDOUT");
                                    }
                                    if s.contains("SET LOCAL") {
                                        see("SET LOCAL");
                                    }
                                    if s == "\"\"" {
                                        see("empty query");
                                    }
                                }
                                Fe::Parse { name, sql, .. } => {
                                    see(if name.is_empty() {
                                        "unnamed statement"
                                    } else {
                                        "named statement"
                                    });
                                    if sql.show().contains("FROM STDIN") {
                                        see("COPY FROM STDIN, extended");
                                    }
                                }
                                Fe::Bind { portal, .. } if !portal.is_empty() => {
                                    see("named portal")
                                }
                                Fe::Describe { portal: true, .. } => see("Describe P"),
                                Fe::Describe { portal: false, .. } => see("Describe S"),
                                Fe::Execute { max_rows, .. } if *max_rows > 0 => see("row limit"),
                                Fe::Close { .. } => see("Close"),
                                Fe::CopyFail(_) => see("CopyFail"),
                                Fe::CopyData(t) if t.show().contains("notanumber") => {
                                    see("COPY data error")
                                }
                                _ => {}
                            }
                        }
                    }
                    Action::SendPartialAndClose { .. } => see("disconnect mid-message"),
                    Action::Read(Until::Replies(_)) => see("read after Flush"),
                    Action::Cancel { .. } => see("CancelRequest"),
                    Action::WaitActive(_) => see("wait until active"),
                    Action::Close => see("disconnect"),
                    Action::Terminate => see("Terminate"),
                    _ => {}
                }
            }
        }
    }
    c
}

#[test]
fn the_generator_covers_every_feature() {
    let want = [
        "split write",
        "pipelined batches",
        "flush before sync",
        "read after Flush",
        "message over 1 MiB",
        "multi-statement query",
        "BEGIN",
        "ROLLBACK",
        "SET LOCAL",
        "LISTEN",
        "NOTIFY",
        "notice",
        "large reply",
        "empty query",
        "COPY FROM STDIN, simple",
        "COPY FROM STDIN, extended",
        "COPY TO STDOUT",
        "CopyFail",
        "COPY data error",
        "unnamed statement",
        "named statement",
        "named portal",
        "Describe P",
        "Describe S",
        "row limit",
        "Close",
        "cancel race",
        "CancelRequest",
        "wait until active",
        "disconnect",
        "disconnect mid-message",
        "Terminate",
    ];
    for mode in Mode::ALL {
        let c = coverage(mode, 0xd1ff_0000..0xd1ff_0000 + 200);
        for w in want {
            let blocks = ["BEGIN", "ROLLBACK", "SET LOCAL"].contains(&w);
            let n = c.get(w).copied().unwrap_or(0);
            if mode == Mode::Statement && blocks {
                // Statement mode's sequences open no transaction block
                // (the one documented outcome is FATAL 0A000).
                let n = if w == "ROLLBACK" { 0 } else { n };
                assert_eq!(n, 0, "statement mode generates {w}");
            } else {
                assert!(
                    n > 0,
                    "{} mode: 200 sequences have no {w}: {c:?}",
                    mode.name()
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The normaliser

#[test]
fn the_normaliser_hides_exactly_the_documented_differences() {
    let tag = norm::tag(0xabc, 'p', "txn");
    let n = Norm {
        tag: tag.clone(),
        tables: vec![(16400, "a_{T}".into())],
    };
    // 1: BackendKeyData.
    assert_eq!(
        n.render(b'K', &[0, 0, 1, 2, 3, 4, 5, 6]),
        "BackendKeyData <pid> <key>"
    );
    // 2: the notification's sender pid, not its channel or payload.
    let mut notif = 4242i32.to_be_bytes().to_vec();
    notif.extend_from_slice(format!("ch_{tag}\0hello\0").as_bytes());
    assert_eq!(
        n.render(b'A', &notif),
        "NotificationResponse <pid> channel=\"ch_{T}\" payload=\"hello\""
    );
    // 3: the tag anywhere in a string.
    let mut err = Vec::new();
    for (k, v) in [
        (b'S', "ERROR".to_string()),
        (b'C', "23505".to_string()),
        (
            b'M',
            format!("duplicate key value violates unique constraint \"a_{tag}_pkey\""),
        ),
        (b'L', "123".to_string()),
    ] {
        err.push(k);
        err.extend_from_slice(v.as_bytes());
        err.push(0);
    }
    err.push(0);
    assert_eq!(
        n.render(b'E', &err),
        "ErrorResponse S=\"ERROR\" C=\"23505\" \
         M=\"duplicate key value violates unique constraint \\\"a_{T}_pkey\\\"\" L=\"123\""
    );
    // 4: the table OID of the target's own table only.
    let field = |oid: u32| {
        let mut b = 1i16.to_be_bytes().to_vec();
        b.extend_from_slice(b"id\0");
        b.extend_from_slice(&oid.to_be_bytes());
        b.extend_from_slice(&1i16.to_be_bytes());
        b.extend_from_slice(&23u32.to_be_bytes());
        b.extend_from_slice(&4i16.to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&0i16.to_be_bytes());
        b
    };
    assert_eq!(
        n.render(b'T', &field(16400)),
        "RowDescription [\"id\" table=a_{T} col=1 type=23 size=4 mod=-1 fmt=0]"
    );
    assert_eq!(
        n.render(b'T', &field(16401)),
        "RowDescription [\"id\" table=16401 col=1 type=23 size=4 mod=-1 fmt=0]"
    );
    // Nothing else: ParameterStatus values are compared as they are.
    assert_eq!(
        n.render(b'S', b"application_name\0psql\0"),
        "ParameterStatus \"application_name\"=\"psql\""
    );
    // Long values by length and hash: equal values, equal lines.
    let big = |c: u8| {
        let mut b = 1i16.to_be_bytes().to_vec();
        b.extend_from_slice(&(300i32).to_be_bytes());
        b.extend(std::iter::repeat_n(c, 300));
        b
    };
    assert_eq!(n.render(b'D', &big(b'x')), n.render(b'D', &big(b'x')));
    assert_ne!(n.render(b'D', &big(b'x')), n.render(b'D', &big(b'y')));
    // A truncated body is shown as malformed, never silently accepted.
    assert!(n.render(b'Z', b"").starts_with("malformed"));
}

#[test]
fn seeds_parse_in_decimal_and_hex() {
    assert_eq!(parse_seed("42"), Some(42));
    assert_eq!(parse_seed("0xd1ff_0003"), Some(0xd1ff_0003));
    assert_eq!(parse_seed("0XFF"), Some(255));
    assert_eq!(parse_seed("zz"), None);
}
