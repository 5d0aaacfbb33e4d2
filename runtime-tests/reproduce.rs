//! `reprorun reproduce`: studies over a small git repository made by each test, read back
//! through the JSON summary and the study's store.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use reprorun_reproduce::store::{RunRow, Store};
use reprorun_reproduce::{Arm, Infra};

/// A git repository with a `calc.py` and one passing test, and the study files around it.
pub(crate) struct Fixture {
    pub(crate) work: Work,
    pub(crate) base: String,
    pub(crate) instances: Vec<serde_json::Value>,
    predictions: Vec<serde_json::Value>,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .env("GIT_AUTHOR_DATE", "2023-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2023-01-01T00:00:00Z")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    stdout(&out).trim().to_string()
}

const CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return x * 2\n";

/// The model patch: fixes `add`.
pub(crate) const FIX: &str = "diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return a - b
+    return a + b
 
 
 def double(x):
";

fn test_patch(name: &str, body: &str) -> String {
    let lines: Vec<&str> = body.lines().collect();
    let mut p = format!(
        "diff --git a/tests/{name} b/tests/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/tests/{name}\n@@ -0,0 +1,{} @@\n",
        lines.len()
    );
    for l in lines {
        p.push('+');
        p.push_str(l);
        p.push('\n');
    }
    p
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let work = Work::new();
        let repo = work.path().join("repo");
        std::fs::create_dir_all(repo.join("tests")).unwrap();
        std::fs::write(repo.join("calc.py"), CALC).unwrap();
        std::fs::write(repo.join("tests/__init__.py"), "").unwrap();
        std::fs::write(
            repo.join("tests/test_old.py"),
            "import calc\n\n\ndef test_double():\n    assert calc.double(2) == 4\n",
        )
        .unwrap();
        git(&repo, &["init", "-q"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "init"]);
        let base = git(&repo, &["rev-parse", "HEAD"]);
        Fixture {
            work,
            base,
            instances: Vec::new(),
            predictions: Vec::new(),
        }
    }

    fn repo(&self) -> PathBuf {
        self.work.path().join("repo")
    }

    /// An instance whose test patch adds `tests/test_new.py` with `body`, FAIL_TO_PASS
    /// being its `test_new` and PASS_TO_PASS the old test.
    pub(crate) fn add(
        &mut self,
        id: &str,
        model_patch: &str,
        body: &str,
        extra: serde_json::Value,
    ) {
        let mut inst = serde_json::json!({
            "instance_id": id,
            "repo": "t/calc",
            "base_commit": self.base,
            "test_patch": test_patch("test_new.py", body),
            "FAIL_TO_PASS": "[\"tests/test_new.py::test_new\"]",
            "PASS_TO_PASS": ["tests/test_old.py::test_double"],
            "created_at": "2023-05-10T12:00:00Z",
            "repo_path": "repo",
            "test_cmd": "python3 -m pytest -p no:cacheprovider -q tests",
            "recorded_resolved": true,
        });
        for (k, v) in extra.as_object().unwrap() {
            inst[k] = v.clone();
        }
        self.instances.push(inst);
        self.predictions.push(serde_json::json!({
            "instance_id": id, "model_name_or_path": "m", "model_patch": model_patch,
        }));
    }

    pub(crate) fn write(&self) {
        let lines = |v: &[serde_json::Value]| {
            v.iter()
                .map(|x| format!("{x}\n"))
                .collect::<Vec<_>>()
                .concat()
        };
        std::fs::write(self.path("instances.jsonl"), lines(&self.instances)).unwrap();
        std::fs::write(self.path("predictions.jsonl"), lines(&self.predictions)).unwrap();
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    pub(crate) fn cmd(&self, extra: &[&str]) -> Command {
        self.write();
        let mut args = vec![
            "reproduce",
            "run",
            "--instances",
            "instances.jsonl",
            "--predictions",
            "predictions.jsonl",
            "--db",
            "study.db",
        ];
        args.extend(extra);
        let mut c = self.work.cmd(&args);
        c.stdin(Stdio::null());
        c
    }

    pub(crate) fn study(&self, extra: &[&str]) -> serde_json::Value {
        let mut args = vec!["--json"];
        args.extend(extra);
        let out = self.cmd(&args).output().unwrap();
        let text = expect_code(&out, 0);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    pub(crate) fn rows(&self) -> Vec<RunRow> {
        Store::open(&self.path("study.db"), false)
            .unwrap()
            .rows()
            .unwrap()
    }
}

pub(crate) fn instance<'a>(summary: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    summary["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["instance_id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {summary}"))
}

pub(crate) const PLAIN_TEST: &str =
    "import calc\n\n\ndef test_new():\n    assert calc.add(2, 3) == 5\n";
const LISTING_TEST: &str = "import calc, os\n\n\ndef test_new():\n    assert calc.add(2, 3) == 5\n    os.makedirs('made', exist_ok=True)\n    for name in ['b', 'a', 'c']:\n        open(os.path.join('made', name), 'w').close()\n    assert os.listdir('made') == ['a', 'b', 'c']\n";
pub(crate) const DATED_TEST: &str = "import calc, datetime\n\n\ndef test_new():\n    assert calc.add(2, 3) == 5\n    assert datetime.date.today().year == 2023\n";

