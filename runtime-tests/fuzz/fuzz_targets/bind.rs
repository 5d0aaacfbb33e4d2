//! `reprorun_runtime::parse::bind` (`--bind SRC:DST[:ro|rw]`) and `reprorun_runtime::parse::target`.
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::bind(data));
