//! One small simulation with an arbitrary configuration and faults: see `orq_fuzz::engine`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: orq_fuzz::engine::Input| {
    orq_fuzz::engine::run_input(&input);
});
