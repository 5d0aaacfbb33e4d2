//! The ledger's runs on a one-node Slurm: phase 1, then the leave-one-out and variation runs
//! (`plan --phase pins`), then the clock sweep in rounds (`plan --phase sweep`), each
//! submitted with `submit.sh --wait` and merged into one study, whose ledger names the time
//! bomb's first failing day and the pin and variation that flip its test.

use std::path::Path;

use crate::cluster::Slurm;
use crate::common::*;
use crate::reproduce::{Fixture, DATED_TEST, FIX, PLAIN_TEST};

const STUDY: [&str; 11] = [
    "--instances",
    "instances.jsonl",
    "--predictions",
    "predictions.jsonl",
    "--db",
    "cluster.db",
    "--k",
    "1",
    "--compare-shim",
    "--pin-runs",
    "1",
];

/// Plans into `out` (results into `results`, else the phase's default) with `extra`; the
/// line it prints.
fn plan(f: &Fixture, out: &str, results: Option<&str>, extra: &[&str]) -> String {
    let mut args = vec!["reproduce", "plan"];
    args.extend(STUDY);
    args.extend(["--out", out]);
    if let Some(r) = results {
        args.extend(["--results", r]);
    }
    args.extend(["--sbatch-args", "--partition=debug"]);
    args.extend(extra);
    expect_code(&f.work.run(&args), 0)
}

/// Submits `out`'s plan and waits for its merge; every Slurm call bounded.
fn submit(f: &Fixture, slurm: &Slurm, out: &str, results: &str) {
    let o = std::process::Command::new("timeout")
        .args(["150", &format!("{out}/submit.sh"), "--wait"])
        .current_dir(f.work.path())
        .env("SLURM_CONF", slurm.conf())
        .env("REPRORUN_SBATCH_TIMEOUT", "120")
        .env_remove("REPRORUN_ISOLATION")
        .output()
        .unwrap();
    let logs = std::fs::read_dir(f.path(&format!("{results}/slurm")))
        .map(|d| {
            d.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    assert!(
        o.status.success() && logs.contains("merged"),
        "{out}/submit.sh --wait: {}{}\n{logs}",
        stdout(&o),
        stderr(&o)
    );
}

#[test]
fn a_one_node_slurm_runs_the_variation_and_sweep_phases_and_feeds_the_ledger() {
    let slurm = match Slurm::start() {
        Ok(s) => s,
        Err(why) => skip!("Slurm cannot be started here: {why}"),
    };
    let mut f = Fixture::new();
    f.add("clean", FIX, PLAIN_TEST, serde_json::json!({}));
    // `date.today().year == 2023`: a time bomb from 2024-01-01, and the no-shim arm's
    // real clock fails it.
    f.add("dated", FIX, DATED_TEST, serde_json::json!({}));
    f.write();
    plan(&f, "tasks", Some("results"), &[]);
    submit(&f, &slurm, "tasks", "results");

    let said = plan(&f, "tasks-pins", Some("results-pins"), &["--phase", "pins"]);
    assert!(!said.starts_with("0 runs"), "{said}");
    // The variation runs carry the test they run alone.
    let m = read_json(&f.path("tasks-pins/manifest.json"));
    assert_eq!(
        m["conditions"]["select"],
        serde_json::json!({"dated": ["tests/test_new.py::test_new"]}),
        "{m}"
    );
    submit(&f, &slurm, "tasks-pins", "results-pins");

    // The sweep in rounds: its days, then the bisection, until nothing is left to plan;
    // each round's results beside it, by its name.
    let sweep = ["--phase", "sweep", "--clock-sweep", "created_at,+1y"];
    let mut rounds = 0;
    loop {
        let out = format!("tasks-sweep-{rounds}");
        let said = plan(&f, &out, None, &sweep);
        if said.starts_with("0 runs") {
            assert!(said.contains("known to the day"), "{said}");
            break;
        }
        submit(&f, &slurm, &out, &format!("results-{out}"));
        rounds += 1;
        assert!(rounds <= 12, "the sweep's rounds do not end: {said}");
    }
    assert!(rounds >= 2, "the days, then at least one bisection round");
    // --clock-sweep belongs to its own phase.
    let mut args = vec!["reproduce", "plan"];
    args.extend(STUDY);
    args.extend(["--out", "tasks-x", "--clock-sweep", "+1y"]);
    let refused = f.work.run(&args);
    expect_code(&refused, 125);
    assert!(
        stderr(&refused).contains("--clock-sweep is planned as its own phase"),
        "{}",
        stderr(&refused)
    );
    assert!(!Path::new(&f.path("tasks-x")).exists());

    let out = f
        .work
        .run(&["reproduce", "ledger", "--db", "cluster.db", "--json"]);
    let l: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    let test = |id: &str| {
        l["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance_id"] == id)
            .map(|i| i["tests"][0].clone())
            .unwrap_or_else(|| panic!("{id}: {l}"))
    };
    let dated = test("dated");
    assert_eq!(dated["class"], "environment", "{dated}");
    assert_eq!(dated["fails_after"], "2024-01-01", "{dated}");
    assert_eq!(dated["fails_after_exact"], true, "{dated}");
    let causes = dated["causes"].as_array().unwrap();
    for c in ["clock", "time"] {
        assert!(causes.contains(&c.into()), "{c}: {dated}");
    }
    let clean = test("clean");
    assert_eq!(clean["class"], "stable_pass", "{clean}");
    assert!(clean["fails_after"].is_null(), "{clean}");
}