#[test]
fn shim_makes_a_date_dependent_patch_reproducible_and_names_the_clock() {
    let mut f = Fixture::new();
    f.add("clean", FIX, PLAIN_TEST, serde_json::json!({}));
    f.add("dated", FIX, DATED_TEST, serde_json::json!({}));
    // Files made in the order b, a, c: a listing in name order only with the shim.
    f.add("listing", FIX, LISTING_TEST, serde_json::json!({}));
    let s = f.study(&["--k", "2", "--compare-shim", "--jobs", "2"]);
    assert_eq!(s["k"], 2);
    assert_eq!(s["shim"]["reproducible"], 3, "{s}");
    assert_eq!(s["no_shim"]["reproducible"], 1, "{s}");
    assert_eq!(s["no_shim"]["broken"], 2, "{s}");
    let listing = instance(&s, "listing");
    assert_eq!(
        listing["pins"],
        serde_json::json!(["dir_order"]),
        "{listing}"
    );
    assert_eq!(
        listing["modes_no_shim"],
        serde_json::json!(["hash_ordering"])
    );
    let dated = instance(&s, "dated");
    assert_eq!(dated["r_shim"], 1.0);
    assert_eq!(dated["class_no_shim"], "broken");
    assert_eq!(dated["pins"], serde_json::json!(["clock"]), "{dated}");
    assert!(dated["modes_no_shim"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("time")));
    assert_eq!(instance(&s, "clean")["class_no_shim"], "reproducible");
    // Two discordant pairs (b=2, c=0): p = 2 × (1/2)² = 0.5.
    assert_eq!(s["mcnemar_p"], 0.5);
    assert!(s["overhead_median"].is_number(), "{s}");

    // Rows: k runs per arm, leave-one-out runs for the dated patch only, JUnit parsed.
    let rows = f.rows();
    let count = |id: &str, arm: Arm| {
        rows.iter()
            .filter(|r| r.instance_id == id && r.arm == arm)
            .count()
    };
    assert_eq!(count("clean", Arm::Shim), 2);
    assert_eq!(count("dated", Arm::NoShim), 2);
    assert_eq!(
        count("clean", Arm::ShimWithout(reprorun_reproduce::Pin::Clock)),
        0
    );
    assert_eq!(
        count("dated", Arm::ShimWithout(reprorun_reproduce::Pin::Clock)),
        2
    );
    let r = rows
        .iter()
        .find(|r| r.instance_id == "dated" && r.arm == Arm::NoShim)
        .unwrap();
    assert!(r.junit_sha256.is_some(), "pytest wrote JUnit XML");
    assert!(
        r.tests.contains("\"tests.test_new.test_new\":\"failed\""),
        "{}",
        r.tests
    );
    assert_eq!(r.apply, "model=git-apply test=git-apply");

    // The report: Markdown, HTML, JSON.
    let out = f.work.run(&[
        "reproduce",
        "report",
        "--db",
        "study.db",
        "--out",
        "rep",
        "--json",
    ]);
    let text = expect_code(&out, 0);
    let again: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(again["no_shim"], s["no_shim"]);
    for name in ["report.md", "report.html", "summary.json"] {
        assert!(f.path("rep").join(name).is_file(), "{name}");
    }
    let html = std::fs::read_to_string(f.path("rep/report.html")).unwrap();
    assert!(html.contains("<svg"), "charts inline");
}

#[test]
fn patches_apply_through_the_fallbacks_or_count_as_infra_failures() {
    let mut f = Fixture::new();
    let repo = f.repo();
    // A second commit changes a context line of the first: a patch made against the
    // first commit no longer applies as is.
    let old = f.base.clone();
    let fixed = CALC.replace("a - b", "a + b");
    std::fs::write(
        repo.join("calc.py"),
        CALC.replace("double(x):", "double(x):  # times two"),
    )
    .unwrap();
    git(&repo, &["commit", "-qam", "double"]);
    let new_base = git(&repo, &["rev-parse", "HEAD"]);
    let diff_against = |rev: &str, content: &str| {
        git(&repo, &["checkout", "-q", rev, "--", "calc.py"]);
        std::fs::write(repo.join("calc.py"), content).unwrap();
        let d = git(&repo, &["diff", rev, "--", "calc.py"]) + "\n";
        git(&repo, &["checkout", "-q", "HEAD", "--", "calc.py"]);
        d
    };
    let plain = diff_against(
        "HEAD",
        &fixed.replace("double(x):", "double(x):  # times two"),
    );
    // Made against the old commit, whose context the new one changed: git apply fails,
    // but its index line names a blob git has, so --3way merges it.
    let three_way = diff_against(&old, &fixed);
    // The same without the index line: no 3-way merge; only patch's fuzz applies it.
    let fuzzy: String = three_way
        .lines()
        .filter(|l| !l.starts_with("index "))
        .map(|l| format!("{l}\n"))
        .collect();
    let base = serde_json::json!({ "base_commit": new_base });
    f.add("plain", &plain, PLAIN_TEST, base.clone());
    f.add("threeway", &three_way, PLAIN_TEST, base.clone());
    f.add("fuzz", &fuzzy, PLAIN_TEST, base.clone());
    f.add(
        "broken",
        &FIX.replace("a - b", "a * b"),
        PLAIN_TEST,
        base.clone(),
    );
    f.add("empty", "", PLAIN_TEST, base);
    let s = f.study(&["--k", "1"]);
    let rows = f.rows();
    let row = |id: &str| rows.iter().find(|r| r.instance_id == id).unwrap();
    assert_eq!(row("plain").apply, "model=git-apply test=git-apply");
    assert_eq!(row("threeway").apply, "model=git-apply-3way test=git-apply");
    assert_eq!(row("fuzz").apply, "model=patch-fuzz test=git-apply");
    for id in ["plain", "threeway", "fuzz"] {
        assert!(row(id).resolved, "{id}: {:?}", row(id));
        assert_eq!(instance(&s, id)["class_shim"], "reproducible");
    }
    assert_eq!(row("broken").apply, "model=failed test=not tried");
    assert_eq!(row("empty").apply, "model=empty test=none");
    for id in ["broken", "empty"] {
        assert_eq!(row(id).infra, Some(Infra::PatchApply), "{id}");
        assert_eq!(instance(&s, id)["class_shim"], "broken");
    }
    assert_eq!(s["infra"]["patch_apply"], 2, "{s}");
    // The apply log is kept.
    let store = Store::open(&f.path("study.db"), false).unwrap();
    let log = String::from_utf8(store.log(&row("broken").stdout_sha256).unwrap()).unwrap();
    assert!(log.contains("--- model: patch-fuzz"), "{log}");
    // The user's repository is untouched.
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
}

