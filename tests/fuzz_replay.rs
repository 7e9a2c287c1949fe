//! The fuzz targets on stable Rust: every committed corpus file through the
//! same checks cargo-fuzz runs (`pgharbor::fuzzing`), then a seeded random
//! run of bounded time. A failing input is printed as hex, ready to be added
//! to `fuzz/corpus/<target>/` (`echo HEX | xxd -r -p > fuzz/corpus/...`).
//!
//! `PGHARBOR_FUZZ_SEED=<u64>` picks another seed and
//! `PGHARBOR_FUZZ_SECONDS=<n>` runs each target for n seconds instead of the
//! default (about 4 s each, 3 targets).

use pgharbor::fuzzing::{Check, Failure, TARGETS};
use pgharbor::protocol::scan::Scanner;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

mod fuzz_gen;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs one input, turning a panic into a failure too.
fn run(check: Check, input: &[u8]) -> Result<(), Failure> {
    match catch_unwind(AssertUnwindSafe(|| check(input))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(Failure(format!("panicked: {msg}")))
        }
    }
}

fn report(target: &str, input: &[u8], f: &Failure) -> String {
    format!(
        "target {target}: {f}\n  input ({} bytes): {}",
        input.len(),
        hex(input)
    )
}

#[test]
fn committed_corpus_replays_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut failures = Vec::new();
    for (name, check) in TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} has no seeds", dir.display());
        for path in files {
            let input = std::fs::read(&path).unwrap();
            if let Err(f) = run(*check, &input) {
                failures.push(format!(
                    "{}\n  {}",
                    report(name, &input, &f),
                    path.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn seeded_random_inputs_hold_every_property() {
    let seed = std::env::var("PGHARBOR_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5047_4861_7262_6f72u64);
    let secs = std::env::var("PGHARBOR_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4.0f64);
    for (i, (name, check)) in TARGETS.iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(seed ^ i as u64);
        let deadline = Instant::now() + Duration::from_secs_f64(secs);
        let mut runs = 0u64;
        while Instant::now() < deadline {
            for _ in 0..64 {
                let input = fuzz_gen::input(name, &mut rng);
                if let Err(f) = run(*check, &input) {
                    panic!("{}\n  seed {seed}, run {runs}", report(name, &input, &f));
                }
                runs += 1;
            }
        }
        eprintln!("fuzz_replay: {name}: {runs} inputs in {secs} s (seed {seed})");
        assert!(runs > 0);
    }
}

/// The `scan` target found the scanner taking a length word of 0x3fffffff,
/// which PostgreSQL refuses (`PQ_LARGE_MESSAGE_LIMIT` is `MaxAllocSize -
/// 1`): it is refused now, like everything past PostgreSQL's limit.
#[test]
fn scanner_refuses_lengths_past_postgresqls_limit() {
    let at_limit = [b'd', 0x3f, 0xff, 0xff, 0xfe];
    let past_limit = [b'd', 0x3f, 0xff, 0xff, 0xff];
    assert!(Scanner::new().step(&at_limit, 0, |_| false, 64).is_ok());
    let taken = Scanner::new().step(&past_limit, 0, |_| false, 64).is_ok();
    assert!(!taken, "0x3fffffff is past PQ_LARGE_MESSAGE_LIMIT");
    let beyond = [b'd', 0x40, 0, 0, 0];
    assert!(Scanner::new().step(&beyond, 0, |_| false, 64).is_err());
}

#[test]
fn generators_reach_both_answers() {
    // A generator that only ever makes garbage (or only valid messages)
    // would leave half of each property untested.
    let mut rng = StdRng::seed_from_u64(1);
    let (mut ok, mut err) = (0, 0);
    for _ in 0..2000 {
        let input = fuzz_gen::view(*[0, 2, 4, 6].choose(&mut rng).unwrap(), &mut rng);
        let body = &input[1..];
        let accepted = match input[0] {
            0 => pgharbor::protocol::messages::Parse::parse(body).is_ok(),
            2 => pgharbor::protocol::messages::Describe::parse(body).is_ok(),
            4 => pgharbor::protocol::messages::Execute::parse(body).is_ok(),
            6 => pgharbor::protocol::messages::ReadyForQuery::parse(body).is_ok(),
            _ => continue,
        };
        if accepted {
            ok += 1
        } else {
            err += 1
        }
    }
    assert!(ok > 100 && err > 100, "accepted {ok}, refused {err}");
}
