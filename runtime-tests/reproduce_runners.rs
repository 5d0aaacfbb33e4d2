//! `reprorun reproduce` on real instances of the runners beside pytest, from SWE-bench's own
//! files (`fixtures/swebench-multi`): hashicorp/go-version (`go test -v`), jshttp/cookie
//! (mocha's spec reporter) and tj/commander.js (`jest --verbose`), each with its upstream fix
//! as the gold prediction, a specs file in SWE-bench's shape and `--repos` (two bundles, a
//! shallow bare repository), with no per-instance field of reprorun's; the export read back
//! by SWE-bench's own package. Then Harbor's task directories (`fixtures/harbor-tasks`) as
//! `--instances DIR` with `--predictions gold`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::reproduce_swebench::{json_file, swebench_read, SUMMARY_KEYS, SWEBENCH_PYTHON};

const IDS: [&str; 3] = [
    "hashicorp__go-version-73",
    "jshttp__cookie-042073f",
    "tj__commander.js-1454",
];

/// Which of SWE-bench's parsers grades each repository; it ships none for mocha's spec
/// reporter (4.1.0), so cookie's report is read by its run report only.
const PARSERS: &str =
    r#"{"hashicorp/go-version": "gotest", "tj/commander.js": "jest", "jshttp/cookie": null}"#;

pub(crate) fn fixture(dir: &str, name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("runtime-tests/fixtures")
        .join(dir)
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn multi(name: &str) -> String {
    fixture("swebench-multi", name)
}

/// `DIR/repos` holding the fixtures' repositories as `--repos` finds them.
pub(crate) fn repos(work: &Work) -> PathBuf {
    let repos = work.path().join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    for name in ["hashicorp__go-version.bundle", "jshttp__cookie.bundle"] {
        std::fs::copy(multi(name), repos.join(name)).unwrap();
    }
    for tar in [
        multi("tj__commander.js.tar.gz"),
        fixture("swebench-toolz", "pytoolz__toolz.tar.gz"),
    ] {
        let out = Command::new("tar")
            .args(["-xzf", &tar, "-C"])
            .arg(&repos)
            .output()
            .unwrap();
        expect_code(&out, 0);
    }
    repos
}

/// Exports `arm` run #0 of `db` under `dir`; returns the run id.
pub(crate) fn export(work: &Work, db: &str, dir: &str, arm: &str) -> String {
    let out = work.run(&[
        "reproduce",
        "export",
        "--swebench",
        dir,
        "--db",
        db,
        "--arm",
        arm,
    ]);
    let printed = expect_code(&out, 0);
    let name = Path::new(printed.trim())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let (_, rest) = name.split_once('.').unwrap();
    rest.strip_suffix(".json").unwrap().to_string()
}

/// The instance's FAIL_TO_PASS as its record lists it.
fn fail_to_pass(id: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(multi("instances.jsonl")).unwrap();
    let inst: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|i| i["instance_id"] == id)
        .unwrap();
    serde_json::from_str(inst["FAIL_TO_PASS"].as_str().unwrap()).unwrap()
}

