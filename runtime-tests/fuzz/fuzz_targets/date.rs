//! `reprorun_runtime::determinism::parse_date` (`--date`), `clock::parse_date_choice` and
//! `clock::parse_clock_mode` (`--clock`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use reprorun_runtime::determinism::{clock, date, parse_date, DateChoice};

/// 9999-12-31T23:59:59Z, the last instant `parse_date` accepts (date.rs: MAX_EPOCH).
const MAX_EPOCH: i64 = 253_402_300_799;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_date(text);
    if let Ok(secs) = parsed {
        assert!((0..=MAX_EPOCH).contains(&secs), "{text:?} -> {secs}");
        // Round trip: the RFC 3339 form of an accepted date names the same second
        // (parse_date drops fractions; format_rfc3339 with 0 ns writes ".000").
        let formatted = date::format_rfc3339(secs, 0);
        assert_eq!(
            parse_date(&formatted),
            Ok(secs),
            "{text:?} -> {secs} -> {formatted:?}"
        );
    }
    let choice = clock::parse_date_choice(text);
    if text.trim() == "now" {
        assert_eq!(choice, Ok(DateChoice::Now));
    } else {
        assert_eq!(choice, parsed.map(DateChoice::Pinned), "{text:?}");
    }
    let _ = clock::parse_clock_mode(text);
});
