//! The egress proxy's reading of a tunnel's TLS ClientHello (its server name): bytes a
//! sandboxed client sends.
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::proxy_sni(data));
