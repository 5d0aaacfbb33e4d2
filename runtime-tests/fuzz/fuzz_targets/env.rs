//! `reprorun_runtime::parse::env_entry` (`--env KEY=VALUE`) and `reprorun_runtime::parse::env_file` (`--env-file`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((k, v)) = reprorun_runtime::parse::env_entry(text) {
        assert!(!k.is_empty() && !k.contains('='), "{text:?}: key {k:?}");
        assert!(!text.contains('\0'), "{text:?} accepted with a NUL");
        // KEY=VALUE splits at the first '=': joining them gives the entry back.
        assert_eq!(format!("{k}={v}"), text);
    }
    if let Ok(entries) = reprorun_runtime::parse::env_file("f", text) {
        assert!(entries.len() <= text.lines().count());
        for (k, v) in &entries {
            assert!(!k.is_empty(), "{text:?}: empty key");
            assert!(!k.contains('='), "{text:?}: key {k:?} contains '='");
            assert!(!k.contains(char::is_whitespace), "{text:?}: key {k:?}");
            assert!(!k.contains('\0') && !v.contains('\0'), "{text:?}: NUL");
        }
    }
});
