//! `reprorun reproduce` on a real Go module (dustin/go-humanize, `fixtures/go-humanize`):
//! the build cache warmed once per tree and shared read-only by the runs (issue 45).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;

/// The model patch: a function of the module's own.
const MODEL_PATCH: &str = "diff --git a/reprorun.go b/reprorun.go
new file mode 100644
--- /dev/null
+++ b/reprorun.go
@@ -0,0 +1,4 @@
+package humanize
+
+// Issue is the number of the issue this instance checks.
+func Issue() int { return 45 }
";

/// The test patch: the patch's test, and one that says which build cache the run had and
/// whether Go may replay a test result from it.
const TEST_PATCH: &str = "diff --git a/reprorun_test.go b/reprorun_test.go
new file mode 100644
--- /dev/null
+++ b/reprorun_test.go
@@ -0,0 +1,16 @@
+package humanize
+
+import (
+\t\"os\"
+\t\"strings\"
+\t\"testing\"
+)
+
+func TestIssue(t *testing.T) {
+\tif Issue() != 45 {
+\t\tt.Fatal(Issue())
+\t}
+\tif os.Getenv(\"GOCACHE\") != \"/.reprorun/go-cache\" || !strings.Contains(os.Getenv(\"GOFLAGS\"), \"-count=1\") {
+\t\tt.Fatalf(\"GOCACHE=%q GOFLAGS=%q\", os.Getenv(\"GOCACHE\"), os.Getenv(\"GOFLAGS\"))
+\t}
+}
";

fn write_study(dir: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/fixtures/go-humanize");
    let repos = dir.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    std::fs::copy(
        fixtures.join("dustin__go-humanize.bundle"),
        repos.join("dustin__go-humanize.bundle"),
    )
    .unwrap();
    let inst = serde_json::json!({
        "instance_id": "dustin__go-humanize-45",
        "repo": "dustin/go-humanize",
        "base_commit": "4d1d9082551ec085912e7d2253a33ae547fca000",
        "test_patch": TEST_PATCH,
        "FAIL_TO_PASS": ["TestIssue"],
        "PASS_TO_PASS": ["TestOrdinals", "TestCommas"],
        "created_at": "2025-11-24T12:00:00Z",
        "test_cmd": "go test -v ./...",
        "recorded_resolved": true,
    });
    let pred = serde_json::json!({
        "instance_id": "dustin__go-humanize-45", "model_name_or_path": "m",
        "model_patch": MODEL_PATCH,
    });
    std::fs::write(dir.join("instances.jsonl"), format!("{inst}\n")).unwrap();
    std::fs::write(dir.join("predictions.jsonl"), format!("{pred}\n")).unwrap();
}

fn study(w: &Work, db: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "reproduce",
        "run",
        "--instances",
        "instances.jsonl",
        "--predictions",
        "predictions.jsonl",
        "--repos",
        "repos",
        "--db",
        db,
        "--k",
        "2",
        "--json",
    ];
    args.extend(extra);
    let out = w.cmd(&args).stdin(Stdio::null()).output().unwrap();
    serde_json::from_str(&expect_code(&out, 0)).unwrap()
}

/// The wall times of a study's runs, in ms.
fn wall_ms(db: &Path) -> Vec<u64> {
    let db = rusqlite::Connection::open(db).unwrap();
    let mut q = db
        .prepare("SELECT wall_ms FROM runs ORDER BY arm, idx")
        .unwrap();
    let rows = q.query_map([], |r| r.get::<_, i64>(0)).unwrap();
    rows.map(|r| r.unwrap() as u64).collect()
}

#[test]
fn go_runs_share_a_read_only_build_cache_warmed_once() {
    require!(Need::Root, Need::Tool("go"), Need::Tool("git"));
    let w = Work::new();
    write_study(w.path());
    let s = study(&w, "cached.db", &["--go-cache"]);
    let i = &s["instances"][0];
    assert_eq!(i["class_shim"], "reproducible", "{s}");
    assert_eq!(
        i["resolved_runs"]["shim"], 2,
        "every run had the cache and -count=1: {i}"
    );
    // One cache per tree, warmed once, marked done; the runs could not write it.
    let caches: Vec<_> = std::fs::read_dir(w.path().join("cached.db.work/go-cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(caches.len(), 1, "{caches:?}");
    assert!(caches[0].join("ready").is_file());
    let entries = Command::new("find")
        .arg(caches[0].join("cache"))
        .args(["-type", "f"])
        .output()
        .unwrap();
    assert!(
        stdout(&entries).lines().count() > 10,
        "the warm-up filled the cache"
    );
    // Without --go-cache: every run from a cold cache of its own; the instance's check fails.
    let s = study(&w, "cold.db", &[]);
    let i = &s["instances"][0];
    assert_eq!(i["resolved_runs"]["shim"].as_u64().unwrap_or(0), 0, "{i}");
    assert!(!w.path().join("cold.db.work/go-cache").exists());
    eprintln!(
        "go-humanize run wall times (ms): cached {:?}, cold {:?}",
        wall_ms(&w.path().join("cached.db")),
        wall_ms(&w.path().join("cold.db"))
    );
}