#[test]
fn timeouts_and_exit_status_harnesses() {
    let mut f = Fixture::new();
    // No test lists: the exit status decides.
    f.add(
        "status",
        FIX,
        PLAIN_TEST,
        serde_json::json!({"FAIL_TO_PASS": [], "PASS_TO_PASS": [], "test_cmd": "python3 -c 'import calc; assert calc.add(1, 1) == 2'"}),
    );
    f.add(
        "slow",
        FIX,
        PLAIN_TEST,
        serde_json::json!({"test_cmd": "sleep 30"}),
    );
    f.add(
        "hog",
        FIX,
        PLAIN_TEST,
        serde_json::json!({"test_cmd": "python3 -c 'b = b\"x\" * (1 << 30)'"}),
    );
    let s = f.study(&[
        "--k",
        "2",
        // Long enough for the hog to reach its memory limit on a loaded machine (at 2 s it
        // timed out first under load 15); `slow` sleeps 30 s.
        "--timeout",
        "8s",
        "--memory",
        "256M",
        "--stagger",
        "3s",
    ]);
    assert_eq!(instance(&s, "status")["class_shim"], "reproducible", "{s}");
    let rows = f.rows();
    let hog = rows.iter().find(|r| r.instance_id == "hog").unwrap();
    assert_eq!(hog.infra, Some(Infra::Oom), "{hog:?}");
    assert_eq!(s["infra"]["oom"], 2);
    // --stagger: the second run of a patch starts at least 3 s after the study began.
    let store = Store::open(&f.path("study.db"), false).unwrap();
    let began: i64 = store
        .meta_or_set("started_at", "")
        .unwrap()
        .parse()
        .unwrap();
    for r in rows.iter().filter(|r| r.idx == 1) {
        assert!(r.started_at >= began + 3, "{r:?}");
    }
    let slow = rows.iter().find(|r| r.instance_id == "slow").unwrap();
    assert_eq!(slow.infra, Some(Infra::Timeout));
    assert_eq!(slow.exit_code, 124);
    assert_eq!(s["infra"]["timeout"], 2);
    assert!(instance(&s, "slow")["modes_shim"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("timeout_resource")));
}

#[test]
fn baseline_flakiness_is_told_apart() {
    let mut f = Fixture::new();
    // A pass-to-pass test that is flaky whatever the patch: it depends on real entropy,
    // so it is flaky without the shim and stable with it.
    let flaky_old = "import os\n\n\ndef test_double():\n    assert os.urandom(1)[0] % 2 == 0\n";
    f.add(
        "flaky",
        FIX,
        &format!(
            "{PLAIN_TEST}\n\n{}",
            flaky_old.replace("test_double", "test_coin")
        ),
        serde_json::json!({"PASS_TO_PASS": ["tests/test_new.py::test_coin"]}),
    );
    // A patch that brings its own flakiness: the baseline (without it) is stable.
    let coin_fix = FIX
        .replace(
            "+    return a + b",
            "+    import os\n+    return a + b if os.urandom(1)[0] % 2 == 0 else 0",
        )
        .replace("@@ -1,5 +1,5 @@", "@@ -1,5 +1,6 @@");
    f.add("self-made", &coin_fix, PLAIN_TEST, serde_json::json!({}));
    let s = f.study(&[
        "--k",
        "6",
        "--baseline",
        "--compare-shim",
        "--pin-runs",
        "0",
    ]);
    let rows = f.rows();
    assert_eq!(
        rows.iter().filter(|r| r.arm == Arm::BaselineShim).count(),
        12,
        "{s}"
    );
    assert_eq!(
        rows.iter().filter(|r| r.arm == Arm::BaselineNoShim).count(),
        12
    );
    let i = instance(&s, "flaky");
    assert_eq!(i["class_baseline_shim"], "reproducible", "{i}");
    // The patch itself is flaky, the unpatched repository is not.
    let j = instance(&s, "self-made");
    assert_eq!(j["class_baseline_no_shim"], "reproducible", "{j}");
    assert_ne!(j["class_shim"], "flaky", "seeded entropy: {j}");
    // The share follows the classes (each flaky with probability 31/32 over six runs).
    let flaky = |x: &serde_json::Value, k: &str| x[k] == "flaky";
    let patches = [i, j].iter().filter(|x| flaky(x, "class_no_shim")).count();
    let explained = [i, j]
        .iter()
        .filter(|x| flaky(x, "class_no_shim") && flaky(x, "class_baseline_no_shim"))
        .count();
    if patches == 0 {
        assert!(s["baseline_explained"]["no_shim"].is_null(), "{s}");
    } else {
        assert_eq!(
            s["baseline_explained"]["no_shim"],
            explained as f64 / patches as f64,
            "{s}"
        );
    }
    if flaky(j, "class_no_shim") {
        assert!(
            explained < patches,
            "a stable baseline explains nothing: {s}"
        );
    }
}

