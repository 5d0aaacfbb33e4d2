//! The clock sweep (`reproduce run --clock-sweep LIST`): the shim arm run again with its
//! clock on other days, and a bisection over days that finds the first day a test fails.
//! Pure functions over dates and recorded runs; the study makes the runs they ask for.
//!
//! A test that passes at the benchmark's date and fails on a later day is a time bomb; its
//! first failing day (`fails_after`) is found to the day by running the shim at the middle
//! day of the narrowest known (passing, failing) pair until the two are one day apart.

use std::collections::{BTreeMap, BTreeSet};

use reprorun_runtime::determinism::date::{civil_from_days, days_from_civil, parse_date};

use super::outcome::{self, Tests};
use super::store::RunRow;
use super::Arm;

const DAY: i64 = 86_400;

/// One point of `--clock-sweep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// The benchmark's own date (`created_at`).
    CreatedAt,
    /// The real date when the run is planned (`now`).
    Now,
    /// Years after the benchmark's date (`+16y`).
    Years(u32),
    /// Days after the benchmark's date (`+30d`).
    Days(u32),
    /// A date (`2038-01-20`), as days since the epoch.
    Day(i64),
}

/// Parses one `--clock-sweep` item.
pub(crate) fn parse_point(text: &str) -> Result<Point, String> {
    let t = text.trim();
    let bad = || format!("{t:?} is not created_at, now, +Ny, +Nd or a date (YYYY-MM-DD)");
    match t {
        "created_at" => return Ok(Point::CreatedAt),
        "now" => return Ok(Point::Now),
        _ => {}
    }
    if let Some(rest) = t.strip_prefix('+') {
        let (n, unit) = rest.split_at(rest.len().saturating_sub(1));
        let n: u32 = n.parse().map_err(|_| bad())?;
        return match unit {
            "y" if n <= 200 => Ok(Point::Years(n)),
            "d" if n <= 73_000 => Ok(Point::Days(n)),
            _ => Err(bad()),
        };
    }
    parse_day(t).map(Point::Day).ok_or_else(bad)
}

/// `YYYY-MM-DD` as days since the epoch.
pub(crate) fn parse_day(text: &str) -> Option<i64> {
    if text.len() != 10 {
        return None;
    }
    parse_date(&format!("{text}T00:00:00Z"))
        .ok()
        .map(|s| s.div_euclid(DAY))
}

/// Days since the epoch as `YYYY-MM-DD`.
pub(crate) fn day_name(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The instant of `day` at the benchmark's time of day.
pub(crate) fn on_day(bench_date: i64, day: i64) -> i64 {
    day * DAY + bench_date.rem_euclid(DAY)
}

/// The day a point stands for, for a benchmark dated `bench_date`, planned at `now`.
pub(crate) fn resolve(p: Point, bench_date: i64, now: i64) -> i64 {
    let bench_day = bench_date.div_euclid(DAY);
    match p {
        Point::CreatedAt => bench_day,
        Point::Now => now.div_euclid(DAY),
        Point::Days(n) => bench_day + i64::from(n),
        Point::Years(n) => {
            let (y, m, d) = civil_from_days(bench_day);
            // 29 February in a year without one is 1 March.
            let (y, m, d) = (y + i64::from(n), m, d);
            let first_of_month = days_from_civil(y, m, 1);
            first_of_month + d - 1
        }
        Point::Day(d) => d,
    }
}

/// Whether each listed test passed, in each shim-like run of one instance: the shim arm's
/// runs stand for the benchmark's own day.
fn by_day(rows: &[&RunRow], bench_day: i64, test: &str) -> BTreeMap<i64, Vec<bool>> {
    let mut out: BTreeMap<i64, Vec<bool>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.infra.is_none()) {
        let day = match r.arm {
            Arm::Shim => bench_day,
            Arm::ShimAt(d) => d,
            _ => continue,
        };
        let tests: Tests = serde_json::from_str(&r.tests).unwrap_or_default();
        let passed = outcome::lookup(&tests, &super::runners::Aliases::new(&tests), test)
            .is_some_and(|s| s.passes());
        out.entry(day).or_default().push(passed);
    }
    out
}

/// A test's time-bomb interval: the last day it passes before the first day it fails,
/// after the benchmark's day (both known from runs). `None`: it never fails on a later
/// day, or it does not pass on the benchmark's own day.
pub(crate) fn interval(rows: &[&RunRow], bench_date: i64, test: &str) -> Option<(i64, i64)> {
    let bench_day = bench_date.div_euclid(DAY);
    let days = by_day(rows, bench_day, test);
    let passes = |v: &Vec<bool>| v.iter().all(|p| *p);
    if !days.get(&bench_day).is_some_and(passes) {
        return None;
    }
    let first_fail = days
        .iter()
        .find(|(d, v)| **d > bench_day && !passes(v))
        .map(|(d, _)| *d)?;
    let last_pass = days
        .iter()
        .filter(|(d, v)| **d < first_fail && passes(v))
        .map(|(d, _)| *d)
        .max()?;
    Some((last_pass, first_fail))
}

/// A time bomb's first failing day known from the runs, and whether it is exact (the day
/// before it passed).
pub(crate) fn fails_after(rows: &[&RunRow], bench_date: i64, test: &str) -> Option<(i64, bool)> {
    interval(rows, bench_date, test).map(|(pass, fail)| (fail, fail - pass == 1))
}

/// The days still to run for one instance: the middle of every time bomb's interval wider
/// than a day.
pub(crate) fn next_days(rows: &[&RunRow], bench_date: i64, tests: &[String]) -> BTreeSet<i64> {
    tests
        .iter()
        .filter_map(|t| interval(rows, bench_date, t))
        .filter(|(pass, fail)| fail - pass > 1)
        .map(|(pass, fail)| pass + (fail - pass) / 2)
        .collect()
}

