//! cargo-fuzz target `scan`: the property in `pgharbor::fuzzing::scan`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(failure) = pgharbor::fuzzing::scan::check(data) {
        panic!("{failure}");
    }
});
