//! Issue 13 item 6: a test that cannot get what it needs fails, unless
//! `PGHARBOR_ALLOW_SKIP` says skipping is fine. One test, run alone in its
//! binary, since it sets the process's environment.

#[path = "common/skip.rs"]
mod skip;

#[test]
fn a_missing_dependency_fails_unless_skipping_is_allowed() {
    std::env::remove_var(skip::ALLOW_SKIP);
    let failed = std::panic::catch_unwind(|| skip::skip_or_fail("no such library")).is_err();
    assert!(failed, "a missing dependency must fail the test by default");
    for off in ["", "0", "false"] {
        std::env::set_var(skip::ALLOW_SKIP, off);
        assert!(!skip::skip_allowed(), "{off:?} must not allow skipping");
    }
    std::env::set_var(skip::ALLOW_SKIP, "1");
    assert!(std::panic::catch_unwind(|| skip::skip_or_fail("no such library")).is_ok());
    std::env::remove_var(skip::ALLOW_SKIP);
}
