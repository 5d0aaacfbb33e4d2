//! `reprorun_runtime::parse::bind` (`--bind SRC:DST[:ro|rw]`) and `reprorun_runtime::parse::target`.
#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;

/// What `target` documents for an accepted mount target.
fn check_target(input: &str, p: &Path) {
    assert!(p.is_absolute(), "{input:?} -> {p:?} is not absolute");
    assert!(
        !p.components().any(|c| matches!(c, Component::ParentDir)),
        "{input:?} -> {p:?} has a '..' component"
    );
    assert!(p.components().count() >= 2, "{input:?} -> {p:?} is /");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = reprorun_runtime::parse::target(text) {
        check_target(text, &p);
        // A normalized target is accepted again, unchanged.
        let again = p.to_str().expect("built from a &str");
        assert_eq!(reprorun_runtime::parse::target(again).as_ref(), Ok(&p), "{text:?}");
    }
    if let Ok(spec) = reprorun_runtime::parse::bind(text) {
        check_target(text, &spec.dest);
        assert!(!spec.src.as_os_str().is_empty(), "{text:?}: empty SRC");
    }
});
