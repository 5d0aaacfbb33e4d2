//! `reprorun_runtime::parse::env_entry` (`--env KEY=VALUE`) and `reprorun_runtime::parse::env_file` (`--env-file`).
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::env(data));
