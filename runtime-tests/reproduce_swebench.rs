//! `reprorun reproduce` on SWE-bench's own files: a real instance (pytoolz/toolz#603, its
//! upstream fix as the gold prediction; `fixtures/swebench-toolz`) run from the instance as
//! SWE-bench writes it, a specs file and `--repos`, with no per-instance field of
//! reprorun's; the export read back by SWE-bench's own `swebench` package (4.1.0, installed
//! by `.ci/setup` into its own venv).

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// Where `.ci/setup` puts SWE-bench's package (a venv of its own, not the system Python).
pub(crate) const SWEBENCH_PYTHON: &str = "/opt/swebench-4.1.0/bin/python";
const ID: &str = "pytoolz__toolz-603";

/// The run summary's fields SWE-bench's `make_run_report` and the export must agree on.
pub(crate) const SUMMARY_KEYS: [&str; 13] = [
    "resolved_ids",
    "unresolved_ids",
    "error_ids",
    "empty_patch_ids",
    "completed_ids",
    "total_instances",
    "submitted_instances",
    "completed_instances",
    "resolved_instances",
    "unresolved_instances",
    "error_instances",
    "empty_patch_instances",
    "schema_version",
];
const F2P: &str = "toolz/tests/test_itertoolz.py::test_partition_all";

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("runtime-tests/fixtures/swebench-toolz")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn json_file(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// SWE-bench's reading of the export of `run_id` under `dir`: its grading of each
/// test_output.txt and its run summary.
fn swebench_reads(dir: &Path, run_id: &str) -> serde_json::Value {
    swebench_read(
        dir,
        run_id,
        [
            fixture("instances.jsonl"),
            fixture("predictions.jsonl"),
            fixture("specs.json"),
        ],
        "{}",
    )
}

/// SWE-bench's reading of an export, given the instances, predictions and specs files and
/// which of its parsers grades each repository (`runtime-tests/probes/swebench_check.py`).
pub(crate) fn swebench_read(
    dir: &Path,
    run_id: &str,
    [instances, predictions, specs]: [String; 3],
    parsers: &str,
) -> serde_json::Value {
    let probe =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/swebench_check.py");
    let out = Command::new(SWEBENCH_PYTHON)
        .arg(&probe)
        .arg(dir)
        .arg(run_id)
        .args([instances, predictions, specs])
        .arg(parsers)
        .output()
        .unwrap();
    let text = expect_code(&out, 0);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_real_instance_runs_from_swebench_files_and_swebench_reads_the_export() {
    require!(
        Need::Root,
        Need::Tool("tar"),
        Need::Path(
            SWEBENCH_PYTHON,
            "SWE-bench's package in its venv (.ci/setup installs it)"
        )
    );
    let work = Work::new();
    let repos = work.path().join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    let out = Command::new("tar")
        .args(["-xzf", &fixture("pytoolz__toolz.tar.gz"), "-C"])
        .arg(&repos)
        .output()
        .unwrap();
    expect_code(&out, 0);
    let out = work.run(&[
        "reproduce",
        "run",
        "--instances",
        &fixture("instances.jsonl"),
        "--predictions",
        &fixture("predictions.jsonl"),
        "--specs",
        &fixture("specs.json"),
        "--repos",
        "repos",
        "--recorded",
        &fixture("recorded.json"),
        "--db",
        "study.db",
        "--k",
        "1",
        "--baseline",
        "--json",
    ]);
    let s: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    assert!(
        stderr(&out).contains("1 prediction(s) for instances not in the study were skipped"),
        "{}",
        stderr(&out)
    );
    assert_eq!(s["shim"]["reproducible"], 1, "{s}");

    let dir = work.path().join("swebench");
    let dir_s = dir.to_string_lossy().into_owned();
    let out = work.run(&[
        "reproduce",
        "export",
        "--swebench",
        &dir_s,
        "--db",
        "study.db",
    ]);
    let printed = expect_code(&out, 0);
    let summary_path = Path::new(printed.trim());
    let name = summary_path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let run_id = name
        .strip_prefix("gold.")
        .and_then(|n| n.strip_suffix(".json"))
        .unwrap_or_else(|| panic!("{name}"))
        .to_string();
    let ours = json_file(summary_path);
    assert_eq!(ours["resolved_ids"], serde_json::json!([ID]), "{ours}");
    let inst = dir
        .join("logs/run_evaluation")
        .join(&run_id)
        .join("gold")
        .join(ID);
    let report = json_file(&inst.join("report.json"));
    assert_eq!(
        report[ID]["tests_status"]["FAIL_TO_PASS"]["success"],
        serde_json::json!([F2P]),
        "pytest node ids: {report}"
    );
    assert_eq!(
        std::fs::read_to_string(inst.join("patch.diff")).unwrap(),
        json_file_line(&fixture("predictions.jsonl"))["model_patch"]
            .as_str()
            .unwrap()
    );
    // The unpatched repository: SWE-bench's unresolved, its own run id.
    let base = work.path().join("swebench-base");
    let base_s = base.to_string_lossy().into_owned();
    let out = work.run(&[
        "reproduce",
        "export",
        "--swebench",
        &base_s,
        "--db",
        "study.db",
        "--arm",
        "baseline_shim",
    ]);
    expect_code(&out, 0);
    let base_run = format!("{run_id}.baseline_shim.0");
    let base_report = json_file(
        &base
            .join("logs/run_evaluation")
            .join(&base_run)
            .join("gold")
            .join(ID)
            .join("report.json"),
    );
    assert_eq!(base_report[ID]["resolved"], false);
    assert_eq!(
        base_report[ID]["tests_status"]["FAIL_TO_PASS"]["failure"],
        serde_json::json!([F2P])
    );

    // The report links each instance to its logs, in SWE-bench's layout beside it.
    let out = work.run(&["reproduce", "report", "--db", "study.db", "--out", "rep"]);
    expect_code(&out, 0);
    let logs = format!("logs/run_evaluation/{run_id}/gold/{ID}/");
    let md = std::fs::read_to_string(work.path().join("rep/report.md")).unwrap();
    assert!(
        md.contains(&format!("](logs/run_evaluation/{run_id}/gold/{ID}/)")),
        "{md}"
    );
    let html = std::fs::read_to_string(work.path().join("rep/report.html")).unwrap();
    assert!(html.contains(&format!("<a href=\"{logs}\">")), "{html}");
    assert!(work
        .path()
        .join("rep")
        .join(&logs)
        .join("report.json")
        .is_file());

    // SWE-bench's own reading agrees: its grading of our test_output.txt gives our
    // report.json, and its run report over our files gives our summary's ids.
    for (dir, run, report) in [(&dir, &run_id, &report), (&base, &base_run, &base_report)] {
        let theirs = swebench_reads(dir, run);
        assert_eq!(theirs["graded"][ID], report[ID], "{theirs}");
        let ours = json_file(&dir.join(format!("gold.{run}.json")));
        for key in SUMMARY_KEYS {
            assert_eq!(
                theirs["summary"][key], ours[key],
                "{key}: {theirs} vs {ours}"
            );
        }
    }
}

/// The first line of a JSON Lines file.
fn json_file_line(path: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}
