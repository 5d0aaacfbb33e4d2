use super::charts::{outcome_svg, survival_svg};
use super::sections::{p_value, pct, signed_pct};
use super::*;
use crate::summary::summarize;
use crate::Mode;
use crate::{Arm, InstanceRuns, Pin, RunResult};
use reprorun_pipeline::doc::{escape_html, md};
use reprorun_pipeline::svg::nice_step;

const T0: i64 = 1_600_000_000;

fn run(arm: Arm, idx: u32, resolved: bool) -> RunResult {
    RunResult {
        arm,
        idx,
        resolved,
        infra: None,
        wall_ms: 1000 + u64::from(idx),
        started_at: T0 + 86_400 * 40,
        signature: if resolved { "pass" } else { "fail" }.into(),
        evidence: if resolved {
            vec![]
        } else {
            vec![Mode::DependencyDrift]
        },
        failed_tests: Vec::new(),
    }
}

fn inst(id: &str, shim: &[bool], no_shim: &[bool], age_days: i64) -> InstanceRuns {
    let mut runs = Vec::new();
    for (i, &t) in shim.iter().enumerate() {
        runs.push(run(Arm::Shim, i as u32, t));
    }
    for (i, &t) in no_shim.iter().enumerate() {
        runs.push(run(Arm::NoShim, i as u32, t));
    }
    InstanceRuns {
        instance_id: id.into(),
        recorded_resolved: true,
        bench_date: T0 + 86_400 * 40 - 86_400 * age_days,
        runs,
    }
}

/// A study with every section filled.
fn full() -> Summary {
    let mut data = vec![
        inst(
            "<script>alert(1)</script>",
            &[true, true],
            &[true, false],
            30,
        ),
        inst("a|b*c_d", &[true, true], &[true, true], 400),
        inst("flaky & co", &[true, false], &[false, false], 900),
        inst("ok-1", &[true, true], &[true, true], 100),
        inst("drift-2", &[true, true], &[false, false], 700),
    ];
    data[0].runs.push(run(Arm::BaselineShim, 0, true));
    data[0].runs.push(run(Arm::BaselineShim, 1, false));
    data[2].runs.push(run(Arm::BaselineNoShim, 0, false));
    data[1]
        .runs
        .push(run(Arm::ShimWithout(Pin::Clock), 0, false));
    summarize(&data, 2)
}

fn empty() -> Summary {
    summarize(&[], 3)
}

fn tempdir() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn escapes_user_text() {
    assert_eq!(
        escape_html("<script>\"a\" & 'b'</script>\u{7}"),
        "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;\u{FFFD}"
    );
    let s = full();
    let html = render_html(&s, &Links::new());
    assert!(!html.contains("<script"), "unescaped script tag");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("flaky &amp; co"));
    let md = render_markdown(&s, &Links::new());
    assert!(!md.contains("<script"));
    assert!(md.contains("&lt;script&gt;alert\\(1\\)&lt;/script&gt;"));
    // Table cells keep their columns.
    assert!(md.contains("a\\|b\\*c\\_d"));
    assert!(md.contains("flaky &amp; co"));
}

#[test]
fn writes_three_files() {
    let dir = tempdir();
    let out = dir.path().join("nested").join("report");
    let s = full();
    let written = match write_report(&s, &out, &Links::new()) {
        Ok(w) => w,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        written,
        vec![
            out.join("report.md"),
            out.join("report.html"),
            out.join("summary.json")
        ]
    );
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();
    assert_eq!(read("report.md"), render_markdown(&s, &Links::new()));
    assert_eq!(read("report.html"), render_html(&s, &Links::new()));
    let back: Option<Summary> = serde_json::from_str(&read("summary.json")).ok();
    assert_eq!(back, Some(s.clone()));
    // No temporary files are left beside them.
    let names: Vec<String> = std::fs::read_dir(&out)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names.len(), 3, "{names:?}");
    // Rewriting gives the same bytes.
    assert!(write_report(&s, &out, &Links::new()).is_ok());
    assert_eq!(read("report.html"), render_html(&s, &Links::new()));
}

