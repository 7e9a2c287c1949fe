//! Drives the harness for one pool mode: one pgharbor per mode, sequences
//! one after the other, each run directly and through the pooler and
//! compared; failures are reported with everything needed to replay them.
//!
//! Environment (read by [`Settings::from_env`]):
//! - `PGHARBOR_DIFF_SEED`: the first case's seed (decimal or 0x-hex); case
//!   `i` uses seed + i, so `PGHARBOR_DIFF_SEED=<a failing seed>
//!   PGHARBOR_DIFF_CASES=1` replays exactly that sequence.
//! - `PGHARBOR_DIFF_CASES`: sequences per mode (default [`DEFAULT_CASES`],
//!   unlimited when only `PGHARBOR_DIFF_SECONDS` is set).
//! - `PGHARBOR_DIFF_SECONDS`: start no new sequence after this long (per mode).
//! - `PGHARBOR_DIFF_MODES`: comma-separated modes to run (default all).
//! - `PGHARBOR_DIFF_TIMEOUT_MS`: bound of every read and wait (default 8000).
//! - `PGHARBOR_DIFF_SHRINK=1`: after a failure, drop steps one at a time
//!   while the same difference remains, and report the smallest sequence
//!   found with its `PGHARBOR_DIFF_KEEP` (slow: two runs and a fresh
//!   pooler per try).
//! - `PGHARBOR_DIFF_KEEP=0,3,7`: run only these steps of the generated
//!   sequence (to replay a shrunk one, with `PGHARBOR_DIFF_CASES=1`).
//! - `PGHARBOR_DIFF_VERBOSE=1`: a line per sequence; `2` also prints each
//!   sequence and PostgreSQL's transcript.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::conn::{startup, Admin, Conn, Ev};
use super::gen::{generate, Mode, Sequence};
use super::run::{compare, run, Ctx, Diff, Target};
use crate::common::{PgCluster, Pooler, PoolerOpts, TEST_DB};

/// Sequences per mode in the default run (the suite's).
pub const DEFAULT_CASES: u64 = 80;
/// The default run's first seed.
pub const DEFAULT_SEED: u64 = 0xd1ff_0000;

#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    pub cases: Option<u64>,
    pub seconds: Option<u64>,
    pub timeout: Duration,
    pub modes: Vec<Mode>,
    pub verbose: bool,
    /// Print every sequence and PostgreSQL's transcript (and the other
    /// side's when it differs).
    pub dump: bool,
    pub shrink: bool,
    pub keep: Option<Vec<usize>>,
}

pub fn parse_seed(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl Settings {
    pub fn from_env() -> Settings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let seed = var("PGHARBOR_DIFF_SEED")
            .map(|s| parse_seed(&s).unwrap_or_else(|| panic!("PGHARBOR_DIFF_SEED={s:?}")))
            .unwrap_or(DEFAULT_SEED);
        let seconds = var("PGHARBOR_DIFF_SECONDS").map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("PGHARBOR_DIFF_SECONDS={s:?}"))
        });
        let cases = match var("PGHARBOR_DIFF_CASES") {
            Some(s) => Some(
                s.parse()
                    .unwrap_or_else(|_| panic!("PGHARBOR_DIFF_CASES={s:?}")),
            ),
            None if seconds.is_some() => None,
            None => Some(DEFAULT_CASES),
        };
        let timeout = Duration::from_millis(
            var("PGHARBOR_DIFF_TIMEOUT_MS")
                .map(|s| s.parse().expect("PGHARBOR_DIFF_TIMEOUT_MS"))
                .unwrap_or(8000),
        );
        let modes = match var("PGHARBOR_DIFF_MODES") {
            Some(s) => s
                .split(',')
                .map(|m| Mode::from_name(m.trim()).unwrap_or_else(|| panic!("unknown mode {m:?}")))
                .collect(),
            None => Mode::ALL.to_vec(),
        };
        Settings {
            seed,
            cases,
            seconds,
            timeout,
            modes,
            verbose: var("PGHARBOR_DIFF_VERBOSE").is_some_and(|v| v != "0"),
            dump: var("PGHARBOR_DIFF_VERBOSE").is_some_and(|v| v == "2"),
            shrink: var("PGHARBOR_DIFF_SHRINK").is_some_and(|v| v != "0"),
            keep: var("PGHARBOR_DIFF_KEEP").map(|k| {
                k.split(',')
                    .map(|i| i.trim().parse().expect("PGHARBOR_DIFF_KEEP: step indices"))
                    .collect()
            }),
        }
    }
}

