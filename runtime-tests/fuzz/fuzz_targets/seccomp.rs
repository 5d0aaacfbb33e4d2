//! `reprorun_runtime::security::seccomp::parse_oci` (an OCI `linux.seccomp` profile for `--seccomp
//! FILE`) and the compilation of whatever it accepts into BPF.
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::seccomp(data));
