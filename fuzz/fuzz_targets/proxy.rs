//! cargo-fuzz target `proxy`: the property in `pgharbor::fuzzing::proxy`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(failure) = pgharbor::fuzzing::proxy::check(data) {
        panic!("{failure}");
    }
});
