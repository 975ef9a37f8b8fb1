#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| (zcio_fuzz::targets::ring_attach::run)(data));
