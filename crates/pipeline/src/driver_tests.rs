//! The driver with a fourth pipeline written here: what a pipeline supplies (its unit, key,
//! body and tables) is all it takes to plan, work and merge.

use serde::{Deserialize, Serialize};

use super::*;
use crate::store::Schema;
use crate::tasks::{self, Plan};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct U {
    key: String,
    name: String,
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
    const FORMAT: &'static str = "toy-tasks/1";
    const CHUNK_FORMAT: &'static str = "toy-chunk/1";
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Body {
    name: String,
    idx: u32,
    value: i64,
    log: String,
}

static SCHEMA: Schema = Schema {
    sql: "CREATE TABLE IF NOT EXISTS toys (name TEXT NOT NULL, idx INTEGER NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (name, idx));",
    version: 1,
    make: "toy run",
    options: "none",
};

const SQL: &str = "
CREATE TABLE IF NOT EXISTS toy_hosts (name TEXT NOT NULL, idx INTEGER NOT NULL,
    shard_sha256 TEXT NOT NULL, hostname TEXT NOT NULL, machine_id TEXT NOT NULL,
    job TEXT NOT NULL, PRIMARY KEY (name, idx));
CREATE TABLE IF NOT EXISTS toy_attempts (shard_sha256 TEXT PRIMARY KEY, name TEXT NOT NULL,
    idx INTEGER NOT NULL, shard TEXT NOT NULL);
";

struct Toy {
    manifest: M,
    digest: String,
}

fn key(name: &str, idx: u32) -> String {
    format!("{name}.{idx}")
}

impl Pipeline for Toy {
    type Unit = U;
    type Body = Body;
    type Id = (String, u32);
    type Store = Db;
    type Error = MergeError;
    const RESULT_FORMAT: &'static str = "toy-result/1";
    const TABLES: Tables = Tables {
        sql: SQL,
        hosts: "toy_hosts",
        attempts: "toy_attempts",
        keys: 2,
        host_columns: HostColumns::Short,
    };
    fn digest(&self) -> &str {
        &self.digest
    }
    fn unit_id(&self, u: &U) -> (String, u32) {
        (u.name.clone(), u.idx)
    }
    fn body_id(b: &Body) -> (String, u32) {
        (b.name.clone(), b.idx)
    }
    fn key((name, idx): &(String, u32)) -> String {
        key(name, *idx)
    }
    fn name(b: &Body) -> String {
        format!("toy ({} #{})", b.name, b.idx)
    }
    fn columns((name, idx): &(String, u32)) -> Vec<Value> {
        vec![Value::Text(name.clone()), Value::Integer(i64::from(*idx))]
    }
    fn logs(b: &Body) -> Vec<&str> {
        vec![b.log.as_str()]
    }
    fn check(&self, b: &Body, _: &LogDir) -> Result<(), String> {
        if b.value < 0 {
            return Err("a negative value".into());
        }
        Ok(())
    }
    fn open_store(&self, db: &Path) -> Result<Db, MergeError> {
        Ok(Db::open(db, true, &SCHEMA)?)
    }
    fn db(store: &Db) -> &Db {
        store
    }
    fn recorded(store: &Db, (name, idx): &(String, u32)) -> Result<bool, MergeError> {
        store
            .conn()
            .query_row(
                "SELECT 1 FROM toys WHERE name = ?1 AND idx = ?2",
                rusqlite::params![name, idx],
                |_| Ok(()),
            )
            .optional()
            .map(|r| r.is_some())
            .map_err(|e| store.err()(e).into())
    }
    fn record(store: &Db, b: &Body) -> Result<(), MergeError> {
        store.insert_once(
            "INSERT OR IGNORE INTO toys VALUES (?1, ?2, ?3)",
            rusqlite::params![b.name, b.idx, b.value],
        )?;
        Ok(())
    }
}

/// Plans `n` toys × 2 indices into `dir/tasks`, one index per chunk, and opens the plan.
fn plan(dir: &Path, n: u32) -> (Toy, BTreeMap<String, (u32, U)>) {
    let units: Vec<U> = (0..2)
        .flat_map(|idx| {
            (0..n).map(move |i| U {
                key: key(&format!("t{i}"), idx),
                name: format!("t{i}"),
                idx,
            })
        })
        .collect();
    let out = dir.join("tasks");
    let files = PlanFiles {
        pipeline: "toy",
        out: &out,
        results: &dir.join("results"),
        db: &dir.join("toy.db"),
        reprorun: Path::new("/bin/reprorun"),
        sbatch_args: "",
        chunk_format: M::CHUNK_FORMAT,
        chunk: None,
        by_idx: true,
        stagger_ms: None,
    };
    let m = write_plan(&files, &units, |chunks| M {
        format: M::FORMAT.into(),
        chunks,
    })
    .unwrap()
    .unwrap();
    assert!(m.chunks.len() >= 2, "one index per chunk");
    for f in ["submit.sh", "task.sh", "merge.sh"] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        assert!(text.contains("toy"), "{f}");
    }
    let (manifest, digest) = tasks::open::<M>(&out).unwrap();
    let units = tasks::units(&manifest, &out, |_| true).unwrap();
    (Toy { manifest, digest }, units)
}

