//! Dates as users write them (`2024-03-01T12:00:00Z`, `2024-03-01`, `@1709294400`) and the
//! civil-calendar arithmetic the run record needs. No time-zone database: offsets only.

use thiserror::Error;

/// The documented default pinned date when neither `--date` nor the caller's
/// `SOURCE_DATE_EPOCH` says otherwise: 2024-01-01T00:00:00Z.
pub const DEFAULT_EPOCH: i64 = 1_704_067_200;

/// 9999-12-31T23:59:59Z, the last instant a date may name.
const MAX_EPOCH: i64 = 253_402_300_799;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DateError {
    #[error("invalid date {0:?}: expected RFC 3339 (2024-03-01T12:00:00Z), a plain date (2024-03-01) or @EPOCH")]
    Syntax(String),
    #[error("date {0:?} is out of range: it must lie between 1970-01-01 and 9999-12-31")]
    Range(String),
    #[error("invalid date {0:?}: {1}")]
    Calendar(String, String),
}

/// Parses a date into seconds since the Unix epoch (fractions of a second are dropped).
pub fn parse_date(text: &str) -> Result<i64, DateError> {
    let syntax = || DateError::Syntax(text.to_string());
    let t = text.trim();
    let secs = if let Some(epoch) = t.strip_prefix('@') {
        if epoch.is_empty() || !epoch.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
            return Err(syntax());
        }
        epoch.parse::<i64>().map_err(|_| {
            if epoch.starts_with('-') || epoch.len() > 12 {
                DateError::Range(text.to_string())
            } else {
                syntax()
            }
        })?
    } else {
        match parse_rfc3339(t) {
            Some(secs) => secs,
            None => {
                return Err(match calendar_problem(t) {
                    Some(why) => DateError::Calendar(text.to_string(), why),
                    None => syntax(),
                })
            }
        }
    };
    if !(0..=MAX_EPOCH).contains(&secs) {
        return Err(DateError::Range(text.to_string()));
    }
    Ok(secs)
}

fn digits(s: &str, n: usize) -> Option<i64> {
    (s.len() == n && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
}

/// What is wrong with a date shaped like YYYY-MM-DD whose month or day does not exist.
fn calendar_problem(t: &str) -> Option<String> {
    let date = t.get(0..10)?;
    let (y, m, d) = (
        digits(date.get(0..4)?, 4)?,
        digits(date.get(5..7)?, 2)?,
        digits(date.get(8..10)?, 2)?,
    );
    if date.as_bytes()[4] != b'-' || date.as_bytes()[7] != b'-' {
        return None;
    }
    if !(1..=12).contains(&m) {
        return Some(format!("month {m:02} is out of range (01-12)"));
    }
    let last = days_in_month(y, m);
    (d < 1 || d > last).then(|| format!("day {d:02} is out of range for {y:04}-{m:02} (01-{last})"))
}

fn parse_rfc3339(t: &str) -> Option<i64> {
    // Byte 10 may fall inside a multi-byte character (`2024年03月01日`): then it is no date.
    let (date, rest) = if t.len() > 10 {
        t.split_at_checked(10)?
    } else {
        (t, "")
    };
    let y = digits(date.get(0..4)?, 4)?;
    let m = digits(date.get(5..7)?, 2)?;
    let d = digits(date.get(8..10)?, 2)?;
    if date.as_bytes()[4] != b'-' || date.as_bytes()[7] != b'-' {
        return None;
    }
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    let mut secs = days_from_civil(y, m, d) * 86_400;
    if rest.is_empty() {
        return Some(secs);
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let hh = digits(rest.get(0..2)?, 2)?;
    let mm = digits(rest.get(3..5)?, 2)?;
    let ss = digits(rest.get(6..8)?, 2)?;
    if rest.as_bytes()[2] != b':' || rest.as_bytes()[5] != b':' || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    secs += hh * 3600 + mm * 60 + ss.min(59);
    let mut zone = &rest[8..];
    if let Some(frac) = zone.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        zone = &frac[n..];
    }
    let offset = match zone {
        "Z" | "z" => 0,
        _ => {
            let sign = match zone.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh = digits(zone.get(1..3)?, 2)?;
            let om = digits(zone.get(4..6)?, 2)?;
            if zone.len() != 6 || zone.as_bytes()[3] != b':' || oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    Some(secs - offset)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// Formats seconds and nanoseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn format_rfc3339(secs: i64, nanos: u32) -> String {
    let whole = rfc3339_secs(secs);
    format!("{}.{:03}Z", &whole[..whole.len() - 1], nanos / 1_000_000)
}

/// `YYYY-MM-DDTHH:MM:SSZ`: whole seconds since the epoch as RFC 3339 UTC (as package indexes
/// write upload times).
pub fn rfc3339_secs(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// A wall-clock time of the host (not a sandbox's) as RFC 3339 UTC with milliseconds.
pub fn timestamp(t: std::time::SystemTime) -> String {
    let d = t
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    format_rfc3339(d.as_secs() as i64, d.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        assert_eq!(parse_date("2024-03-01T12:00:00Z").unwrap(), 1_709_294_400);
        assert_eq!(parse_date("2024-03-01").unwrap(), 1_709_251_200);
        assert_eq!(parse_date("@1709294400").unwrap(), 1_709_294_400);
        assert_eq!(
            parse_date("2024-03-01T14:00:00+02:00").unwrap(),
            1_709_294_400
        );
        assert_eq!(
            parse_date("2024-03-01T12:00:00.250Z").unwrap(),
            1_709_294_400
        );
        assert_eq!(parse_date("1970-01-01").unwrap(), 0);
        assert_eq!(parse_date("9999-12-31T23:59:59Z").unwrap(), MAX_EPOCH);
        assert_eq!(parse_date("2024-01-01").unwrap(), DEFAULT_EPOCH);
    }

    #[test]
    fn refused_forms() {
        for bad in [
            "",
            "yesterday",
            "2024-03-01T25:00:00Z",
            "2024-03-01T12:00:00",
            "2024-3-1",
            "@",
            "@12x",
            "2024-03-01T12:00:00+2",
            // Byte 10 inside a multi-byte character (found by fuzzing: it used to panic).
            "2024年03月01日",
            "2024-03-0é",
            "\0\0\0\0\0\0\0\0\0\u{584}",
        ] {
            assert!(
                matches!(parse_date(bad), Err(DateError::Syntax(_))),
                "{bad:?}"
            );
        }
        // A month or day that does not exist is named.
        for (bad, why) in [
            ("2024-13-01", "month 13 is out of range (01-12)"),
            ("2023-02-29", "day 29 is out of range for 2023-02 (01-28)"),
            ("2024-02-30", "day 30 is out of range for 2024-02 (01-29)"),
            (
                "2024-04-31T12:00:00Z",
                "day 31 is out of range for 2024-04 (01-30)",
            ),
        ] {
            assert_eq!(
                parse_date(bad),
                Err(DateError::Calendar(bad.into(), why.into()))
            );
        }
        for bad in ["1969-12-31T23:59:59Z", "@-1", "@999999999999999"] {
            assert!(
                matches!(parse_date(bad), Err(DateError::Range(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn civil_round_trip() {
        for days in [-1, 0, 59, 60, 365, 19_723, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(
            format_rfc3339(1_709_294_400, 5_000_000),
            "2024-03-01T12:00:00.005Z"
        );
    }
}
