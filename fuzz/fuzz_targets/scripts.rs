//! Sequences of transition-script calls against MemoryStore: see `orq_fuzz::scripts`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: orq_fuzz::scripts::Input| {
    orq_fuzz::scripts::run(&input);
});
