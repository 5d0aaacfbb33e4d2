use std::path::{Path, PathBuf};
use std::time::Duration;

use super::merge::{merge, MergeOptions, Merged};
use super::*;
use crate::store::{RunRow, Store};
use reprorun_pipeline::cluster::{chunk_file, layout, result_path, write_result};
use reprorun_pipeline::host;
use reprorun_pipeline::host::Host;

fn inst(id: &str) -> Instance {
    Instance {
        instance_id: id.into(),
        repo: String::new(),
        repo_path: "/repo".into(),
        base_commit: "abc".into(),
        test_patch: String::new(),
        model_patch: "p".into(),
        model_name: String::new(),
        fail_to_pass: vec![],
        pass_to_pass: vec![],
        test_cmd: "true".into(),
        image: None,
        rootfs: None,
        mirror: None,
        cassette: None,
        bench_date: 1_683_720_000,
        recorded_resolved: true,
    }
}

fn units(ids: &[&str], k: u32) -> Vec<Unit> {
    let mut v = Vec::new();
    for idx in 0..k {
        for id in ids {
            v.push(Unit::new(id, Arm::Shim, idx));
        }
    }
    v
}

/// A plan of `ids` × shim × k, one unit per chunk, written into `dir/tasks`.
fn write_plan(dir: &Path, ids: &[&str], k: u32) -> PathBuf {
    let tasks = dir.join("tasks");
    std::fs::create_dir_all(tasks.join("chunks")).unwrap();
    let cond = Conditions::new(Duration::from_secs(60), 0);
    let mut refs = Vec::new();
    for (i, (units, begin_s)) in layout(&units(ids, k), Some(1), false, None)
        .into_iter()
        .enumerate()
    {
        let chunk = Chunk {
            format: CHUNK_FORMAT.into(),
            index: i as u32,
            units,
        };
        let text = serde_json::to_string_pretty(&chunk).unwrap() + "\n";
        std::fs::write(tasks.join(chunk_file(i as u32)), &text).unwrap();
        refs.push(ChunkRef {
            index: i as u32,
            units: 1,
            sha256: sha256_hex(text.as_bytes()),
            begin_s,
        });
    }
    let m = Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: "0".into(),
        db: dir.join("study.db"),
        results: dir.join("results"),
        k,
        arms: vec!["shim".into()],
        instances_sha256: String::new(),
        predictions_sha256: String::new(),
        options_fingerprint: cond.fingerprint(),
        conditions: CondSpec::of(&cond),
        stagger_ms: None,
        spread_hosts: false,
        phase: plan::Phase::Runs,
        instances: ids.iter().map(|i| inst(i)).collect(),
        without_prediction: vec![],
        chunks: refs,
    };
    std::fs::write(
        tasks.join("manifest.json"),
        serde_json::to_string_pretty(&m).unwrap(),
    )
    .unwrap();
    tasks
}

fn host(job: &str) -> Host {
    Host {
        hostname: "node1".into(),
        kernel: "6.1".into(),
        cpu_model: "cpu".into(),
        cpus: 4,
        mem_bytes: 1 << 30,
        os: "Debian".into(),
        machine_id: "0123456789abcdef".into(),
        reprorun_version: "0".into(),
        job: job.into(),
    }
}

/// A result of unit `u` (in chunk `chunk`) as `work` writes it, logs included.
fn result(tasks: &Tasks, results: &Path, u: &Unit, chunk: u32, out: &str) -> Shard {
    let logs = results.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let put = |b: &[u8]| {
        let d = sha256_hex(b);
        std::fs::write(logs.join(&d), b).unwrap();
        d
    };
    let row = RunRow {
        instance_id: u.instance_id.clone(),
        arm: u.arm,
        idx: u.idx,
        resolved: true,
        infra: None,
        exit_code: 0,
        wall_ms: 10,
        started_at: 1_700_000_000,
        signature: "s".into(),
        evidence: vec![],
        apply: "model=git-apply test=git-apply".into(),
        tests: "{}".into(),
        stdout_sha256: put(out.as_bytes()),
        stderr_sha256: put(b""),
        junit_sha256: None,
        error: None,
        env: None,
    };
    Shard {
        format: SHARD_FORMAT.into(),
        manifest_sha256: tasks.digest.clone(),
        key: u.key.clone(),
        chunk,
        body: super::merge::Body { row },
        host: host("slurm:7_1"),
        finished_at: 1_700_000_001,
    }
}

