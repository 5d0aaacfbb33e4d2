use super::*;
use crate::run::store::{RunRow, Store};
use reprorun_pipeline::cluster::LogDir;
use reprorun_pipeline::host::Host;

fn parse(args: &[&str]) -> RunArgs {
    from_argv(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

#[test]
fn the_run_options_survive_the_manifest() {
    let a = parse(&[
        "--corpus",
        "/c",
        "--db",
        "/s/audit.db",
        "--agent-cmd",
        "echo 'x y'",
        "--repeats",
        "3",
        "--timeout",
        "90s",
        "--memory",
        "1g",
        "--allow-host",
        "api.example.com:443",
        "--add-host",
        "api.example.com:127.0.0.1",
        "--pass-env",
        "KEY",
        "--key-in-sandbox",
        "--upstream-ca",
        "/ca.pem",
        "--model",
        "m",
        "--no-paper",
        "--jobs",
        "4",
    ]);
    let b = from_argv(&to_argv(&a)).unwrap();
    assert_eq!(to_argv(&a), to_argv(&b));
    assert_eq!(b.agent_cmd.as_deref(), Some("echo 'x y'"));
    assert_eq!((b.repeats, b.memory), (3, Some(1 << 30)));
    assert_eq!(b.timeout, std::time::Duration::from_secs(90));
    assert_eq!(b.add_host, a.add_host);
    assert_eq!(b.allow_host.len(), 1);
    assert!(b.no_paper && !b.no_order_instruction);
    assert!(b.keys.key_in_sandbox);
    assert_eq!(
        b.keys.upstream_ca.as_deref(),
        Some(std::path::Path::new("/ca.pem"))
    );
    // --jobs does not shape a run: not carried.
    assert_eq!(b.jobs, 1);
}

#[test]
fn a_manifest_with_bad_run_args_is_one_line() {
    let e = from_argv(&["--corpus".into()]).unwrap_err();
    assert!(!e.contains('\n') && !e.is_empty(), "{e}");
}

#[test]
fn keys_are_file_names_that_tell_groups_apart() {
    let a = key("p1@0000", 0);
    assert_eq!(a, key("p1@0000", 0));
    assert_ne!(a, key("p1@0000", 1));
    assert_ne!(key("a/b", 0), key("a_b", 0));
    assert!(!key("../x/y", 2).contains('/'));
}

/// A plan of two groups × 2 repeats, one unit per chunk, written by hand into `dir`.
fn tasks(dir: &Path) -> (Tasks, BTreeMap<String, (u32, Unit)>) {
    let units: Vec<Unit> = (0..2)
        .flat_map(|r| {
            ["g0", "g1"].map(|g| Unit {
                key: key(g, r),
                group_id: g.into(),
                repeat: r,
            })
        })
        .collect();
    let (files, chunks) = cluster::chunk_texts(
        dir,
        cluster::layout(&units, Some(1), false, None)
            .into_iter()
            .enumerate()
            .map(|(i, (units, b))| {
                let n = units.len() as u32;
                let c = Chunk {
                    format: CHUNK_FORMAT.into(),
                    index: i as u32,
                    units,
                };
                (c, n, b)
            }),
    );
    let m = Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: "0".into(),
        db: dir.join("a.db"),
        results: dir.join("results"),
        corpus: dir.join("corpus"),
        agent: "cmd".into(),
        repeats: 2,
        options_fingerprint: "fp".into(),
        run_args: vec![],
        spread_hosts: false,
        chunks,
    };
    let text = serde_json::to_string_pretty(&m).unwrap();
    cluster::write_plan(dir, &files, &text).unwrap().unwrap();
    let t = Tasks::open(dir).unwrap();
    let u = t.units().unwrap();
    (t, u)
}

fn row(group: &str, repeat: u32, logs: &LogDir) -> RunRow {
    RunRow {
        group_id: group.into(),
        repeat,
        status: "ok".into(),
        reason: None,
        exit_code: 0,
        wall_ms: 5,
        started_at: 1_700_000_000,
        n_findings: Some(0),
        findings_sha256: Some(logs.put(b"{\"findings\": []}").unwrap()),
        raw_sha256: None,
        stdout_sha256: logs.put(b"out").unwrap(),
        stderr_sha256: logs.put(b"").unwrap(),
        input_tokens: 1,
        cached_input_tokens: 0,
        output_tokens: 2,
        cost_usd: None,
        cost_source: "none".into(),
        network_sha256: None,
    }
}

fn shard(t: &Tasks, units: &BTreeMap<String, (u32, Unit)>, r: RunRow) -> Shard {
    let k = key(&r.group_id, r.repeat);
    Shard {
        format: SHARD_FORMAT.into(),
        manifest_sha256: t.digest.clone(),
        chunk: units[&k].0,
        key: k,
        body: merging::Body { row: r },
        host: Host::current(),
        finished_at: 1_700_000_001,
    }
}

#[test]
fn results_that_are_not_of_the_plan_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (t, units) = tasks(dir.path());
    let results = dir.path().join("results");
    let logs = LogDir(results.join("logs"));
    let good = shard(&t, &units, row("g1", 1, &logs));
    let name = format!("{}.json", good.key);
    let text = |s: &Shard| serde_json::to_string(s).unwrap();
    assert!(check(&t, &units, &results, &name, &text(&good)).is_ok());
    let attempt = format!("{}.slurm_7_1.99.json", good.key);
    assert!(check(&t, &units, &results, &attempt, &text(&good)).is_ok());

    let refused = |s: &Shard, name: &str, needle: &str| {
        let e = check(&t, &units, &results, name, &text(s)).unwrap_err();
        assert!(e.contains(needle), "{e}");
    };
    let mut s = good.clone();
    s.manifest_sha256 = "0".repeat(64);
    refused(&s, &name, "another plan");
    let mut s = good.clone();
    s.body.row.repeat = 0;
    refused(&s, &name, "is not unit");
    let mut s = good.clone();
    s.chunk += 1;
    refused(&s, &name, "in chunk");
    refused(&good, "other.json", "file name");
    let mut s = good.clone();
    s.key = key("g9", 0);
    refused(&s, &name, "unknown unit");
    let mut s = good.clone();
    s.body.row.stdout_sha256 = reprorun_pipeline::store::sha256_hex(b"never written");
    refused(&s, &name, "log");
    std::fs::write(
        results.join("logs").join(&good.body.row.stdout_sha256),
        b"changed",
    )
    .unwrap();
    refused(&good, &name, "does not match its digest");
    assert!(check(&t, &units, &results, &name, "{").is_err());
}

