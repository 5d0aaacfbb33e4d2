//! The ledger corpus (images/ledger-corpus): one instance each in Python (pytest), JavaScript
//! (node's own runner) and Go (`go test -v`), whose tests are individually stable, a time
//! bomb, and dependent on the time zone, the hash seed (Python), the locale, a seedless
//! random draw, the CPU count and the directory order. One study with the variation runs
//! and a clock sweep; the ledger must name each test's class and cause, and the time bombs'
//! first failing day.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;

#[test]
fn the_ledger_names_each_tests_cause_in_three_languages() {
    require!(
        Need::Root,
        Need::Tool("go"),
        Need::Tool("node"),
        Need::Tool("git"),
        Need::Path(
            "/usr/lib/python3/dist-packages/pytest",
            "Debian's python3-pytest"
        ),
        // The CPU-count tests differ between the arms only on a host with more than one.
        Need::Cpus(2)
    );
    let work = Work::new();
    let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/ledger-corpus/build.py");
    let out = Command::new("python3")
        .arg(&build)
        .arg(work.path().join("lc"))
        .args(["--reprorun", BIN])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    expect_code(&out, 0);
    // The caller's zone and locale are not the shim's: the no-shim arm and the run without
    // the environment pin see them.
    let mut study = work.cmd(&[
        "reproduce",
        "run",
        "--instances",
        "lc/instances.jsonl",
        "--predictions",
        "lc/predictions.jsonl",
        "--db",
        "study.db",
        "--k",
        "1",
        "--compare-shim",
        "--pin-runs",
        "1",
        // One worker: a run without the CPU pin gets every CPU of the host.
        "--jobs",
        "1",
        // The time bombs fail from 2031-03-15: bisected between these two days.
        "--clock-sweep",
        "created_at,2031-03-01,2031-04-01",
        "--json",
    ]);
    study
        .env("TZ", "Asia/Tokyo")
        .env("LANG", "de_DE.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("LC_NUMERIC")
        .stdin(Stdio::null());
    expect_code(&study.output().unwrap(), 0);
    let out = work.run(&["reproduce", "ledger", "--db", "study.db", "--json"]);
    let ledger: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    let expected = read_json(&work.path().join("lc/expected.json"));
    let mut problems = Vec::new();
    for (iid, tests) in expected.as_object().unwrap() {
        let inst = ledger["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance_id"] == *iid)
            .unwrap_or_else(|| panic!("{iid} not in {ledger}"));
        for (id, want) in tests.as_object().unwrap() {
            let got = inst["tests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["id"] == *id)
                .unwrap_or_else(|| panic!("{iid} {id} not in {inst}"));
            let causes: Vec<&str> = got["causes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c.as_str())
                .collect();
            let missing: Vec<&str> = want["causes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c.as_str())
                .filter(|c| !causes.contains(c))
                .collect();
            let fails_after = want.get("fails_after").cloned().unwrap_or_default();
            if got["class"] != want["class"]
                || !missing.is_empty()
                || got["fails_after"] != fails_after
                || (want["kind"] == "stable" && !causes.is_empty())
            {
                problems.push(format!(
                    "{iid} {id} ({}): class {} causes {causes:?} fails_after {}; want {} with {:?} fails_after {fails_after}",
                    want["kind"], got["class"], got["fails_after"], want["class"], want["causes"]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}\n{ledger}", problems.join("\n"));
    // The variation runs ran the differing tests alone, each language with its runner.
    let db = rusqlite::Connection::open(work.path().join("study.db")).unwrap();
    let mut q = db
        .prepare("SELECT instance_id, env FROM runs WHERE arm = 'shim_vary_timezone' ORDER BY instance_id")
        .unwrap();
    let runners: Vec<(String, String)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            let (id, env) = r.unwrap();
            let env: serde_json::Value = serde_json::from_str(&env).unwrap();
            (id, env["selection"]["runner"].as_str().unwrap_or("").into())
        })
        .collect();
    assert_eq!(
        runners,
        [
            ("ledger-go".into(), "go_test".into()),
            ("ledger-js".into(), "node_test".into()),
            ("ledger-py".into(), "pytest".into())
        ],
        "{runners:?}"
    );
}
