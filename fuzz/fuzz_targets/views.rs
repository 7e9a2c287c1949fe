//! cargo-fuzz target `views`: the property in `pgharbor::fuzzing::views`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(failure) = pgharbor::fuzzing::views::check(data) {
        panic!("{failure}");
    }
});