#[test]
fn go_mocha_and_jest_instances_run_from_swebench_files_and_swebench_reads_the_export() {
    require!(
        Need::Root,
        Need::Tool("tar"),
        Need::Tool("go"),
        Need::Tool("mocha"),
        Need::Tool("jest"),
        Need::Path(
            SWEBENCH_PYTHON,
            "SWE-bench's package in its venv (.ci/setup installs it)"
        )
    );
    let work = Work::new();
    repos(&work);
    let (instances, specs) = (multi("instances.jsonl"), multi("specs.json"));
    let recorded = multi("recorded.json");
    let study = |preds: &str, db: &str, baseline: bool| {
        let mut args = vec![
            "reproduce",
            "run",
            "--instances",
            &instances,
            "--predictions",
            preds,
            "--specs",
            &specs,
            "--repos",
            "repos",
            "--db",
            db,
            "--k",
            "1",
            "--jobs",
            "2",
            "--json",
        ];
        args.extend(baseline.then_some("--baseline"));
        args.extend(["--recorded", &recorded]);
        let out = work.run(&args);
        let text = expect_code(&out, 0);
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let s = study(&multi("predictions.jsonl"), "study.db", true);
    assert_eq!(s["shim"]["reproducible"], 3, "{s}");

    // The gold patches: resolved, each FAIL_TO_PASS test found by its SWE-bench name.
    let gold_run = export(&work, "study.db", "gold", "shim");
    let dir = work.path().join("gold");
    let ours = json_file(&dir.join(format!("gold.{gold_run}.json")));
    assert_eq!(ours["resolved_ids"], serde_json::json!(IDS), "{ours}");
    // The unpatched repositories (the test patch alone): unresolved, not errors.
    let base_run = export(&work, "study.db", "base", "baseline_shim");
    let base = work.path().join("base");
    let base_sum = json_file(&base.join(format!("gold.{base_run}.json")));
    assert_eq!(
        base_sum["unresolved_ids"],
        serde_json::json!(IDS),
        "{base_sum}"
    );
    for (dir, run, status) in [(&dir, &gold_run, "success"), (&base, &base_run, "failure")] {
        for id in IDS {
            let report = json_file(
                &dir.join("logs/run_evaluation")
                    .join(run)
                    .join("gold")
                    .join(id)
                    .join("report.json"),
            );
            assert_eq!(
                report[id]["tests_status"]["FAIL_TO_PASS"][status],
                fail_to_pass(id),
                "{run}: {report}"
            );
        }
        // SWE-bench's own reading: its parsers over our test_output.txt give our reports,
        // its run report over our files our summary.
        let files = [instances.clone(), multi("predictions.jsonl"), specs.clone()];
        let theirs = swebench_read(dir, run, files, PARSERS);
        for id in ["hashicorp__go-version-73", "tj__commander.js-1454"] {
            let report = json_file(
                &dir.join("logs/run_evaluation")
                    .join(run)
                    .join("gold")
                    .join(id)
                    .join("report.json"),
            );
            assert_eq!(theirs["graded"][id], report[id], "{id}: {theirs}");
        }
        let ours = json_file(&dir.join(format!("gold.{run}.json")));
        for key in SUMMARY_KEYS {
            assert_eq!(
                theirs["summary"][key], ours[key],
                "{key}: {theirs} vs {ours}"
            );
        }
    }

    // Empty patches: not resolved, SWE-bench's empty_patch_ids.
    study(&multi("predictions-empty.jsonl"), "empty.db", false);
    let run = export(&work, "empty.db", "empty", "shim");
    let empty = work.path().join("empty");
    let ours = json_file(&empty.join(format!("empty.{run}.json")));
    assert_eq!(ours["empty_patch_ids"], serde_json::json!(IDS), "{ours}");
    assert_eq!(ours["resolved_ids"], serde_json::json!([]), "{ours}");
    let files = [
        instances.clone(),
        multi("predictions-empty.jsonl"),
        specs.clone(),
    ];
    let theirs = swebench_read(&empty, &run, files, PARSERS);
    for key in SUMMARY_KEYS {
        assert_eq!(
            theirs["summary"][key], ours[key],
            "{key}: {theirs} vs {ours}"
        );
    }
}

#[test]
fn harbor_task_directories_run_with_their_gold_patches() {
    require!(Need::Root, Need::Tool("tar"), Need::Tool("go"));
    let work = Work::new();
    repos(&work);
    let tasks = fixture("harbor-tasks", "");
    let out = work.run(&[
        "reproduce",
        "run",
        "--instances",
        &tasks,
        "--predictions",
        "gold",
        "--repos",
        "repos",
        "--db",
        "study.db",
        "--k",
        "1",
        "--jobs",
        "2",
        "--baseline",
        "--json",
        // On the host's root: the tasks' Dockerfiles name SWE-bench's images (Docker Hub).
        "--task-environment",
        "host",
    ]);
    let s: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    assert_eq!(s["shim"]["reproducible"], 2, "{s}");
    let run = export(&work, "study.db", "gold", "shim");
    let ours = json_file(&work.path().join(format!("gold/gold.{run}.json")));
    assert_eq!(
        ours["resolved_ids"],
        serde_json::json!(["hashicorp__go-version-73", "pytoolz__toolz-603"]),
        "{ours}"
    );
    let run = export(&work, "study.db", "base", "baseline_shim");
    let ours = json_file(&work.path().join(format!("base/gold.{run}.json")));
    assert_eq!(ours["resolved_ids"], serde_json::json!([]), "{ours}");

    // A task whose evaluation script marks no test command: one line, nothing written.
    let bad = work.path().join("bad/t1/tests");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::copy(
        fixture("harbor-tasks", "pytoolz__toolz-603/tests/config.json"),
        bad.join("config.json"),
    )
    .unwrap();
    std::fs::write(bad.join("test.sh"), "#!/bin/bash\npytest\n").unwrap();
    let out = work.run(&[
        "reproduce",
        "run",
        "--instances",
        "bad",
        "--predictions",
        "gold",
        "--repos",
        "repos",
        "--db",
        "bad.db",
    ]);
    expect_error(&out, "bad/t1/tests/test.sh: no test command found");
    assert!(!work.path().join("bad.db").exists());
}