#[test]
fn a_run_that_names_no_listed_test_is_an_error_said_so() {
    let mut f = Fixture::new();
    // pytest with addopts --color=yes: coloured status words are read.
    f.add(
        "coloured",
        FIX,
        PLAIN_TEST,
        serde_json::json!({"test_cmd": "python3 -m pytest -p no:cacheprovider --color=yes -v tests"}),
    );
    // A test command that never reaches the tests (it exits 0 before pytest starts).
    f.add(
        "no-tests",
        FIX,
        PLAIN_TEST,
        serde_json::json!({"test_cmd": "echo collecting nothing"}),
    );
    let out = f
        .cmd(&["--json", "--k", "2", "--baseline"])
        .output()
        .unwrap();
    let text = expect_code(&out, 0);
    let s: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let err = stderr(&out);
    let c = instance(&s, "coloured");
    assert_eq!(c["class_shim"], "reproducible", "{c}");
    assert_eq!(c["resolved_runs"]["shim"], 2, "{c}");
    // Unpatched, the FAIL_TO_PASS test fails in each baseline run, by name.
    assert_eq!(
        c["failed_tests"]["tests/test_new.py::test_new"],
        serde_json::json!(["baseline_shim#0", "baseline_shim#1"]),
        "{c}"
    );
    let n = instance(&s, "no-tests");
    assert_eq!(n["class_shim"], "error", "{n}");
    // The same empty outcome k times is no reproducible baseline.
    assert_eq!(n["class_baseline_shim"], "error", "{n}");
    assert_eq!(s["shim"]["error"], 1, "{s}");
    assert_eq!(s["infra"]["no_tests"], 4, "{s}");
    assert_eq!(s["resolved"]["shim"]["resolved"], 2, "{s}");
    assert_eq!(s["resolved"]["shim"]["errors"], 2, "{s}");
    for run in ["shim #0", "shim #1", "baseline_shim #0", "baseline_shim #1"] {
        let line = format!(
            "reprorun: warning: instance no-tests run {run}: none of its 2 listed test(s) appears"
        );
        assert!(err.contains(&line), "{line}\n{err}");
    }
    assert!(!err.contains("instance coloured run"), "{err}");
}

#[test]
fn a_killed_study_resumes_with_every_run_recorded_once() {
    let mut f = Fixture::new();
    for id in ["a", "b", "c"] {
        f.add(
            id,
            FIX,
            PLAIN_TEST,
            serde_json::json!({"test_cmd": ": marker-resume-7391; sleep 0.3; python3 -m pytest -p no:cacheprovider -q tests"}),
        );
    }
    let args = ["--k", "4", "--jobs", "2", "--baseline"];
    let total = 3 * 4 * 2;
    for kill_after in [3, 9, 16] {
        let mut child = f
            .cmd(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let db = f.path("study.db");
        wait_until(Duration::from_secs(120), || {
            Store::open(&db, false)
                .ok()
                .and_then(|s| s.count_runs().ok())
                .is_some_and(|n| n >= kill_after)
        });
        // SIGKILL: no chance to clean up; runs in flight are lost, not half-recorded.
        child.kill().unwrap();
        child.wait().unwrap();
    }
    // A worker killed under a live coordinator: the study stops, resumable.
    let child = f
        .cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let coordinator = child.id();
    let children = format!("/proc/{coordinator}/task/{coordinator}/children");
    // The first child alive at the time of the kill (workers come and go, one per run).
    let killed = wait_until(Duration::from_secs(60), || {
        let pids = std::fs::read_to_string(&children).unwrap_or_default();
        pids.split_whitespace().any(|p| {
            p.parse().is_ok_and(|pid| {
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .is_ok()
            })
        })
    });
    assert!(killed, "no worker to kill");
    let out = child.wait_with_output().unwrap();
    expect_error(&out, "a worker process died before recording its run");

    let s = f.study(&args);
    let rows = f.rows();
    assert_eq!(rows.len(), total, "every run exactly once");
    assert!(rows.iter().all(|r| r.infra.is_none()), "{rows:?}");
    assert!(
        rows.iter().all(|r| r.resolved == (r.arm == Arm::Shim)),
        "{rows:?}"
    );
    assert_eq!(s["shim"]["reproducible"], 3);
    assert_eq!(s["runs_total"], total);
    // Every log a row names is on disk.
    let store = Store::open(&f.path("study.db"), false).unwrap();
    for r in &rows {
        assert!(store.log(&r.stdout_sha256).is_some());
    }
    // Nothing of the killed studies is left running: workers and sandboxes died with them.
    assert!(
        wait_until(Duration::from_secs(10), || !host_cmdlines()
            .iter()
            .any(|c| c.contains("marker-resume-7391"))),
        "a run outlived its study"
    );
}

#[test]
fn sigterm_stops_a_study_with_one_line_on_how_to_resume() {
    let mut f = Fixture::new();
    for id in ["a", "b"] {
        f.add(
            id,
            FIX,
            PLAIN_TEST,
            serde_json::json!({"test_cmd": ": marker-term-5120; sleep 1; python3 -m pytest -p no:cacheprovider -q tests"}),
        );
    }
    let args = ["--k", "3", "--jobs", "2"];
    let child = f
        .cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let db = f.path("study.db");
    assert!(wait_until(Duration::from_secs(120), || {
        Store::open(&db, false)
            .ok()
            .and_then(|s| s.count_runs().ok())
            .is_some_and(|n| n >= 1)
    }));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("stopped by SIGTERM"))
        .unwrap_or_else(|| panic!("no stop line: {err}"));
    assert!(
        line.contains("run(s) recorded") && line.contains("run the same command again to resume"),
        "{line}"
    );
    assert_eq!(out.status.code(), Some(125), "{err}");
    let recorded = f.rows().len();
    assert!(recorded < 6, "stopped before the end: {recorded}");
    // The runs in flight ended with it.
    assert!(
        wait_until(Duration::from_secs(10), || !host_cmdlines()
            .iter()
            .any(|c| c.contains("marker-term-5120"))),
        "a run outlived its study"
    );
    // Resumed: every run once.
    f.study(&args);
    assert_eq!(f.rows().len(), 6);
}

