//! The properties the fuzz targets check, in one place, so that the
//! cargo-fuzz binaries under `fuzz/` and `tests/fuzz_replay.rs` (which runs
//! on stable Rust in the normal suite) test exactly the same thing.
//!
//! Each target is a function from arbitrary bytes to `Ok(())` or a
//! [`Failure`] naming the property that broke. A panic inside the code
//! under test is a failure too: cargo-fuzz reports it as a crash, the replay
//! test catches it and prints the input as hex.
//!
//! Adding a target (the owed-reply queue and the transaction-pooling
//! rewriter are expected next): write `pub fn check(data: &[u8]) ->
//! Result<(), Failure>` in a module here, add it to [`TARGETS`], copy
//! `fuzz/fuzz_targets/scan.rs` under the new name with a `[[bin]]` entry in
//! `fuzz/Cargo.toml`, and give it seeds in `fuzz/corpus/<name>/`. The replay
//! test picks up every entry of [`TARGETS`] and its corpus directory by
//! itself.

pub mod proxy;
pub mod replies;
pub mod rewrite;
pub mod scan;
pub mod startup;
pub mod views;

mod server_views;

/// A property that did not hold, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One fuzz target's check.
pub type Check = fn(&[u8]) -> Result<(), Failure>;

/// Every target by name; the name is also its `fuzz/fuzz_targets/` binary
/// and its `fuzz/corpus/` directory.
pub const TARGETS: &[(&str, Check)] = &[
    ("proxy", proxy::check),
    ("replies", replies::check),
    ("rewrite", rewrite::check),
    ("scan", scan::check),
    ("startup", startup::check),
    ("views", views::check),
];

/// Fails with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::fuzzing::Failure(format!($($msg)+)));
        }
    };
}
pub(crate) use ensure;

/// Lengths of the prefixes of `body` worth checking: all the short ones,
/// those around each NUL (where views change their answer), and the whole.
/// Bounded so a check stays linear-ish on large inputs.
pub(crate) fn prefixes(body: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let short = 0..=body.len().min(16);
    let around_nul = body
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == 0)
        .take(32)
        .flat_map(|(i, _)| [i, i + 1, i + 2]);
    short
        .chain(around_nul)
        .chain([body.len()])
        .filter(move |&n| n <= body.len())
}
