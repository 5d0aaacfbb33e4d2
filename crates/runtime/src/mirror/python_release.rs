//! When each CPython feature release (X.Y.0) came out, so that `mirror pull` can say when
//! `--python` names a version that did not exist yet at the date it freezes: the index as it
//! stood then has no wheels built for it, and the project was not run on it.

/// (minor version of 3, release date of 3.MINOR.0 as `YYYY-MM-DD`), from python.org's
/// release pages. Versions after the table's last are not known: no warning for them.
const RELEASES: [(u32, &str); 15] = [
    (0, "2008-12-03"),
    (1, "2009-06-27"),
    (2, "2011-02-20"),
    (3, "2012-09-29"),
    (4, "2014-03-16"),
    (5, "2015-09-13"),
    (6, "2016-12-23"),
    (7, "2018-06-27"),
    (8, "2019-10-14"),
    (9, "2020-10-05"),
    (10, "2021-10-04"),
    (11, "2022-10-24"),
    (12, "2023-10-02"),
    (13, "2024-10-07"),
    (14, "2025-10-07"),
];

/// `YYYY-MM-DD` as seconds since the epoch (midnight UTC).
fn epoch(date: &str) -> i64 {
    super::parse_date("release", date).expect("the table's dates parse")
}

/// The minor version of a `3.Y` or `3.Y.Z` version string.
fn minor(python: &str) -> Option<u32> {
    let mut parts = python.trim().split('.');
    (parts.next()? == "3").then_some(())?;
    let minor = parts.next()?.parse().ok()?;
    parts.all(|p| p.parse::<u32>().is_ok()).then_some(minor)
}

/// The warning for `--python PYTHON` with a mirror frozen at `date` (seconds), when that
/// Python's first release came after the date; None when it came before, or is not known.
pub(crate) fn newer_than_date(python: &str, date: i64) -> Option<String> {
    let m = minor(python)?;
    let (_, released) = RELEASES.iter().find(|(v, _)| *v == m)?;
    if epoch(released) <= date {
        return None;
    }
    let day = super::rfc3339(date);
    let day = day.get(..10).unwrap_or(&day);
    let current = RELEASES.iter().rev().find(|(_, r)| epoch(r) <= date);
    let hint = match current {
        Some((v, _)) => {
            format!("pass --python 3.{v} (the newest then) or the version the project used")
        }
        None => "pass --python with the version the project used".to_string(),
    };
    Some(format!(
        "--python {python}: Python 3.{m} was released on {released}, after the mirror's date \
         {day}; the index then had no files built for it and the project was not run on it: {hint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_released_after_the_date_is_named_with_the_one_current_then() {
        let day = |d| epoch(d);
        let w = newer_than_date("3.11", day("2021-01-01")).unwrap();
        assert_eq!(
            w,
            "--python 3.11: Python 3.11 was released on 2022-10-24, after the mirror's date \
             2021-01-01; the index then had no files built for it and the project was not run \
             on it: pass --python 3.9 (the newest then) or the version the project used"
        );
        assert!(newer_than_date("3.11.4", day("2022-10-23")).is_some());
        // Released by the date (the day itself counts): no warning.
        assert_eq!(newer_than_date("3.11", day("2022-10-24")), None);
        assert_eq!(newer_than_date("3.8", day("2021-01-01")), None);
        // Before any Python 3: no "newest then" to suggest.
        let w = newer_than_date("3.0", day("2008-01-01")).unwrap();
        assert!(
            w.ends_with("pass --python with the version the project used"),
            "{w}"
        );
    }

    #[test]
    fn unknown_or_malformed_versions_give_no_warning() {
        let date = epoch("2001-01-01");
        for v in ["3.99", "2.7", "3", "3.x", "", "3.11.rc1", "4.0"] {
            assert_eq!(newer_than_date(v, date), None, "{v}");
        }
    }

    #[test]
    fn the_table_is_in_order() {
        assert!(RELEASES
            .windows(2)
            .all(|w| w[0].0 + 1 == w[1].0 && epoch(w[0].1) < epoch(w[1].1)));
    }
}