#[test]
fn bad_input_is_one_line_and_leaves_nothing() {
    let mut f = Fixture::new();
    f.add("ok", FIX, PLAIN_TEST, serde_json::json!({}));
    f.write();
    let run = |inst: &str, pred: &str, extra: &[&str]| {
        let mut args = vec![
            "reproduce",
            "run",
            "--instances",
            inst,
            "--predictions",
            pred,
            "--db",
            "bad.db",
        ];
        args.extend(extra);
        f.work.run(&args)
    };
    expect_error(
        &run(
            "instances.jsonl",
            "predictions.jsonl",
            &["--instance-ids", "ok,nope"],
        ),
        "--instance-ids: nope not in the instances file",
    );
    std::fs::write(f.path("broken.jsonl"), "{\"instance_id\": \"ok\"}\n{oops\n").unwrap();
    expect_error(
        &run("instances.jsonl", "broken.jsonl", &[]),
        "broken.jsonl:2: malformed JSON",
    );
    let missing = std::fs::read_to_string(f.path("instances.jsonl"))
        .unwrap()
        .replace("\"repo_path\":\"repo\"", "\"repo_path\":\"gone\"");
    std::fs::write(f.path("missing.jsonl"), missing).unwrap();
    expect_error(
        &run("missing.jsonl", "predictions.jsonl", &[]),
        "instance ok: repository",
    );
    expect_error(
        &run("absent.jsonl", "predictions.jsonl", &[]),
        "read instances",
    );
    expect_error(
        &run("instances.jsonl", "predictions.jsonl", &["--k", "0"]),
        "--k must be at least 1",
    );
    expect_error(
        &run(
            "instances.jsonl",
            "predictions.jsonl",
            &["--no-shim-mirror", "repo"],
        ),
        "--no-shim-mirror",
    );
    assert!(!f.path("bad.db").exists(), "no study was created");
    let out = f
        .work
        .run(&["reproduce", "report", "--db", "bad.db", "--out", "rep"]);
    expect_error(&out, "no such study");
    assert!(!f.path("rep").exists());

    // A study's inputs cannot change under it.
    f.study(&["--k", "1"]);
    f.predictions[0]["model_patch"] = serde_json::json!(FIX.replace("a + b", "b + a"));
    let out = f.cmd(&["--k", "1"]).output().unwrap();
    expect_error(
        &out,
        "instance ok was recorded with a different model_patch",
    );
}

/// A wheel of one empty module, for `mirror add`.
fn tiny_wheel(dir: &Path, version: &str) -> PathBuf {
    let path = dir.join(format!("tinypkg-{version}-py3-none-any.whl"));
    let script = format!(
        "import zipfile, sys\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n    z.writestr('tinypkg/__init__.py', '')\n    z.writestr('tinypkg-{version}.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: tinypkg\\nVersion: {version}\\n')\n    z.writestr('tinypkg-{version}.dist-info/WHEEL', 'Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n    z.writestr('tinypkg-{version}.dist-info/RECORD', '')\n"
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    path
}

/// Each run records what it was made from: the tree's commit, the patches' digests and the
/// mirror's lock.json digest. A mirror pulled again under the same path between runs makes
/// a study whose runs differ in environment: `regrade` refuses it unless --allow-mixed.
#[test]
fn runs_carry_their_environment_and_regrade_refuses_to_mix_them() {
    let mut f = Fixture::new();
    let mirror = f.path("mirror");
    let wheel = tiny_wheel(f.work.path(), "1.0");
    let m = mirror.to_string_lossy().into_owned();
    expect_code(
        &f.work.run(&["mirror", "add", &m, &wheel.to_string_lossy()]),
        0,
    );
    f.add(
        "ok",
        FIX,
        PLAIN_TEST,
        serde_json::json!({"mirror": "mirror"}),
    );
    f.study(&["--k", "1"]);
    let lock = |m: &Path| sha256_hex(&std::fs::read(m.join("lock.json")).unwrap());
    let first = lock(&mirror);
    // Read as SQL: `runs.env` is part of the study's file format.
    let env: String = rusqlite::Connection::open(f.path("study.db"))
        .unwrap()
        .query_row("SELECT env FROM runs", [], |r| r.get(0))
        .unwrap();
    let env: serde_json::Value = serde_json::from_str(&env).unwrap();
    assert_eq!(env["commit"], f.base.as_str(), "{env}");
    assert_eq!(env["model_patch_sha256"], sha256_hex(FIX.as_bytes()));
    assert_eq!(env["mirror_lock_sha256"], first.as_str());
    assert_eq!(
        env["test_patch_sha256"],
        sha256_hex(test_patch("test_new.py", PLAIN_TEST).as_bytes())
    );

    // The same path, pulled again: the next run is made from another index.
    let newer = tiny_wheel(f.work.path(), "1.1");
    expect_code(
        &f.work.run(&["mirror", "add", &m, &newer.to_string_lossy()]),
        0,
    );
    assert_ne!(lock(&mirror), first);
    f.study(&["--k", "2"]);
    let out = f.work.run(&["reproduce", "regrade", "--db", "study.db"]);
    expect_error(&out, "ok shim: its runs were made in 2 environments (mirror lock.json differ); pass --allow-mixed");
    let out = f
        .work
        .run(&["reproduce", "regrade", "--db", "study.db", "--allow-mixed"]);
    let text = expect_code(&out, 0);
    assert!(
        text.contains("mixed (--allow-mixed): ok shim: 2 environments"),
        "{text}"
    );
}

/// `regrade` grades every run again from its stored logs: a grade tampered with in the
/// store is restored and nothing is re-run; infrastructure failures keep theirs; a missing
/// study is one line. Progress lines on request (`REPRORUN_PROGRESS=lines`).
#[test]
fn regrade_restores_grades_from_the_stored_logs() {
    let mut f = Fixture::new();
    f.add("ok", FIX, PLAIN_TEST, serde_json::json!({}));
    f.add("empty", "", PLAIN_TEST, serde_json::json!({}));
    let out = f
        .cmd(&["--k", "2", "--json"])
        .env("REPRORUN_PROGRESS", "lines")
        .output()
        .unwrap();
    expect_code(&out, 0);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 4, "one line per run: {err}");
    assert!(err.contains("[1/4 runs] "), "{err}");
    assert!(err.contains(" runs] ok shim #1 (ETA "), "{err}");
    let before = f.rows();
    assert!(before.iter().any(|r| r.instance_id == "ok" && r.resolved));

    let db = rusqlite::Connection::open(f.path("study.db")).unwrap();
    let tampered = db
        .execute(
            "UPDATE runs SET resolved = 0, signature = 'x', evidence = '[\"time\"]', tests = '{}' WHERE instance_id = 'ok' AND idx = 1",
            [],
        )
        .unwrap();
    assert_eq!(tampered, 1);
    drop(db);
    assert_ne!(f.rows(), before);

    let out = f
        .work
        .run(&["reproduce", "regrade", "--db", "study.db", "--json"]);
    let text = expect_code(&out, 0);
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["runs"], 4, "{v}");
    assert_eq!(v["graded"], 2, "{v}");
    assert_eq!(v["infra"], 2, "{v}");
    assert_eq!(v["changed"], 1, "{v}");
    assert_eq!(v["now_resolved"], 1, "{v}");
    assert_eq!(v["changes"][0]["instance_id"], "ok");
    assert_eq!(v["changes"][0]["idx"], 1);
    assert_eq!(
        f.rows(),
        before,
        "the grade is restored, the rest untouched"
    );

    // Nothing left to change; the text form.
    let out = f.work.run(&["reproduce", "regrade", "--db", "study.db"]);
    let text = expect_code(&out, 0);
    assert!(
        text.starts_with("regraded 2 of 4 runs (2 infrastructure failures kept): 0 changed"),
        "{text}"
    );
    assert_eq!(f.rows(), before);

    let out = f.work.run(&["reproduce", "regrade", "--db", "absent.db"]);
    expect_error(&out, "no such study");
    assert!(!f.path("absent.db").exists());
}