/// One failing sequence.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub mode: Mode,
    pub line: String,
}

/// The role a mode's clients log in as: one per mode and per kind of
/// campaign, so that concurrent tests never see each other's backends in
/// pg_stat_activity and pg_locks.
pub fn role(mode: Mode, against: Against) -> String {
    match against {
        Against::Pooler => format!("diff_{}", mode.short()),
        Against::Itself => format!("diff_{}_self", mode.short()),
    }
}

fn ensure_role(pg: &PgCluster, role: &str) {
    // Catalog updates of concurrent tests would race ("tuple concurrently
    // updated"): one at a time.
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    pg.psql_ok(
        TEST_DB,
        &format!(
            "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') \
             THEN CREATE ROLE {role} LOGIN; END IF; END$$"
        ),
    );
}

fn start_pooler(pg: &PgCluster, mode: Mode, timeout: Duration) -> Pooler {
    let role = role(mode, Against::Pooler);
    let p = Pooler::start(
        pg,
        PoolerOpts::default()
            .mode(mode.name())
            .pool_size(2)
            .auth("trust")
            .userlist(&[(&role, "unused")]),
    );
    // One client first, so the pool has a backend and knows the login
    // parameters, as it does after any earlier sequence.
    let mut c = Conn::connect(&p.socket_path(), timeout).expect("warm-up connect");
    c.send(&startup(&[("user", &role), ("database", TEST_DB)]))
        .expect("warm-up startup");
    let deadline = Instant::now() + timeout;
    let mut sent = false;
    loop {
        match c.read_msg(deadline) {
            Ev::Msg(b'Z', _) if !sent => {
                c.send(&super::msg::Fe::query("SELECT 1").encode(""))
                    .expect("warm-up query");
                sent = true;
            }
            Ev::Msg(b'Z', _) => break,
            Ev::Msg(b'E', body) => panic!("warm-up: {}", String::from_utf8_lossy(&body)),
            Ev::Msg(..) => {}
            other => panic!("warm-up through pgharbor ({}): {other:?}", mode.name()),
        }
    }
    c.close();
    p
}

