//! `reprorun reproduce plan|work|merge`: a study made chunk by chunk as a cluster's array
//! tasks would make it (a loop here, no scheduler), merged, and compared with `run`.

use std::path::{Path, PathBuf};

use crate::common::*;
use crate::reproduce::{Fixture, DATED_TEST, FIX, PLAIN_TEST};

fn fixture() -> Fixture {
    let mut f = Fixture::new();
    f.add("clean", FIX, PLAIN_TEST, serde_json::json!({}));
    f.add("dated", FIX, DATED_TEST, serde_json::json!({}));
    f.write();
    f
}

const OPTIONS: [&str; 5] = ["--k", "2", "--compare-shim", "--pin-runs", "0"];

fn plan(f: &Fixture, db: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "reproduce",
        "plan",
        "--instances",
        "instances.jsonl",
        "--predictions",
        "predictions.jsonl",
        "--db",
        db,
        "--out",
        "tasks",
    ];
    args.extend(OPTIONS);
    args.extend(extra);
    expect_code(&f.work.run(&args), 0)
}

fn chunks(f: &Fixture) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(f.path("tasks/chunks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn work(f: &Fixture, chunk: &Path) -> String {
    let out = f.work.run(&[
        "reproduce",
        "work",
        "--tasks",
        "tasks",
        "--chunk",
        &chunk.to_string_lossy(),
        "--results",
        "results",
    ]);
    expect_code(&out, 0);
    stderr(&out)
}

fn merge(f: &Fixture, db: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "reproduce",
        "merge",
        "--tasks",
        "tasks",
        "--results",
        "results",
        "--db",
        db,
    ];
    args.extend(extra);
    f.work.run(&args)
}

fn summary(f: &Fixture, db: &str) -> serde_json::Value {
    let out = f.work.run(&[
        "reproduce",
        "report",
        "--db",
        db,
        "--out",
        &format!("{db}.report"),
        "--json",
    ]);
    serde_json::from_str(&expect_code(&out, 0)).unwrap()
}

