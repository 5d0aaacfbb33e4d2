//! `reprorun_runtime::determinism::parse_date` (`--date`), `clock::parse_date_choice` and
//! `clock::parse_clock_mode` (`--clock`).
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::date(data));
