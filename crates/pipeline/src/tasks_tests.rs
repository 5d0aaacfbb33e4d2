use serde::{Deserialize, Serialize};

use super::*;
use crate::cluster::{chunk_texts, layout, numbered, write_plan, write_result, Indexed};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct U {
    key: String,
    idx: u32,
}

impl Indexed for U {
    fn idx(&self) -> u32 {
        self.idx
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct M {
    format: String,
    chunks: Vec<ChunkRef>,
}

impl Plan for M {
    type Unit = U;
    const FORMAT: &'static str = "test-tasks/1";
    const CHUNK_FORMAT: &'static str = "test-chunk/1";
    fn format(&self) -> &str {
        &self.format
    }
    fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }
    fn key(u: &U) -> &str {
        &u.key
    }
}

fn units5() -> Vec<U> {
    (0..5)
        .map(|i| U {
            key: format!("u{i}"),
            idx: i / 3,
        })
        .collect()
}

/// A plan of five units, two per chunk, written into a new directory.
fn planned() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let chunks = numbered(M::CHUNK_FORMAT, layout(&units5(), Some(2), false, None));
    let (files, refs) = chunk_texts(dir.path(), chunks);
    let m = M {
        format: M::FORMAT.into(),
        chunks: refs,
    };
    let text = serde_json::to_string(&m).unwrap();
    write_plan(dir.path(), &files, &text).unwrap().unwrap();
    dir
}

#[test]
fn a_plan_reads_back_with_its_digest_and_every_unit_in_its_chunk() {
    let dir = planned();
    let (m, digest) = open::<M>(dir.path()).unwrap();
    let bytes = std::fs::read(dir.path().join("manifest.json")).unwrap();
    assert_eq!(digest, sha256_hex(&bytes));
    let all = units(&m, dir.path(), |_| true).unwrap();
    let got: Vec<(&str, u32)> = all.iter().map(|(k, (c, _))| (k.as_str(), *c)).collect();
    assert_eq!(got, [("u0", 0), ("u1", 0), ("u2", 1), ("u3", 1), ("u4", 2)]);
}

#[test]
fn a_manifest_of_another_format_or_not_json_or_absent_is_refused() {
    let dir = planned();
    let path = dir.path().join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("test-tasks/1", "test-tasks/9")).unwrap();
    let e = open::<M>(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("format \"test-tasks/9\", this reprorun reads \"test-tasks/1\""),
        "{e}"
    );
    std::fs::write(&path, "{").unwrap();
    let e = open::<M>(dir.path()).unwrap_err().to_string();
    assert!(e.contains("not a plan"), "{e}");
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(
        open::<M>(dir.path()),
        Err(TasksError::File(FileError::Read { .. }))
    ));
}

#[test]
fn a_chunk_edited_foreign_or_holding_a_strange_unit_is_refused() {
    let dir = planned();
    let (m, _) = open::<M>(dir.path()).unwrap();
    let file = dir.path().join(chunk_file(1));
    assert_eq!(chunk(&m, &file, |_| true).unwrap().units.len(), 2);
    // A unit the pipeline does not accept.
    let e = chunk(&m, &file, |u| u.key != "u3").unwrap_err().to_string();
    assert!(e.ends_with("unit u3 is not a unit of the plan"), "{e}");
    // One byte changed.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("u3", "u9")).unwrap();
    let e = chunk(&m, &file, |_| true).unwrap_err().to_string();
    assert!(e.contains("chunk 1 differs from the one planned"), "{e}");
    // A chunk number the manifest does not have.
    let other = Chunk {
        format: M::CHUNK_FORMAT.to_string(),
        index: 7,
        units: units5(),
    };
    std::fs::write(&file, serde_json::to_string(&other).unwrap()).unwrap();
    let e = chunk(&m, &file, |_| true).unwrap_err().to_string();
    assert!(e.contains("chunk 7 is not in the manifest"), "{e}");
    // The whole plan is refused with it.
    assert!(units(&m, dir.path(), |_| true).is_err());
}

#[test]
fn work_skips_units_with_a_result_and_stops_at_the_first_error() {
    let results = tempfile::tempdir().unwrap();
    write_result(results.path(), "u1", b"{}", "local:1").unwrap();
    let mut seen = Vec::new();
    let (done, r) = work_units(
        &units5(),
        results.path(),
        |u| u.key.as_str(),
        |u| {
            seen.push(u.key.clone());
            if u.key == "u3" {
                Err("boom")
            } else {
                Ok(())
            }
        },
    );
    assert_eq!(r, Err("boom"));
    assert_eq!(
        seen,
        ["u0", "u2", "u3"],
        "u1 has a result; nothing after u3"
    );
    assert_eq!(
        done,
        Done {
            ran: 2,
            skipped: 1,
            stopped: false
        }
    );
}