fn write(results: &Path, s: &Shard) -> PathBuf {
    write_result(
        results,
        &s.key,
        serde_json::to_string(s).unwrap().as_bytes(),
        &s.host.job,
    )
    .unwrap()
}

struct Study {
    dir: tempfile::TempDir,
    tasks: Tasks,
    units: Vec<(u32, Unit)>,
}

impl Study {
    fn new() -> Study {
        let dir = tempfile::tempdir().unwrap();
        let t = write_plan(dir.path(), &["a/b#1", "c"], 2);
        let tasks = Tasks::open(&t).unwrap();
        let units = tasks.units().unwrap().into_values().collect();
        Study { dir, tasks, units }
    }
    fn results(&self) -> PathBuf {
        self.dir.path().join("results")
    }
    fn merge(&self) -> Result<Merged, ClusterError> {
        merge(&MergeOptions {
            tasks: self.tasks.dir.clone(),
            results: self.results(),
            db: self.dir.path().join("study.db"),
        })
    }
    fn store(&self) -> Store {
        Store::open(&self.dir.path().join("study.db"), false).unwrap()
    }
    fn write_all(&self) {
        for (c, u) in &self.units {
            write(
                &self.results(),
                &result(&self.tasks, &self.results(), u, *c, "ok"),
            );
        }
    }
}

#[test]
fn default_chunks_keep_an_array_under_a_thousand_tasks() {
    let ids: Vec<String> = (0..1250).map(|i| format!("i{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let us = units(&refs, 2);
    let chunks = layout(&us, None, false, None);
    assert!(chunks.len() <= 1000, "{}", chunks.len());
    assert_eq!(chunks.iter().map(|c| c.0.len()).sum::<usize>(), 2500);
    // Small studies: one run per task.
    assert_eq!(layout(&us[..10], None, false, None).len(), 10);
    assert_eq!(layout(&us[..10], Some(4), false, None).len(), 3);
}

#[test]
fn spread_and_stagger_keep_one_run_index_per_chunk() {
    let us = units(&["a", "b", "c"], 3);
    let chunks = layout(&us, Some(2), true, Some(90_000));
    for (c, begin) in &chunks {
        assert!(c.iter().all(|u| u.idx == c[0].idx));
        assert_eq!(*begin, 90 * c[0].idx as u64);
    }
    assert_eq!(chunks.len(), 6, "3 indices × (2 + 1)");
}

#[test]
fn keys_are_file_names_and_distinct() {
    let a = key("a/b#1", Arm::ShimWithout(crate::Pin::Clock), 3);
    assert!(
        !a.contains('/') && a.ends_with(".shim_without_clock.3"),
        "{a}"
    );
    assert_ne!(key("a/b", Arm::Shim, 0), key("a_b", Arm::Shim, 0));
}

#[test]
fn chunk_and_result_formats_round_trip() {
    let s = Study::new();
    let (c, u) = &s.units[0];
    let shard = result(&s.tasks, &s.results(), u, *c, "x");
    let text = serde_json::to_string(&shard).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["format"], "reprorun-result/1");
    assert_eq!(v["row"]["arm"], "shim");
    assert_eq!(v["host"]["job"], "slurm:7_1");
    assert_eq!(serde_json::from_str::<Shard>(&text).unwrap(), shard);
}

#[test]
fn the_tests_variation_runs_select_travel_with_the_conditions() {
    let mut cond = Conditions::new(Duration::from_secs(1), 0);
    let spec = CondSpec::of(&cond);
    let text = serde_json::to_string(&spec).unwrap();
    // None selected: the manifest is as before (no field), and such a manifest reads back.
    assert!(!text.contains("select"), "{text}");
    assert!(serde_json::from_str::<CondSpec>(&text)
        .unwrap()
        .conditions()
        .unwrap()
        .select
        .is_empty());
    cond.select
        .insert("i".into(), vec!["t.py::a".into(), "t.py::b".into()]);
    let text = serde_json::to_string(&CondSpec::of(&cond)).unwrap();
    let back = serde_json::from_str::<CondSpec>(&text).unwrap();
    assert_eq!(back.conditions().unwrap().select, cond.select);
}

#[test]
fn a_changed_chunk_or_manifest_is_refused() {
    let s = Study::new();
    let file = s.tasks.dir.join(chunk_file(0));
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("\"idx\": 0", "\"idx\": 7")).unwrap();
    let e = s.tasks.chunk(&file).unwrap_err().to_string();
    assert!(e.contains("differs from the one planned"), "{e}");
    let m = s.tasks.dir.join("manifest.json");
    let text = std::fs::read_to_string(&m).unwrap();
    std::fs::write(&m, text.replace("\"seed\": 0", "\"seed\": 1")).unwrap();
    let e = Tasks::open(&s.tasks.dir).err().unwrap().to_string();
    assert!(e.contains("options_fingerprint"), "{e}");
}

