//! cargo-fuzz target `startup`: the property in `pgharbor::fuzzing::startup`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(failure) = pgharbor::fuzzing::startup::check(data) {
        panic!("{failure}");
    }
});
