//! The mirror server's reading of a request (method, path, `Accept`) and the file it names:
//! bytes a sandboxed pip or npm sends.
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::mirror_request(data));
