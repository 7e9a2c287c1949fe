//! What a test does when something it needs from outside the repository
//! (a client library from PyPI, PgBouncer, PostgreSQL 18 binaries) cannot
//! be had: it fails, since a test that skips quietly passes whether or not
//! the code works. `scripts/test.sh` installs all of them on a Debian
//! machine. `PGHARBOR_ALLOW_SKIP=1` turns the failure into a skip, for a
//! machine that cannot install them (no network, no root).
//!
//! Self-contained, so a test binary that does not use the rest of `common`
//! can include it with `#[path = "common/skip.rs"] mod skip;`.

/// The one opt-out variable.
pub const ALLOW_SKIP: &str = "PGHARBOR_ALLOW_SKIP";

/// Whether `PGHARBOR_ALLOW_SKIP` is set to something other than empty, `0`
/// or `false`.
pub fn skip_allowed() -> bool {
    std::env::var(ALLOW_SKIP).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// Panics saying `missing` (what could not be had, and why) unless skipping
/// is allowed, in which case it says the test is skipped and returns, and
/// the caller skips.
pub fn skip_or_fail(missing: &str) {
    if skip_allowed() {
        eprintln!("SKIPPED ({ALLOW_SKIP} is set): {missing}");
    } else {
        panic!(
            "{missing}\n(scripts/test.sh installs it; set {ALLOW_SKIP}=1 to skip this test instead)"
        );
    }
}
