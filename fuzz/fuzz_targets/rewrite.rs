//! cargo-fuzz target `rewrite`: the property in `pgharbor::fuzzing::rewrite`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(failure) = pgharbor::fuzzing::rewrite::check(data) {
        panic!("{failure}");
    }
});
