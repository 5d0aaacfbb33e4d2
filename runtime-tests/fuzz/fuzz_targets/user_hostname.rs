//! `reprorun_runtime::parse::user` (`--user UID:GID`) and `reprorun_runtime::parse::hostname` (`--hostname`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((uid, gid)) = reprorun_runtime::parse::user(text) {
        // The canonical spelling parses to the same pair.
        assert_eq!(reprorun_runtime::parse::user(&format!("{uid}:{gid}")), Ok((uid, gid)));
    }
    if let Ok(name) = reprorun_runtime::parse::hostname(text) {
        assert_eq!(name, text);
        assert!((1..=64).contains(&name.len()), "{text:?}");
    }
});