#[test]
fn merge_records_each_run_once_and_again_adds_nothing() {
    let s = Study::new();
    s.write_all();
    let m = s.merge().unwrap();
    assert_eq!((m.inserted, m.attempts, m.already), (4, 0, 0));
    assert_eq!((m.coverage.recorded, m.coverage.planned), (4, 4));
    assert!(m.coverage.missing_chunks.is_empty());
    let m = s.merge().unwrap();
    assert_eq!((m.inserted, m.attempts, m.already), (0, 0, 4));
    assert_eq!(s.store().count_runs().unwrap(), 4);
    let hosts = super::merge::distinct_hosts(&s.store()).unwrap();
    assert_eq!(hosts.get("c"), Some(&1));
}

#[test]
fn a_second_result_of_a_run_is_an_attempt() {
    let s = Study::new();
    s.write_all();
    let (c, u) = &s.units[1];
    let mut again = result(&s.tasks, &s.results(), u, *c, "other output");
    again.host.job = "slurm:7_1-requeued".into();
    again.body.row.started_at += 100;
    let path = write(&s.results(), &again);
    assert_ne!(
        path,
        result_path(&s.results(), &u.key),
        "never over the first"
    );
    let m = s.merge().unwrap();
    assert_eq!((m.inserted, m.attempts), (4, 1));
    let store = s.store();
    let row = store
        .rows()
        .unwrap()
        .into_iter()
        .find(|r| r.instance_id == u.instance_id && r.idx == u.idx)
        .unwrap();
    assert_eq!(row.started_at, 1_700_000_000, "the first result is the run");
    let n: i64 = store
        .conn()
        .query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(s.merge().unwrap().already, 5);
}

#[test]
fn tampered_results_are_refused_and_nothing_is_merged() {
    // A log that is not what the row's digest says.
    let s = Study::new();
    s.write_all();
    let (c, u) = &s.units[0];
    let r = result(&s.tasks, &s.results(), u, *c, "ok");
    std::fs::write(
        s.results().join("logs").join(&r.body.row.stdout_sha256),
        "forged",
    )
    .unwrap();
    let e = s.merge().unwrap_err().to_string();
    assert!(e.contains("does not match its digest"), "{e}");
    assert!(!e.contains('\n'));
    assert!(
        Store::open(&s.dir.path().join("study.db"), false).is_err()
            || s.store().count_runs().unwrap() == 0
    );

    // A run renamed into a key the manifest does not have.
    let s = Study::new();
    let (c, u) = &s.units[0];
    let mut r = result(&s.tasks, &s.results(), u, *c, "ok");
    r.key = key("zzz", Arm::Shim, 0);
    write(&s.results(), &r);
    let e = s.merge().unwrap_err().to_string();
    assert!(e.contains("unknown unit"), "{e}");

    // A run that is not the unit it is filed under.
    let s = Study::new();
    let (c, u) = &s.units[0];
    let mut r = result(&s.tasks, &s.results(), u, *c, "ok");
    r.body.row.idx = 1;
    write(&s.results(), &r);
    let e = s.merge().unwrap_err().to_string();
    assert!(e.contains("is not unit"), "{e}");

    // A result of another plan.
    let s = Study::new();
    let (c, u) = &s.units[0];
    let mut r = result(&s.tasks, &s.results(), u, *c, "ok");
    r.manifest_sha256 = sha256_hex(b"another");
    write(&s.results(), &r);
    let e = s.merge().unwrap_err().to_string();
    assert!(e.contains("another plan"), "{e}");
}

