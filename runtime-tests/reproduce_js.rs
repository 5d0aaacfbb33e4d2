//! The JavaScript example instance (images/js-corpus): a `node --test` suite whose patch
//! needs a dependency file that moved in a later major version. Reproducible from the
//! instance's frozen npm mirror, broken from "today's" registry, and the pin left out names
//! the mirror. Its registry is served on loopback by the recipe; nothing leaves the machine.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;

#[test]
fn the_javascript_instance_drifts_without_the_shim() {
    require!(Need::Root, Need::Tool("npm"));
    let work = Work::new();
    let recipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/js-corpus/build.sh");
    let out = Command::new(&recipe)
        .arg(work.path().join("js"))
        .env("REPRORUN", BIN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    expect_code(&out, 0);
    let out = work.run(&[
        "reproduce",
        "run",
        "--instances",
        "js/instances.jsonl",
        "--predictions",
        "js/predictions.jsonl",
        "--no-shim-mirror",
        "js/mirror-live",
        "--db",
        "study.db",
        "--k",
        "2",
        "--compare-shim",
        "--json",
    ]);
    let s: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    let i = &s["instances"][0];
    assert_eq!(i["instance_id"], "js-tablefmt__drift", "{s}");
    assert_eq!(i["class_shim"], "reproducible", "{i}");
    assert_eq!(i["class_no_shim"], "broken", "{i}");
    assert_eq!(
        i["modes_no_shim"],
        serde_json::json!(["dependency_drift"]),
        "{i}"
    );
    assert_eq!(i["pins"], serde_json::json!(["mirror"]), "{i}");
    // The per-test statuses come from node's TAP output.
    let db = rusqlite::Connection::open(work.path().join("study.db")).unwrap();
    let tests: String = db
        .query_row(
            "SELECT tests FROM runs WHERE arm = 'shim' AND idx = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let tests: serde_json::Value = serde_json::from_str(&tests).unwrap();
    assert_eq!(
        tests,
        serde_json::json!({"header joins columns": "passed", "row pads every cell": "passed"})
    );
}
