//! The egress proxy's SOCKS5 handshake (and, for any other first byte, its HTTP path, which
//! must refuse SOCKS4 and 4a): bytes a sandboxed client sends.
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::proxy_socks(data));