fn results(f: &Fixture) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(f.path("results/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    v
}

#[test]
fn plan_work_merge_gives_what_run_gives() {
    let f = fixture();
    let said = plan(&f, "cluster.db", &["--chunk", "3"]);
    assert!(said.starts_with("8 runs in 3 chunks"), "{said}");
    let manifest = read_json(&f.path("tasks/manifest.json"));
    assert_eq!(manifest["format"], "reprorun-tasks/1");
    assert_eq!(manifest["arms"], serde_json::json!(["shim", "no_shim"]));
    let submit = std::fs::read_to_string(f.path("tasks/submit.sh")).unwrap();
    assert!(submit.contains("--requeue --signal=B:TERM@120"));
    // Planning again the same is harmless; planning something else into it is refused.
    plan(&f, "cluster.db", &["--chunk", "3"]);
    let mut other = vec![
        "reproduce",
        "plan",
        "--instances",
        "instances.jsonl",
        "--predictions",
        "predictions.jsonl",
        "--db",
        "cluster.db",
        "--out",
        "tasks",
        "--k",
        "3",
    ];
    other.push("--compare-shim");
    expect_error(&f.work.run(&other), "holds another plan");

    for c in chunks(&f) {
        work(&f, &c);
    }
    assert_eq!(results(&f).len(), 8);
    assert!(
        !f.path("cluster.db").exists(),
        "work never opens the database"
    );
    // A chunk run again makes nothing new.
    let again = work(&f, &chunks(&f)[0]);
    assert!(again.contains("0 run(s) made, 3 already done"), "{again}");

    let out = merge(&f, "cluster.db", &[]);
    let text = expect_code(&out, 0);
    assert!(text.contains("merged 8 new run(s), 0 attempt(s)"), "{text}");
    let text = expect_code(&merge(&f, "cluster.db", &[]), 0);
    assert!(
        text.contains("merged 0 new run(s), 0 attempt(s), 8 already"),
        "{text}"
    );

    // The same study made by `run`.
    let local = f.study(&[
        "--k",
        "2",
        "--compare-shim",
        "--pin-runs",
        "0",
        "--jobs",
        "2",
    ]);
    let merged = summary(&f, "cluster.db");
    for arm in ["shim", "no_shim"] {
        assert_eq!(merged[arm], local[arm], "{arm}: {merged}");
    }
    for id in ["clean", "dated"] {
        let find = |s: &serde_json::Value| {
            s["instances"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["instance_id"] == id)
                .cloned()
                .unwrap()
        };
        let (m, l) = (find(&merged), find(&local));
        for k in ["class_shim", "class_no_shim", "runs"] {
            assert_eq!(m[k], l[k], "{id} {k}");
        }
        assert_eq!(m["distinct_hosts"], 1, "{m}");
        assert!(
            l.get("distinct_hosts").is_none(),
            "a local study has no hosts"
        );
    }
    assert_eq!(merged["shim"]["reproducible"], 2, "{merged}");
    assert_eq!(merged["no_shim"]["broken"], 1, "{merged}");

    // Each result says where it ran.
    let r = read_json(&results(&f)[0]);
    assert!(
        r["host"]["job"].as_str().unwrap().starts_with("local:"),
        "{r}"
    );
    assert_eq!(r["host"]["machine_id"].as_str().unwrap().len(), 16);
}

#[test]
fn merge_keeps_requeued_results_apart_refuses_tampered_ones_and_lists_missing_chunks() {
    let f = fixture();
    plan(&f, "cluster.db", &[]);
    let cs = chunks(&f);
    assert_eq!(cs.len(), 8, "one run per chunk by default");
    for c in &cs {
        work(&f, c);
    }
    let files = results(&f);

    // A second result of one run (a requeued task) is an attempt, not a second run.
    let first = files[0].clone();
    let mut dup = read_json(&first);
    dup["host"]["job"] = "slurm:9_0".into();
    dup["row"]["started_at"] = (dup["row"]["started_at"].as_i64().unwrap() + 5).into();
    let dup_path = PathBuf::from(
        first
            .to_string_lossy()
            .replace(".json", ".slurm_9_0.1.json"),
    );
    std::fs::write(&dup_path, dup.to_string()).unwrap();
    let text = expect_code(&merge(&f, "cluster.db", &[]), 0);
    assert!(text.contains("merged 8 new run(s), 1 attempt(s)"), "{text}");

    // A result claiming a unit the plan does not have: one line, nothing merged.
    let mut forged = read_json(&files[1]);
    forged["key"] = "nobody.00000000.shim.0".into();
    let forged_path = f.path("results/runs/nobody.00000000.shim.0.json");
    std::fs::write(&forged_path, forged.to_string()).unwrap();
    let out = merge(&f, "fresh.db", &[]);
    expect_error(&out, "unknown unit nobody.00000000.shim.0");
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(!f.path("fresh.db").exists());
    std::fs::remove_file(&forged_path).unwrap();

    // A log that is not what the result's digest says.
    let r = read_json(&files[2]);
    let log = f
        .path("results/logs")
        .join(r["row"]["stdout_sha256"].as_str().unwrap());
    let kept = std::fs::read(&log).unwrap();
    std::fs::write(&log, b"forged\n").unwrap();
    expect_error(&merge(&f, "fresh.db", &[]), "does not match its digest");
    std::fs::write(&log, kept).unwrap();

    // A lost result: its chunk is listed, ready for sbatch --array.
    let gone = read_json(&files[3]);
    let chunk = gone["chunk"].as_u64().unwrap();
    std::fs::remove_file(&files[3]).unwrap();
    let out = merge(&f, "fresh.db", &["--missing"]);
    assert_eq!(expect_code(&out, 0).trim(), chunk.to_string());
    assert!(
        stderr(&out).contains("7 of 8 planned runs recorded"),
        "{}",
        stderr(&out)
    );
    // Resubmitting that chunk makes only the lost run; then nothing is missing.
    let said = work(&f, &f.path(&format!("tasks/chunks/{chunk:04}.json")));
    assert!(said.contains("1 run(s) made"), "{said}");
    let out = merge(&f, "fresh.db", &["--missing"]);
    assert_eq!(expect_code(&out, 0), "\n");
}
