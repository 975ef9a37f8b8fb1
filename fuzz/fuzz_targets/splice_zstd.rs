#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| (zcio_fuzz::targets::splice_zstd::run)(data));