#[test]
fn merge_records_each_run_once_and_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (t, units) = tasks(dir.path());
    let results = dir.path().join("results");
    let logs = LogDir(results.join("logs"));
    let db = dir.path().join("a.db");
    let write = |s: &Shard| {
        let text = serde_json::to_string(s).unwrap();
        cluster::write_result(&results, &s.key, text.as_bytes(), &s.host.job).unwrap()
    };
    write(&shard(&t, &units, row("g0", 0, &logs)));
    let m = merge(dir.path(), &results, &db).unwrap();
    assert_eq!(
        (m.inserted, m.coverage.recorded, m.coverage.planned),
        (1, 1, 4)
    );
    assert_eq!(m.coverage.missing_chunks, vec![1, 2, 3]);
    let store = Store::open(&db, false).unwrap();
    assert_eq!(store.db.meta("agent").unwrap().as_deref(), Some("cmd"));
    assert_eq!(store.rows().unwrap().len(), 1);
    // Its findings went into the study's log store.
    let sha = store.rows().unwrap()[0].findings_sha256.clone().unwrap();
    assert_eq!(store.db.log(&sha).unwrap(), b"{\"findings\": []}");
    drop(store);

    // A requeued run of the same unit: an attempt; merging again adds nothing.
    let mut again = row("g0", 0, &logs);
    again.started_at += 60;
    write(&shard(&t, &units, again));
    let m = merge(dir.path(), &results, &db).unwrap();
    assert_eq!((m.inserted, m.attempts, m.already), (0, 1, 1));
    let m = merge(dir.path(), &results, &db).unwrap();
    assert_eq!((m.inserted, m.attempts, m.already), (0, 0, 2));
    assert_eq!(Store::open(&db, false).unwrap().rows().unwrap().len(), 1);

    // A database of another configuration is refused.
    let other = dir.path().join("b.db");
    Store::open(&other, true)
        .unwrap()
        .db
        .check_options("another")
        .unwrap();
    assert!(merge(dir.path(), &results, &other).is_err());
}

#[test]
fn a_chunk_changed_after_plan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (t, _) = tasks(dir.path());
    let file = dir.path().join(cluster::chunk_file(0));
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("\"g0\"", "\"g1\"")).unwrap();
    let e = t.chunk(&file).unwrap_err().to_string();
    assert!(e.contains("differs from the one planned"), "{e}");
}