/// The shipped example corpus (images/corpus): the shim makes every patch reproducible;
/// without it, each of the five non-deterministic ones breaks, and the pins left out name
/// its failure mode.
#[test]
fn the_example_corpus_shows_the_shim_at_work() {
    let work = Work::new();
    let corpus = work.path().join("corpus");
    let recipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/corpus/build.sh");
    let out = Command::new(&recipe)
        .arg(&corpus)
        .env("REPRORUN", BIN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    expect_code(&out, 0);
    let expected: serde_json::Value = read_json(&corpus.join("expected.json"));
    let out = work
        .cmd(&[
            "reproduce",
            "run",
            "--instances",
            "corpus/instances.jsonl",
            "--predictions",
            "corpus/predictions.jsonl",
            "--no-shim-mirror",
            "corpus/mirror-live",
            "--db",
            "study.db",
            "--k",
            "3",
            "--compare-shim",
            "--jobs",
            "2",
            "--json",
        ])
        // A caller in another time zone: only the no-shim arm takes it.
        .env("TZ", "Asia/Tokyo")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    let n = expected.as_array().unwrap().len();
    assert_eq!(s["shim"]["reproducible"], n, "{s}");
    assert_eq!(s["no_shim"]["reproducible"], 2, "{s}");
    for e in expected.as_array().unwrap() {
        let id = e["instance_id"].as_str().unwrap();
        let i = instance(&s, id);
        assert_eq!(i["class_shim"], "reproducible", "{i}");
        match e["mode"].as_str() {
            None => assert_eq!(i["class_no_shim"], "reproducible", "{i}"),
            Some(mode) => {
                assert_ne!(i["class_no_shim"], "reproducible", "{i}");
                assert!(
                    i["modes_no_shim"]
                        .as_array()
                        .unwrap()
                        .contains(&mode.into()),
                    "{id}: {mode} not in {i}"
                );
                let mut pins: Vec<&str> = i["pins"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_str().unwrap())
                    .collect();
                let mut want: Vec<&str> = e["unresolved_without_pins"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_str().unwrap())
                    .collect();
                pins.sort();
                want.sort();
                assert_eq!(pins, want, "{id}");
            }
        }
    }
    // Five patches reproduce only with the shim, none only without it: p = 2/2^5.
    assert_eq!(s["mcnemar"]["b"], 5);
    assert_eq!(s["mcnemar"]["c"], 0);
    assert_eq!(s["mcnemar_p"], 0.0625);
    // One drift event among seven observed patches: a half-life can be fitted.
    assert_eq!(s["drift"]["events"], 1, "{s}");
    assert!(s["half_life_days"].as_f64().unwrap() > 0.0, "{s}");
    // The report says how little it rests on, when ages are taken, the overhead's spread.
    let iqr = s["overhead_iqr"].as_array().expect("overhead_iqr");
    assert!(iqr[0].as_f64().unwrap() <= iqr[1].as_f64().unwrap(), "{s}");
    let out = work.run(&["reproduce", "report", "--db", "study.db", "--out", "rep"]);
    expect_code(&out, 0);
    let md = std::fs::read_to_string(work.path().join("rep/report.md")).unwrap();
    assert!(
        md.contains("Caution: this rests on 1 drift event (fewer than 5)"),
        "{md}"
    );
    assert!(
        md.contains("A patch's age is measured from its benchmark date"),
        "{md}"
    );
    assert!(md.contains("interquartile range"), "{md}");
    let rows = Store::open(&work.path().join("study.db"), false)
        .unwrap()
        .rows()
        .unwrap();
    let clean_b = rows
        .iter()
        .find(|r| r.instance_id == "corpus-shelf__clean-b")
        .unwrap();
    assert_eq!(clean_b.apply, "model=patch-fuzz test=git-apply");
}

/// An instance that runs on an image instead of the host's root: the tree is on its
/// overlay at /work all the same, and the image's own tools run the test command.
#[test]
fn instances_run_on_an_image() {
    let mut f = Fixture::new();
    let store = f.work.path().join("store");
    let layout = crate::image::busybox_layout();
    let out = f
        .work
        .cmd(&["image", "import", &layout.display().to_string()])
        .env("REPRORUN_STORE", &store)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    expect_code(&out, 0);
    f.add(
        "on-busybox",
        FIX,
        PLAIN_TEST,
        serde_json::json!({
            "image": "busybox",
            "FAIL_TO_PASS": [],
            "PASS_TO_PASS": [],
            // busybox has no python: the image's own grep proves where it ran.
            "test_cmd": "grep -q 'a + b' calc.py && test -f tests/test_new.py && ! test -e /usr/bin/python3 && touch written",
        }),
    );
    let s = f.study(&["--k", "2", "--store", &store.display().to_string()]);
    assert_eq!(
        instance(&s, "on-busybox")["class_shim"],
        "reproducible",
        "{s}"
    );
    // Each run wrote into its own overlay, never into the shared tree.
    let trees = f.path("study.db.work/trees");
    for e in std::fs::read_dir(&trees).unwrap().flatten() {
        assert!(!e.path().join("written").exists(), "{}", e.path().display());
    }
    // A missing image is refused before anything is written (offline: not pulled).
    f.instances[0]["image"] = serde_json::json!("nonesuch");
    let out = f
        .cmd(&["--k", "1", "--pull", "never", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    expect_error(&out, "instance on-busybox: image \"nonesuch\"");
}

/// `--no-shim-net allow:...`: the no-shim arm reaches the allowlisted (loopback) index and
/// nothing else; the shim arm stays offline.
#[test]
fn the_no_shim_arm_reaches_allowlisted_hosts_only() {
    require!(Need::Root);
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    let mut f = Fixture::new();
    // curl takes the proxy from the environment; --noproxy '' lets it proxy a loopback
    // address too (the index is the host's loopback, not the sandbox's).
    f.add(
        "online",
        FIX,
        PLAIN_TEST,
        serde_json::json!({"FAIL_TO_PASS": [], "PASS_TO_PASS": [],
            "test_cmd": format!("curl -sf --noproxy '' http://127.0.0.1:{p}/simple/")}),
    );
    let net = format!("allow:127.0.0.1:{p},pypi.org");
    let s = f.study(&["--k", "1", "--compare-shim", "--no-shim-net", &net]);
    let i = instance(&s, "online");
    assert_eq!(i["class_no_shim"], "reproducible", "{s}");
    assert_ne!(i["class_shim"], "reproducible", "{s}");
    assert!(hits.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    // A bad pattern is refused (exit 125, clap's message) before anything runs.
    let o = f
        .cmd(&["--no-shim-net", "allow:pypi.org:*"])
        .output()
        .unwrap();
    expect_bad_input(&o, "pypi.org:*");
}

#[test]
fn the_ledger_names_each_tests_class_and_cause_and_exports_what_not_to_trust() {
    let mut f = Fixture::new();
    f.add("clean", FIX, PLAIN_TEST, serde_json::json!({}));
    // Passes at the benchmark's date (2023), fails at the real one: the clock decides it.
    f.add("dated", FIX, DATED_TEST, serde_json::json!({}));
    let s = f.study(&["--k", "2", "--compare-shim", "--pin-runs", "1"]);
    let out = f.work.run(&[
        "reproduce",
        "ledger",
        "--db",
        "study.db",
        "--json",
        "--export",
        "known-flaky.json",
    ]);
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
    let clean = test("clean");
    assert_eq!(clean["id"], "tests/test_new.py::test_new", "{clean}");
    assert_eq!(clean["class"], "stable_pass", "{clean}");
    assert_eq!(clean["arms"]["shim"]["passed"], 2, "{clean}");
    let dated = test("dated");
    assert_eq!(dated["class"], "environment", "{dated} {s}");
    let causes = dated["causes"].as_array().unwrap();
    assert!(
        causes.contains(&"time".into()) && causes.contains(&"clock".into()),
        "the leave-one-out run without the clock flips it: {dated}"
    );
    assert!(dated["fails_after"].is_null());
    assert_eq!(l["headline"]["environment"], 1, "{l}");
    let m = read_json(&f.path("known-flaky.json"));
    assert_eq!(m["format"], "reprorun-known-flaky/1");
    assert_eq!(
        m["instances"]["dated"]["exclude"][0]["test"],
        "tests/test_new.py::test_new"
    );
    assert!(m["instances"].get("clean").is_none(), "{m}");
    // The text form: the headline and the line of the test not to trust.
    let out = f.work.run(&["reproduce", "ledger", "--db", "study.db"]);
    let text = expect_code(&out, 0);
    assert!(
        text.starts_with(
            "4 tests in 2 instances: 3 stable pass, 0 stable fail, 0 flaky, 1 environment"
        ),
        "{text}"
    );
    assert!(
        text.contains("environment dated tests/test_new.py::test_new"),
        "{text}"
    );
    expect_error(
        &f.work.run(&["reproduce", "ledger", "--db", "missing.db"]),
        "missing.db",
    );
    // The manifest applied: without the dated test, dated's runs on the real clock (the two
    // no-shim runs and the one without the clock pin) are resolved; regrading without it
    // grades the test again.
    let regrade = |extra: &[&str]| {
        let mut args = vec!["reproduce", "regrade", "--db", "study.db", "--json"];
        args.extend_from_slice(extra);
        let out = f.work.run(&args);
        serde_json::from_str::<serde_json::Value>(&expect_code(&out, 0)).unwrap()
    };
    let r = regrade(&["--exclude", "known-flaky.json"]);
    assert_eq!(r["excluded"], 1, "{r}");
    assert_eq!(r["now_resolved"], 3, "{r}");
    let flipped: Vec<String> = r["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["resolved_before"] != c["resolved_after"])
        .map(|c| format!("{} {}", c["instance_id"], c["arm"]))
        .collect();
    assert_eq!(
        flipped,
        [
            "\"dated\" \"no_shim\"",
            "\"dated\" \"no_shim\"",
            "\"dated\" \"shim_without_clock\""
        ],
        "{r}"
    );
    let r = regrade(&[]);
    assert_eq!(
        (r["excluded"].as_u64(), r["now_unresolved"].as_u64()),
        (Some(0), Some(3)),
        "{r}"
    );
    std::fs::write(f.path("not-a-manifest.json"), "{\"format\": \"other\"}").unwrap();
    expect_error(
        &f.work.run(&[
            "reproduce",
            "regrade",
            "--db",
            "study.db",
            "--exclude",
            "not-a-manifest.json",
        ]),
        "not a reprorun-known-flaky/1 manifest",
    );
}

#[test]
fn a_clock_sweep_finds_a_time_bombs_first_failing_day() {
    let mut f = Fixture::new();
    // `datetime.date.today().year == 2023`: passes at the benchmark's date, fails from the
    // first day of 2024.
    f.add("dated", FIX, DATED_TEST, serde_json::json!({}));
    f.study(&["--k", "1", "--clock-sweep", "created_at,+1y"]);
    let rows = f.rows();
    let swept: Vec<String> = rows
        .iter()
        .filter(|r| r.arm.name().starts_with("shim_at_"))
        .map(|r| r.arm.name())
        .collect();
    assert!(
        swept.contains(&"shim_at_2024-01-01".to_string()),
        "{swept:?}"
    );
    assert!(
        swept.contains(&"shim_at_2023-12-31".to_string()),
        "{swept:?}"
    );
    assert!(swept.len() <= 12, "a bisection, not a scan: {swept:?}");
    let out = f
        .work
        .run(&["reproduce", "ledger", "--db", "study.db", "--json"]);
    let l: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    let t = &l["instances"][0]["tests"][0];
    assert_eq!(t["fails_after"], "2024-01-01", "{t}");
    assert_eq!(t["fails_after_exact"], true, "{t}");
    assert!(
        t["causes"].as_array().unwrap().contains(&"time".into()),
        "{t}"
    );
    assert_eq!(l["headline"]["time_bombs"], 1, "{l}");
    // Bad points are refused before anything runs.
    let out = f.cmd(&["--clock-sweep", "tomorrow"]).output().unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("\"tomorrow\" is not created_at, now, +Ny, +Nd or a date"));
}

#[test]
fn a_variation_run_names_the_variation_that_flips_a_test() {
    let mut f = Fixture::new();
    // Local midnight of the epoch: 0 under the shim's UTC, not under the caller's zone.
    let tz_test = "import calc, time\n\n\ndef test_new():\n    assert calc.add(2, 3) == 5\n    assert time.localtime(0).tm_hour == 0\n";
    f.add("zoned", FIX, tz_test, serde_json::json!({}));
    f.add("clean", FIX, PLAIN_TEST, serde_json::json!({}));
    let out = f
        .cmd(&["--json", "--k", "1", "--compare-shim", "--pin-runs", "1"])
        .env("TZ", "GMT+5")
        .output()
        .unwrap();
    expect_code(&out, 0);
    let rows = f.rows();
    let varied: Vec<String> = rows
        .iter()
        .filter(|r| r.arm.name().starts_with("shim_vary_"))
        .map(|r| format!("{} {}", r.instance_id, r.arm.name()))
        .collect();
    assert!(
        varied.contains(&"zoned shim_vary_timezone".to_string()),
        "{varied:?}"
    );
    assert!(
        !varied.iter().any(|v| v.starts_with("clean ")),
        "an instance whose tests agree costs nothing more: {varied:?}"
    );
    let out = f
        .work
        .run(&["reproduce", "ledger", "--db", "study.db", "--json"]);
    let l: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    let zoned = l["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["instance_id"] == "zoned")
        .unwrap();
    let t = &zoned["tests"][0];
    assert_eq!(t["class"], "environment", "{t}");
    let causes: Vec<&str> = t["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(causes.contains(&"timezone"), "{causes:?}");
    assert!(
        !causes.contains(&"locale") && !causes.contains(&"umask"),
        "{causes:?}"
    );
    // The variation runs ran the differing test alone (its node id), and say so.
    for r in rows
        .iter()
        .filter(|r| r.arm.name().starts_with("shim_vary_"))
    {
        let env: serde_json::Value = serde_json::from_str(r.env.as_deref().unwrap()).unwrap();
        let sel = &env["selection"];
        assert_eq!(sel["runner"], "pytest", "{env}");
        assert_eq!(
            sel["tests"],
            serde_json::json!(["tests/test_new.py::test_new"]),
            "{env}"
        );
        assert!(
            sel["command"]
                .as_str()
                .unwrap()
                .ends_with("-q 'tests/test_new.py::test_new'"),
            "{env}"
        );
    }
    // The report prints what finding the cause cost; the instance whose tests agree paid
    // nothing.
    let out = f
        .work
        .run(&["reproduce", "report", "--db", "study.db", "--out", "rep"]);
    expect_code(&out, 0);
    let s = read_json(&f.path("rep/summary.json"));
    let extra = |id: &str| {
        s["ledger"]["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance_id"] == id)
            .map(|i| i["extra_runs"].clone())
            .unwrap_or_else(|| panic!("{id}: {s}"))
    };
    assert_eq!(
        extra("clean"),
        serde_json::json!({"leave_one_out": 0, "variation": 0, "clock": 0})
    );
    assert_eq!(extra("zoned")["variation"], 6, "{s}");
    assert_eq!(s["ledger"]["extra_runs_stable"]["variation"], 0, "{s}");
    let md = std::fs::read_to_string(f.path("rep/report.md")).unwrap();
    assert!(md.contains("## Per-test ledger"), "{md}");
    assert!(
        md.contains("Instances whose tests are all stable got no leave-one-out or variation run."),
        "{md}"
    );
    let line = md.lines().find(|l| l.starts_with("| zoned")).unwrap();
    assert!(line.contains("timezone"), "{line}");
}
