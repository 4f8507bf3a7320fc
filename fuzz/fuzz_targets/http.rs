//! The HTTP request decoders and the router: see `orq_fuzz::http`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: orq_fuzz::http::Input| {
    orq_fuzz::http::run(&input);
});