#[test]
fn missing_lists_the_chunks_without_a_result() {
    let s = Study::new();
    for (c, u) in &s.units {
        if *c != 2 {
            write(&s.results(), &result(&s.tasks, &s.results(), u, *c, "ok"));
        }
    }
    let m = s.merge().unwrap();
    assert_eq!(m.coverage.missing_chunks, vec![2]);
    assert_eq!((m.coverage.recorded, m.coverage.planned), (3, 4));
}

#[test]
fn host_facts_parse() {
    assert_eq!(
        host::pretty_name("NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
        "Debian GNU/Linux 12 (bookworm)"
    );
    assert_eq!(
        host::mem_total("MemTotal:       16318412 kB\nMemFree: 1 kB\n"),
        16_318_412 * 1024
    );
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(
        host::job_id(
            env(&[
                ("SLURM_ARRAY_JOB_ID", "12"),
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_JOB_ID", "15")
            ]),
            9
        ),
        "slurm:12_3"
    );
    assert_eq!(host::job_id(env(&[("SLURM_JOB_ID", "15")]), 9), "slurm:15");
    assert_eq!(host::job_id(env(&[]), 9), "local:9");
    let h = Host::current();
    assert!(!h.hostname.is_empty() && h.cpus >= 1 && h.mem_bytes > 0);
}

/// submit.sh, run against stand-ins for sbatch and scontrol that log their arguments.
#[test]
fn submit_splits_arrays_at_max_array_size_and_merges_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.path().join("sbatch.log");
    let exe = |name: &str, body: String| {
        use std::os::unix::fs::PermissionsExt;
        let p = bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exe(
        "sbatch",
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nn=$(wc -l < '{}')\necho \"$((100 + n));cluster\"\n",
            log.display(),
            log.display()
        ),
    );
    exe(
        "scontrol",
        "#!/bin/sh\necho 'MaxArraySize            = 4'\n".into(),
    );
    let us = units(&["a", "b", "c", "d", "e"], 2);
    let chunks = layout(&us, Some(1), true, Some(60_000));
    let m = Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: "0".into(),
        db: dir.path().join("study.db"),
        results: dir.path().join("results"),
        k: 2,
        arms: vec!["shim".into()],
        instances_sha256: String::new(),
        predictions_sha256: String::new(),
        options_fingerprint: String::new(),
        conditions: CondSpec::of(&Conditions::new(Duration::from_secs(1), 0)),
        stagger_ms: Some(60_000),
        spread_hosts: false,
        phase: plan::Phase::Runs,
        instances: vec![],
        without_prediction: vec![],
        chunks: chunks
            .iter()
            .enumerate()
            .map(|(i, (c, b))| ChunkRef {
                index: i as u32,
                units: c.len() as u32,
                sha256: String::new(),
                begin_s: *b,
            })
            .collect(),
    };
    let script = dir.path().join("submit.sh");
    std::fs::write(
        &script,
        reprorun_pipeline::cluster::Scripts {
            pipeline: "reproduce",
            tasks: dir.path(),
            results: &m.results,
            db: &m.db,
            reprorun: Path::new("/usr/bin/reprorun"),
        }
        .submit(&m.chunks, "--partition=p --qos=q"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg(&script)
        .arg("--wait")
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    // 10 chunks, 5 per run index; MaxArraySize 4 → indices 0..3: arrays of 3, 2, 3, 2.
    let arrays: Vec<&&str> = calls.iter().filter(|c| c.contains("--array=")).collect();
    assert_eq!(arrays.len(), 4, "{calls:#?}");
    assert!(arrays[0].contains("--array=0-2") && arrays[0].contains("REPRORUN_CHUNK_OFFSET=0"));
    assert!(arrays[1].contains("--array=0-1") && arrays[1].contains("REPRORUN_CHUNK_OFFSET=3"));
    assert!(!arrays[1].contains("--begin"), "run index 0 starts at once");
    assert!(arrays[2].contains("--begin=now+60") && arrays[2].contains("OFFSET=5"));
    for a in &arrays {
        assert!(a.contains("--requeue --signal=B:TERM@120"), "{a}");
        assert!(a.contains("--partition=p --qos=q"), "{a}");
    }
    let merge = calls.last().unwrap();
    assert!(
        merge.contains("--dependency=afterany:101:102:103:104") && merge.contains("--wait"),
        "{merge}"
    );
}