/// `work` over every chunk: one result per unit, with a log.
fn work(toy: &Toy, dir: &Path) {
    let results = dir.join("results");
    for r in &toy.manifest.chunks {
        let file = dir.join("tasks").join(cluster::chunk_file(r.index));
        let chunk = tasks::chunk(&toy.manifest, &file, |_| true).unwrap();
        let w = Worker::start(&results, &toy.digest, chunk.index, Toy::RESULT_FORMAT).unwrap();
        let (done, result) = w.run(
            &chunk.units,
            |u| &u.key,
            |u| {
                let log = w.logs.put(u.key.as_bytes()).map_err(|e| e.to_string())?;
                let body = Body {
                    name: u.name.clone(),
                    idx: u.idx,
                    value: i64::from(u.idx) + 1,
                    log,
                };
                w.write(&u.key, body).map_err(|e| e.to_string())
            },
        );
        result.unwrap();
        assert_eq!(done.ran as usize, chunk.units.len());
    }
}

#[test]
fn a_fourth_pipeline_plans_works_and_merges_in_batches_once() {
    let dir = tempfile::tempdir().unwrap();
    let (toy, units) = plan(dir.path(), 1100);
    work(&toy, dir.path());
    let (results, db) = (dir.path().join("results"), dir.path().join("toy.db"));
    // 2,200 results: more than one batch.
    let m = merge(&toy, &units, &results, &db).unwrap();
    assert_eq!((m.inserted, m.attempts, m.already), (2200, 0, 0));
    assert_eq!((m.coverage.recorded, m.coverage.planned), (2200, 2200));
    assert!(m.coverage.missing_chunks.is_empty());
    let m = merge(&toy, &units, &results, &db).unwrap();
    assert_eq!((m.inserted, m.attempts, m.already), (0, 0, 2200));

    // A second result of a unit (a requeued task) is an attempt, kept apart.
    let (_, u) = &units[&key("t7", 1)];
    let first = std::fs::read_to_string(cluster::result_path(&results, &u.key)).unwrap();
    let mut again: Shard<Body> = serde_json::from_str(&first).unwrap();
    again.finished_at += 60;
    again.host.job = "slurm:1_2".into();
    let text = serde_json::to_string(&again).unwrap();
    cluster::write_result(&results, &u.key, text.as_bytes(), "slurm:1_2").unwrap();
    let m = merge(&toy, &units, &results, &db).unwrap();
    assert_eq!((m.inserted, m.attempts, m.already), (0, 1, 2200));
    let store = Db::open(&db, false, &SCHEMA).unwrap();
    let count = |table: &str| -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        store.conn().query_row(&sql, [], |r| r.get(0)).unwrap()
    };
    assert_eq!(
        (count("toys"), count("toy_hosts"), count("toy_attempts")),
        (2200, 2200, 1)
    );
    // Its log went into the study's log store.
    let logged = u.key.as_bytes();
    assert_eq!(store.log(&sha256_hex(logged)).as_deref(), Some(logged));
}

