//! `reprorun_runtime::parse::duration` (`--timeout`, `--clock tick=STEP`, ...).
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::duration(data));
