//! The egress proxy's HTTP request heads (CONNECT and absolute-form), the head it sends
//! upstream and the request body's framing: bytes a sandboxed client sends.
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::proxy_http(data));
