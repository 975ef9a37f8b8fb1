#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| (zcio_fuzz::targets::registry_entry::run)(data));