fn log_tail(p: &Pooler, lines: usize) -> String {
    let text = p.log_text();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a campaign compares PostgreSQL with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Against {
    /// pgharbor in the mode.
    Pooler,
    /// PostgreSQL itself, a second time with other tables: every
    /// difference is the harness's own nondeterminism (or PostgreSQL's),
    /// never a pooler bug. The harness is only as good as this is quiet.
    Itself,
}

/// Runs the configured sequences for `mode`; returns the failures (each
/// already reported on stderr).
pub fn run_mode(mode: Mode, s: &Settings) -> Vec<Failure> {
    campaign(mode, s, Against::Pooler)
}

pub fn campaign(mode: Mode, s: &Settings, against: Against) -> Vec<Failure> {
    let name = match against {
        Against::Pooler => mode.name().to_string(),
        Against::Itself => format!("{} self-check", mode.name()),
    };
    if !s.modes.contains(&mode) {
        eprintln!("[diff {name}] skipped (PGHARBOR_DIFF_MODES)");
        return vec![];
    }
    let pg = PgCluster::shared();
    let role = role(mode, against);
    ensure_role(pg, &role);
    let mut admin = Admin::connect(&pg.socket_path(), TEST_DB);
    let mut pooler = match against {
        Against::Pooler => Some(start_pooler(pg, mode, s.timeout)),
        Against::Itself => None,
    };
    // Tags (and so table names) differ between concurrent campaigns of the
    // same mode by the target letter.
    let direct = Target {
        name: "PostgreSQL".into(),
        socket: pg.socket_path(),
        pooled: false,
        letter: if against == Against::Itself { 'e' } else { 'd' },
    };
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let mut failures: Vec<Failure> = Vec::new();
    let mut done = 0u64;
    eprintln!(
        "[diff {name}] first seed {:#x}, {} sequences{}",
        s.seed,
        s.cases
            .map(|c| c.to_string())
            .unwrap_or_else(|| "unlimited".into()),
        s.seconds
            .map(|t| format!(", at most {t} s"))
            .unwrap_or_default()
    );
    loop {
        if s.cases.is_some_and(|c| done >= c)
            || s.seconds
                .is_some_and(|t| started.elapsed() >= Duration::from_secs(t))
        {
            break;
        }
        let seed = s.seed.wrapping_add(done);
        let mut seq = generate(seed, mode);
        if let Some(k) = &s.keep {
            seq = seq.keep(k);
        }
        let t0 = Instant::now();
        let other = match &pooler {
            Some(p) => Target {
                name: "pgharbor".into(),
                socket: p.socket_path(),
                pooled: true,
                letter: 'p',
            },
            None => Target {
                name: "PostgreSQL again".into(),
                socket: pg.socket_path(),
                pooled: false,
                letter: 'f',
            },
        };
        let mut ctx = Ctx {
            admin: &mut admin,
            role: role.clone(),
            timeout: s.timeout,
        };
        let want = run(&seq, &direct, &mut ctx);
        let got = run(&seq, &other, &mut ctx);
        let exited = pooler.as_mut().and_then(|p| p.wait_exit(Duration::ZERO));
        let diff = compare((&direct.name, &other.name), &want, &got);
        let failed = diff.is_some() || exited.is_some();
        if s.verbose {
            eprintln!(
                "[diff {name}] seed {seed:#x}: {} ({} steps, {:.1} s)",
                if failed { "DIFFERS" } else { "same" },
                seq.steps.len(),
                t0.elapsed().as_secs_f64()
            );
        }
        if s.dump {
            eprintln!("{}{}", seq.show(), want.show(&direct.name));
            if failed {
                eprintln!("{}", got.show(&other.name));
            }
        }
        if failed {
            let line = match (&diff, exited) {
                (_, Some(st)) => format!("pgharbor exited ({st})"),
                (Some(d), None) => d.line(),
                (None, None) => unreachable!(),
            };
            let test = match against {
                Against::Pooler => format!("{}_mode", mode.name()),
                Against::Itself => "postgresql_agrees_with_itself".into(),
            };
            eprintln!(
                "\n==== {name}: {} differs from PostgreSQL: seed {seed:#x} (case {done} of this run) ====\n\
                 replay: PGHARBOR_DIFF_SEED={seed:#x} PGHARBOR_DIFF_CASES=1 PGHARBOR_DIFF_MODES={} \
                 cargo test --test differential {test} -- --nocapture\n{}{}\n{}{}==== end of seed {seed:#x} ====\n",
                other.name,
                mode.name(),
                exited
                    .map(|st| format!("  pgharbor exited: {st}\n"))
                    .unwrap_or_default(),
                diff.as_ref().map(|d| d.show()).unwrap_or_default(),
                seq.show(),
                pooler
                    .as_ref()
                    .map(|p| format!("---- pgharbor log, last lines ----\n{}\n", log_tail(p, 30)))
                    .unwrap_or_default(),
            );
            failures.push(Failure { seed, mode, line });
            if s.shrink && s.keep.is_none() {
                if let (Some(d), Some(p)) = (&diff, pooler.take()) {
                    drop(p);
                    shrink(pg, mode, s, &mut admin, &role, &seq, d);
                    pooler = Some(start_pooler(pg, mode, s.timeout));
                }
            }
            if let Some(p) = pooler.take() {
                // A fresh pooler, so that what this sequence left behind is
                // not blamed on the next one.
                drop(p);
                pooler = Some(start_pooler(pg, mode, s.timeout));
            }
        }
        done += 1;
        if last_progress.elapsed() >= Duration::from_secs(15) {
            last_progress = Instant::now();
            eprintln!(
                "[diff {name}] {done} sequences in {:.0} s, {} failing{}",
                started.elapsed().as_secs_f64(),
                failures.len(),
                if failures.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (seeds {})",
                        failures
                            .iter()
                            .map(|f| format!("{:#x}", f.seed))
                            .collect::<Vec<_>>()
                            .join(" ")
                    )
                }
            );
        }
    }
    eprintln!(
        "[diff {name}] done: {done} sequences in {:.1} s, {} failing",
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    for f in &failures {
        eprintln!("[diff {name}] FAILED seed {:#x}: {}", f.seed, f.line);
    }
    failures
}

