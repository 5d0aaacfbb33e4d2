//! `reprorun_runtime::security::seccomp::parse_oci` (an OCI `linux.seccomp` profile for `--seccomp
//! FILE`) and the compilation of whatever it accepts into BPF.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reprorun_runtime::security::seccomp::{compile, parse_oci, SeccompProfile};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = parse_oci(text) {
        let profile = SeccompProfile::Oci {
            path: "fuzz.json".into(),
            spec,
        };
        // Unsupported actions and operators are errors, never panics; a compiled profile
        // always ends with the x32 blocker, so it is never empty.
        if let Ok(programs) = compile(&profile) {
            assert!(!programs.is_empty());
            assert!(programs
                .iter()
                .all(|p| !p.is_empty() && p.len() <= reprorun_runtime::security::seccomp::MAX_INSTRUCTIONS));
        }
    }
});