/// The sweep's runs still to make for one instance, as days: each day of `points` (planned
/// at `now`) not yet recorded, and the bisection's next days ([`next_days`]) — what one
/// round of `reproduce plan --phase sweep` plans. Empty: the sweep is done.
pub(crate) fn days_to_run(
    rows: &[&RunRow],
    bench_date: i64,
    tests: &[String],
    points: &[Point],
    now: i64,
) -> BTreeSet<i64> {
    let have: BTreeSet<i64> = rows
        .iter()
        .filter_map(|r| match r.arm {
            Arm::ShimAt(d) => Some(d),
            _ => None,
        })
        .collect();
    points
        .iter()
        .map(|p| resolve(*p, bench_date, now))
        .chain(next_days(rows, bench_date, tests))
        .filter(|d| !have.contains(d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(arm: Arm, passed: bool) -> RunRow {
        let status = if passed { "passed" } else { "failed" };
        RunRow {
            instance_id: "i".into(),
            arm,
            idx: 0,
            resolved: passed,
            infra: None,
            exit_code: 0,
            wall_ms: 1,
            started_at: 0,
            signature: String::new(),
            evidence: Vec::new(),
            apply: String::new(),
            tests: format!("{{\"t\": \"{status}\"}}"),
            stdout_sha256: String::new(),
            stderr_sha256: String::new(),
            junit_sha256: None,
            error: None,
            env: None,
        }
    }

    #[test]
    fn bisection_narrows_a_time_bomb_to_the_day() {
        let bench = 100 * DAY + 3600;
        // The test fails from day 137 on; the study knows the shim (day 100) and day 200.
        let fails_from = 137;
        let mut rows = vec![row(Arm::Shim, true), row(Arm::ShimAt(200), false)];
        let tests = vec!["t".to_string()];
        let mut rounds = 0;
        loop {
            let refs: Vec<&RunRow> = rows.iter().collect();
            let next = next_days(&refs, bench, &tests);
            if next.is_empty() {
                break;
            }
            for d in next {
                rows.push(row(Arm::ShimAt(d), d < fails_from));
            }
            rounds += 1;
            assert!(rounds < 20, "bisection does not end");
        }
        let refs: Vec<&RunRow> = rows.iter().collect();
        assert_eq!(fails_after(&refs, bench, "t"), Some((fails_from, true)));
        assert!(rounds <= 7, "log2(100) rounds, not {rounds}");
        // The cluster's rounds: the sweep's days first, then each round's middle day,
        // until nothing is left to plan.
        let points = [Point::CreatedAt, Point::Days(100)];
        let mut rows = vec![row(Arm::Shim, true)];
        let mut planned_rounds = 0;
        loop {
            let refs: Vec<&RunRow> = rows.iter().collect();
            let days = days_to_run(&refs, bench, &tests, &points, 0);
            if days.is_empty() {
                break;
            }
            if planned_rounds == 0 {
                assert_eq!(days, BTreeSet::from([100, 200]), "the sweep's own days");
            }
            rows.extend(
                days.into_iter()
                    .map(|d| row(Arm::ShimAt(d), d < fails_from)),
            );
            planned_rounds += 1;
            assert!(planned_rounds < 20, "the rounds do not end");
        }
        let refs: Vec<&RunRow> = rows.iter().collect();
        assert_eq!(fails_after(&refs, bench, "t"), Some((fails_from, true)));
        // A stable instance: the sweep's days, then nothing more.
        let stable = [
            row(Arm::Shim, true),
            row(Arm::ShimAt(100), true),
            row(Arm::ShimAt(200), true),
        ];
        let refs: Vec<&RunRow> = stable.iter().collect();
        assert!(days_to_run(&refs, bench, &tests, &points, 0).is_empty());
        // A test that does not pass at the benchmark's date is no time bomb.
        let broken = [row(Arm::Shim, false), row(Arm::ShimAt(200), false)];
        let refs: Vec<&RunRow> = broken.iter().collect();
        assert_eq!(fails_after(&refs, bench, "t"), None);
        assert!(next_days(&refs, bench, &tests).is_empty());
    }

    #[test]
    fn points_parse_and_resolve() {
        let bench = parse_date("2023-05-10T12:00:00Z").unwrap();
        let now = parse_date("2026-12-07T08:00:00Z").unwrap();
        let day = |p: &str| day_name(resolve(parse_point(p).unwrap(), bench, now));
        assert_eq!(day("created_at"), "2023-05-10");
        assert_eq!(day("now"), "2026-12-07");
        assert_eq!(day("+16y"), "2039-05-10");
        assert_eq!(day("+30d"), "2023-06-09");
        assert_eq!(day("2038-01-20"), "2038-01-20");
        for bad in ["tomorrow", "+3w", "+y", "2038-13-01", "", "+999y"] {
            assert!(parse_point(bad).is_err(), "{bad}");
        }
        let leap = parse_date("2024-02-29T00:00:00Z").unwrap();
        assert_eq!(day_name(resolve(Point::Years(1), leap, now)), "2025-03-01");
        assert_eq!(
            on_day(bench, parse_day("2030-01-01").unwrap()),
            parse_date("2030-01-01T12:00:00Z").unwrap()
        );
        assert_eq!(
            Arm::parse("shim_at_2030-01-01"),
            Some(Arm::ShimAt(parse_day("2030-01-01").unwrap()))
        );
        assert_eq!(
            Arm::ShimAt(parse_day("2030-01-01").unwrap()).name(),
            "shim_at_2030-01-01"
        );
    }
}
