#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dray::fuzzing::TARGETS
    .iter()
    .find(|(name, _)| *name == "image_reference")
    .expect("a target of dray::fuzzing")
    .1(data));
