//! `reprorun_runtime::parse::duration` (`--timeout`, `--clock tick=STEP`, ...).
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = reprorun_runtime::parse::duration(text) {
        // The parser refuses anything above 1e9 seconds.
        assert!(d <= Duration::from_secs(1_000_000_000), "{text:?} -> {d:?}");
    }
});