#[test]
fn write_errors_name_the_step_and_path() {
    let dir = tempdir();
    let file = dir.path().join("plain-file");
    assert!(std::fs::write(&file, b"x").is_ok());
    let err = write_report(&empty(), &file.join("sub"), &Links::new());
    match err {
        Err(e @ ReportError::CreateDir { .. }) => {
            let text = e.to_string();
            assert!(text.contains("creating the report directory"), "{text}");
            assert!(text.contains("plain-file"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // A directory where a report file goes: the write fails and names that file.
    let out = dir.path().join("out");
    assert!(std::fs::create_dir_all(out.join("report.html")).is_ok());
    match write_report(&empty(), &out, &Links::new()) {
        Err(e @ ReportError::Write { .. }) => {
            assert!(e.to_string().contains("report.html"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn one_bar_per_arm_present() {
    let s = full();
    let svg = outcome_svg(&s);
    // shim, no shim, baseline shim, baseline no shim.
    assert_eq!(svg.matches("class=\"bar\"").count(), 4, "{svg}");
    for arm in ["shim", "no_shim", "baseline_shim", "baseline_no_shim"] {
        assert!(svg.contains(&format!("data-arm=\"{arm}\"")), "{arm}");
    }
    // Shim only.
    let shim_only = summarize(&[inst("x", &[true], &[], 10)], 1);
    let svg = outcome_svg(&shim_only);
    assert_eq!(svg.matches("class=\"bar\"").count(), 1);
    assert!(svg.contains("data-arm=\"shim\""));
    // Nothing: no bar.
    assert_eq!(outcome_svg(&empty()).matches("class=\"bar\"").count(), 0);
}

#[test]
fn survival_chart_with_fit_and_points() {
    let s = full();
    let html = render_html(&s, &Links::new());
    assert!(html.contains("<svg class=\"survival\""));
    let Some(drift) = &s.drift else {
        panic!("no drift");
    };
    let svg = survival_svg(&s, drift);
    let kept = svg.matches("class=\"kept\"").count();
    let drifted = svg.matches("class=\"drifted\"").count();
    assert_eq!(kept + drifted, drift.points.len());
    assert_eq!(drifted as u64, drift.events);
    // Three drifted of five: the fit exists, so the curve and the band are drawn.
    assert!(s.half_life_days.is_some());
    assert!(svg.contains("class=\"fit\""));
    assert!(svg.contains("class=\"ci\""));
    // Without a fit: points, no curve.
    let mut no_fit = s.clone();
    no_fit.half_life_days = None;
    no_fit.half_life_ci = None;
    let svg = survival_svg(&no_fit, drift);
    assert!(!svg.contains("class=\"fit\""));
    assert_eq!(svg.matches("class=\"kept\"").count(), kept);
}

#[test]
fn self_contained() {
    for s in [empty(), full()] {
        let html = render_html(&s, &Links::new());
        for banned in [
            "http://", "https://", "//", "<script", "src=", "href=", "@import", "url(",
        ] {
            // `//` would also catch protocol-relative URLs.
            assert!(!html.contains(banned), "{banned} in HTML");
        }
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.trim_end().ends_with("</html>"));
    }
}

#[test]
fn empty_summary_renders() {
    let s = empty();
    let md = render_markdown(&s, &Links::new());
    assert!(md.contains("No classified instances."));
    assert!(md.contains("No instances."));
    let html = render_html(&s, &Links::new());
    assert!(html.contains("No classified instances."));
    assert!(!html.contains("class=\"survival\""));
    let dir = tempdir();
    assert!(write_report(&s, dir.path(), &Links::new()).is_ok());
}

#[test]
fn deterministic_and_complete() {
    let (a, b) = (full(), full());
    assert_eq!(
        render_html(&a, &Links::new()),
        render_html(&b, &Links::new())
    );
    assert_eq!(
        render_markdown(&a, &Links::new()),
        render_markdown(&b, &Links::new())
    );
    let md = render_markdown(&a, &Links::new());
    for section in [
        "## Outcomes",
        "## With and without the shim",
        "## Baseline flakiness",
        "## Failure modes",
        "## Dependency drift",
        "## Infrastructure failures",
        "## Instances",
    ] {
        assert!(md.contains(section), "{section}");
    }
    // shim: 4 reproducible of 5 → 80.0%.
    assert!(
        md.contains("| shim | 5 | 4 (80.0%) | 1 (20.0%) | 0 (0.0%) |"),
        "{md}"
    );
    assert!(md.contains("two-sided p = "));
    assert!(md.contains("Dependency-drift half-life: "));
    // The overhead's spread, the thin footing of the half-life, the date ages are taken at.
    assert!(
        md.contains("(interquartile range +0.0% to +0.0%, over 5 instances timed in both arms: 10 shim and 10 no-shim runs that ran the tests;"),
        "{md}"
    );
    let events = a.drift.as_ref().map_or(0, |d| d.events);
    assert!(events > 0 && events < 5, "{events}");
    assert!(
        md.contains(&format!("Caution: this rests on {events} drift events")),
        "{md}"
    );
    assert!(
        md.contains("and these runs started on 2020-10-23 (UTC): the same study run later"),
        "{md}"
    );
    // Every instance has a row.
    for r in &a.instances {
        assert!(md.contains(&md_cell_for_test(&r.instance_id)));
    }
}

fn md_cell_for_test(id: &str) -> String {
    format!("| {} |", md(id))
}

#[test]
fn number_formats() {
    assert_eq!(pct(Some(0.068)), "6.8%");
    assert_eq!(pct(None), "n/a");
    assert_eq!(pct(Some(f64::NAN)), "n/a");
    assert_eq!(signed_pct(Some(0.068)), "+6.8%");
    assert_eq!(signed_pct(Some(-0.012)), "-1.2%");
    assert_eq!(p_value(0.0625), "0.0625");
    assert_eq!(p_value(6.593e-5), "6.59e-5");
    assert_eq!(p_value(0.0), "< 1e-300");
    assert_eq!(nice_step(1000.0, 6.0), 200.0);
    assert_eq!(nice_step(90.0, 6.0), 20.0);
    assert_eq!(nice_step(0.0, 6.0), 1.0);
}

/// A graded run of instance `id` where each `(test, status)` was seen.
fn row(id: &str, arm: Arm, idx: u32, tests: &[(&str, &str)]) -> crate::store::RunRow {
    let map: std::collections::BTreeMap<&str, &str> = tests.iter().copied().collect();
    crate::store::RunRow {
        instance_id: id.into(),
        arm,
        idx,
        resolved: false,
        infra: None,
        exit_code: 0,
        wall_ms: 1,
        started_at: 0,
        signature: String::new(),
        evidence: Vec::new(),
        apply: String::new(),
        tests: serde_json::to_string(&map).unwrap(),
        stdout_sha256: String::new(),
        stderr_sha256: String::new(),
        junit_sha256: None,
        error: None,
        env: None,
    }
}

/// `summary` with the ledger of `rows` over the listed `tests` of each instance.
fn with_ledger(
    mut s: Summary,
    rows: &[crate::store::RunRow],
    tests: &[(&str, &[&str])],
) -> Summary {
    let lists = tests
        .iter()
        .map(|(id, t)| {
            (
                id.to_string(),
                (true, Some(t.iter().map(|x| x.to_string()).collect())),
            )
        })
        .collect();
    let bench = std::collections::BTreeMap::from([("bomb".to_string(), T0)]);
    let l = crate::ledger::build(rows, &lists, &std::collections::BTreeMap::new(), &bench);
    s.ledger = crate::ledger::part(&l, rows);
    s
}

#[test]
fn the_ledger_section_names_each_untrusted_test_and_what_finding_its_cause_cost() {
    use crate::Variation;
    let day = T0 / 86_400;
    let bad = "<b>tests/t.py::test_tz</b>";
    let rows = vec![
        row("zoned", Arm::Shim, 0, &[(bad, "passed"), ("ok", "passed")]),
        row(
            "zoned",
            Arm::NoShim,
            0,
            &[(bad, "failed"), ("ok", "passed")],
        ),
        row(
            "zoned",
            Arm::ShimWithout(Pin::Env),
            0,
            &[(bad, "failed"), ("ok", "passed")],
        ),
        row(
            "zoned",
            Arm::ShimVary(Variation::Timezone),
            0,
            &[(bad, "failed"), ("ok", "passed")],
        ),
        row(
            "zoned",
            Arm::ShimVary(Variation::Locale),
            0,
            &[(bad, "passed"), ("ok", "passed")],
        ),
        row("bomb", Arm::Shim, 0, &[("year", "passed")]),
        row("bomb", Arm::ShimAt(day + 10), 0, &[("year", "failed")]),
        row("bomb", Arm::ShimAt(day + 9), 0, &[("year", "passed")]),
        row("calm", Arm::Shim, 0, &[("c", "passed")]),
    ];
    let s = with_ledger(
        summarize(&[], 1),
        &rows,
        &[
            ("zoned", &[bad, "ok"]),
            ("bomb", &["year"]),
            ("calm", &["c"]),
        ],
    );
    let m = render_markdown(&s, &Links::new());
    assert!(m.contains("## Per-test ledger"), "{m}");
    assert!(
        m.contains("4 tests in 3 instances: 3 stable pass, 0 stable fail, 0 flaky, 1 environment, 1 time bombs."),
        "{m}"
    );
    assert!(
        m.contains("Finding the causes took 5 extra runs beyond the k runs per arm for 2 untrusted test(s): 1 leave-one-out, 2 variation, 2 on other days (clock sweep and bisection). Instances whose tests are all stable got no leave-one-out or variation run."),
        "{m}"
    );
    let line = m
        .lines()
        .find(|l| l.starts_with("| zoned"))
        .unwrap_or_else(|| panic!("{m}"));
    for want in [
        "| environment |",
        "env, environment, timezone",
        r"shim\#0 passed; no\_shim\#0 failed",
        "3 (leave-one-out 1, variation 2, clock 0)",
    ] {
        assert!(line.contains(want), "{want}: {line}");
    }
    let fails_from = crate::sweep::day_name(day + 10);
    let bomb = m.lines().find(|l| l.starts_with("| bomb")).unwrap();
    assert!(bomb.contains(&format!("| {fails_from} |")), "{bomb}");
    assert!(
        bomb.contains("2 (leave-one-out 0, variation 0, clock 2)"),
        "{bomb}"
    );
    assert!(!m.contains("| calm"), "a stable instance has no row: {m}");
    let html = render_html(&s, &Links::new());
    assert!(html.contains("&lt;b&gt;tests/t.py::test_tz&lt;/b&gt;"));
    assert!(!html.contains(bad));
    // summary.json gains the per-test part and keeps every field it had.
    let j: serde_json::Value = serde_json::from_str(&render_json(&s).unwrap()).unwrap();
    assert_eq!(j["ledger"]["headline"]["environment"], 1, "{j}");
    assert_eq!(
        j["ledger"]["instances"][0]["tests"][0]["fails_after"],
        fails_from.as_str()
    );
    assert_eq!(j["ledger"]["extra_runs_stable"]["clock"], 0);
    let old: serde_json::Value =
        serde_json::from_str(&render_json(&summarize(&[], 1)).unwrap()).unwrap();
    for k in old.as_object().unwrap().keys() {
        assert!(j.get(k).is_some(), "{k}");
    }
    assert!(old.get("ledger").is_none(), "no lists, no part: {old}");
}

#[test]
fn a_study_without_untrusted_tests_costs_nothing_more_and_says_so() {
    let rows = vec![
        row("calm", Arm::Shim, 0, &[("c", "passed")]),
        row("calm", Arm::NoShim, 0, &[("c", "passed")]),
    ];
    let s = with_ledger(summarize(&[], 1), &rows, &[("calm", &["c"])]);
    let m = render_markdown(&s, &Links::new());
    assert!(m.contains("Finding the causes took 0 extra runs"), "{m}");
    assert!(m.contains("Every listed test is stable"), "{m}");
    let s = summarize(&[], 1);
    assert!(render_markdown(&s, &Links::new()).contains("No per-test ledger"));
}
