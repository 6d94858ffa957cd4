#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tas_fuzz::entries::dra_selector(data));
