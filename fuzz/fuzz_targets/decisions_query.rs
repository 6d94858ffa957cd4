#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tas_fuzz::entries::decisions_query(data));