#[test]
fn a_foreign_or_failing_result_refuses_the_whole_merge() {
    let dir = tempfile::tempdir().unwrap();
    let (toy, units) = plan(dir.path(), 3);
    work(&toy, dir.path());
    let (results, db) = (dir.path().join("results"), dir.path().join("toy.db"));
    let path = cluster::result_path(&results, &key("t1", 0));
    let good = std::fs::read_to_string(&path).unwrap();
    let refused = |text: &str, needle: &str| {
        std::fs::write(&path, text).unwrap();
        let e = merge(&toy, &units, &results, &db).unwrap_err().to_string();
        assert!(e.contains("refused") && e.contains(needle), "{e}");
        assert!(!db.exists(), "nothing merged, no database made");
    };
    let mut s: Shard<Body> = serde_json::from_str(&good).unwrap();
    s.manifest_sha256 = "0".repeat(64);
    refused(&serde_json::to_string(&s).unwrap(), "another plan");
    let mut s: Shard<Body> = serde_json::from_str(&good).unwrap();
    s.body.value = -1;
    refused(&serde_json::to_string(&s).unwrap(), "a negative value");
    let mut s: Shard<Body> = serde_json::from_str(&good).unwrap();
    s.body.idx = 1;
    refused(&serde_json::to_string(&s).unwrap(), "is not unit");
    refused("{", "not a result file");
    std::fs::write(&path, &good).unwrap();
    assert_eq!(merge(&toy, &units, &results, &db).unwrap().inserted, 6);
}

#[test]
fn work_jobs_makes_a_chunks_units_at_once_and_skips_recorded_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (toy, planned) = plan(dir.path(), 2);
    let results = dir.path().join("results");
    // One task given every unit (as a chunk of four would be).
    let units: Vec<U> = planned.values().map(|(_, u)| u.clone()).collect();
    assert_eq!(units.len(), 4);
    let times = dir.path().join("times");
    let w = Worker::start(&results, &toy.digest, 0, Toy::RESULT_FORMAT).unwrap();
    let mut progress = Progress::new(crate::progress::ProgressMode::Off, "toys");
    let (done, result) = w.run_jobs(
        &units,
        2,
        &mut progress,
        |u| &u.key,
        |u| u.key.clone(),
        |u| {
            // Each unit in a worker process of its own: its span, appended (O_APPEND).
            let start = crate::unix_now_ms();
            std::thread::sleep(std::time::Duration::from_millis(300));
            let end = crate::unix_now_ms();
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&times)
                .map_err(|e| e.to_string())?;
            std::io::Write::write_all(&mut f, format!("{start} {end}\n").as_bytes())
                .map_err(|e| e.to_string())?;
            let log = w.logs.put(u.key.as_bytes()).map_err(|e| e.to_string())?;
            let body = Body {
                name: u.name.clone(),
                idx: u.idx,
                value: 1,
                log,
            };
            w.write(&u.key, body).map_err(|e| e.to_string())
        },
    );
    result.unwrap();
    assert_eq!((done.ran, done.skipped, done.stopped), (4, 0, false));
    let spans: Vec<(i64, i64)> = std::fs::read_to_string(&times)
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    assert_eq!(spans.len(), 4);
    let overlapping = spans
        .iter()
        .enumerate()
        .any(|(i, a)| spans[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(overlapping, "two units ran at once: {spans:?}");
    // Again: every unit has its result, nothing runs.
    let w = Worker::start(&results, &toy.digest, 0, Toy::RESULT_FORMAT).unwrap();
    let (done, result) = w.run_jobs(
        &units,
        2,
        &mut progress,
        |u| &u.key,
        |u| u.key.clone(),
        |_| Err::<(), String>("must not run".into()),
    );
    result.unwrap();
    assert_eq!((done.ran, done.skipped), (0, 4));
    // A failing unit stops the task with its line.
    let (_, result) = Worker::start(
        &dir.path().join("other"),
        &toy.digest,
        0,
        Toy::RESULT_FORMAT,
    )
    .unwrap()
    .run_jobs(
        &units,
        2,
        &mut progress,
        |u| &u.key,
        |u| u.key.clone(),
        |_| Err::<(), String>("the sandbox could not start".into()),
    );
    assert!(result
        .unwrap_err()
        .to_string()
        .contains("the sandbox could not start"));
}