/// What the shrinker keeps constant: where the difference is (the step's
/// kind, not its number) and what each side said there, digits dropped.
fn signature(d: &Diff) -> String {
    let strip =
        |s: &str| -> String { s.chars().filter(|c| !c.is_ascii_digit()).take(80).collect() };
    let label = d
        .label
        .split_once(']')
        .map(|(_, rest)| rest)
        .unwrap_or(&d.label);
    format!(
        "{} | {} | {}",
        strip(label),
        strip(d.direct.as_deref().unwrap_or("")),
        strip(d.pooled.as_deref().unwrap_or(""))
    )
}

/// Drops steps while the same difference remains; reports the result.
fn shrink(
    pg: &PgCluster,
    mode: Mode,
    s: &Settings,
    admin: &mut Admin,
    role: &str,
    seq: &Sequence,
    first: &Diff,
) {
    let want = signature(first);
    let mut keep: Vec<usize> = (0..seq.steps.len()).collect();
    let mut last = first.clone();
    let mut tries = 0;
    let started = Instant::now();
    loop {
        let mut changed = false;
        // The last step (B leaves) stays.
        let mut i = keep.len().saturating_sub(1);
        while i > 0 {
            i -= 1;
            let mut cand = keep.clone();
            cand.remove(i);
            let trial = seq.keep(&cand);
            let pooler = start_pooler(pg, mode, s.timeout);
            let pooled = Target {
                name: "pgharbor".into(),
                socket: pooler.socket_path(),
                pooled: true,
                letter: 'p',
            };
            let direct = Target {
                name: "PostgreSQL".into(),
                socket: pg.socket_path(),
                pooled: false,
                letter: 'd',
            };
            let mut ctx = Ctx {
                admin,
                role: role.to_string(),
                timeout: s.timeout,
            };
            let a = run(&trial, &direct, &mut ctx);
            let b = run(&trial, &pooled, &mut ctx);
            drop(pooler);
            tries += 1;
            if let Some(d) = compare(("PostgreSQL", "pgharbor"), &a, &b) {
                if signature(&d) == want {
                    keep = cand;
                    last = d;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let small = seq.keep(&keep);
    let keep_list: Vec<String> = keep.iter().map(|k| k.to_string()).collect();
    eprintln!(
        "\n==== shrunk seed {:#x} ({} mode) to {} of {} steps in {tries} tries, {:.0} s ====\n\
         replay: PGHARBOR_DIFF_SEED={:#x} PGHARBOR_DIFF_CASES=1 PGHARBOR_DIFF_MODES={} \
         PGHARBOR_DIFF_KEEP={} cargo test --test differential {}_mode -- --nocapture\n{}\n{}\
         ==== end of shrunk seed {:#x} ====\n",
        seq.seed,
        mode.name(),
        small.steps.len(),
        seq.steps.len(),
        started.elapsed().as_secs_f64(),
        seq.seed,
        mode.name(),
        keep_list.join(","),
        mode.name(),
        last.show(),
        small.show(),
        seq.seed
    );
}
