//! The exec-time ELF reader (static? Go? where is `runtime.cputicks`?): the bytes of a
//! program the workload may have written itself.
//! The checks are in `runtime-tests/fuzz/oracles.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reprorun_fuzz::elf(data));
