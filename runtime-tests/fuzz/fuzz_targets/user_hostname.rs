//! `reprorun_runtime::parse::user` (`--user UID:GID`) and `reprorun_runtime::parse::hostname` (`--hostname`).
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::user_hostname(data));
