//! cargo-fuzz target `replies`: the property in `pgharbor::fuzzing::replies`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(failure) = pgharbor::fuzzing::replies::check(data) {
        panic!("{failure}");
    }
});
