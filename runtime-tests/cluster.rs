//! `reprorun reproduce plan|work|merge`: a study made chunk by chunk as a cluster's array
//! tasks would make it (a loop here, no scheduler), merged, and compared with `run`.

use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// `reproduce work` with `extra` options and, when given, `SLURM_CPUS_PER_TASK`.
fn work_with(f: &Fixture, chunk: &Path, extra: &[&str], cpus_per_task: Option<&str>) -> String {
    let chunk = chunk.to_string_lossy();
    let mut args = vec![
        "reproduce",
        "work",
        "--tasks",
        "tasks",
        "--chunk",
        &chunk,
        "--results",
        "results",
    ];
    args.extend_from_slice(extra);
    let mut cmd = f.work.cmd(&args);
    if let Some(n) = cpus_per_task {
        cmd.env("SLURM_CPUS_PER_TASK", n);
    }
    let out = cmd.output().unwrap();
    expect_code(&out, 0);
    stderr(&out)
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

    // Chunk 0 with --jobs 2, chunk 1 as a Slurm task of 2 CPUs, the last one unit at a time.
    let all = chunks(&f);
    let said = work_with(&f, &all[0], &["--jobs", "2"], None);
    assert!(said.contains("3 run(s) made"), "{said}");
    let said = work_with(&f, &all[1], &[], Some("2"));
    assert!(said.contains("3 run(s) made"), "{said}");
    work(&f, &all[2]);
    let bad = f.work.run(&[
        "reproduce",
        "work",
        "--tasks",
        "tasks",
        "--chunk",
        &all[0].to_string_lossy(),
        "--results",
        "results",
        "--jobs",
        "0",
    ]);
    assert!(!bad.status.success());
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
    // The report shows the hosts of a merged study, and no such column for a local one.
    let report =
        |db: &str| std::fs::read_to_string(f.path(&format!("{db}.report/report.md"))).unwrap();
    assert!(
        report("cluster.db").contains("| Hosts |"),
        "{}",
        report("cluster.db")
    );
    summary(&f, "study.db");
    assert!(!report("study.db").contains("| Hosts |"));

    // Each result says where it ran.
    let r = read_json(&results(&f)[0]);
    assert!(
        r["host"]["job"].as_str().unwrap().starts_with("local:"),
        "{r}"
    );
    assert_eq!(r["host"]["machine_id"].as_str().unwrap().len(), 16);
}

/// `reproduce <verb> --tasks T --results R` (and `--chunk`/`--db`), the exit status checked.
fn verb(f: &Fixture, verb: &str, args: &[&str], code: i32) -> std::process::Output {
    let mut v = vec!["reproduce", verb];
    v.extend(args);
    let out = f.work.run(&v);
    expect_code(&out, code);
    out
}

#[test]
fn the_pins_phase_plans_after_the_merge_and_records_what_run_records() {
    let f = fixture();
    let study = [
        "--instances",
        "instances.jsonl",
        "--predictions",
        "predictions.jsonl",
        "--db",
        "cluster.db",
        "--k",
        "2",
        "--compare-shim",
        "--pin-runs",
        "1",
    ];
    let plan_args = |out: &'static str, phase: &'static str| {
        let mut v = study.to_vec();
        v.extend(["--out", out, "--phase", phase]);
        v
    };
    verb(&f, "plan", &plan_args("tasks", "runs"), 0);
    // Phase 2 is decided from phase 1: refused while a phase-1 run is missing.
    let early = verb(&f, "plan", &plan_args("tasks-pins", "pins"), 125);
    assert!(
        stderr(&early).contains("does not exist"),
        "{}",
        stderr(&early)
    );
    let first = chunks(&f)[0].clone();
    work(&f, &first);
    expect_code(&merge(&f, "cluster.db", &[]), 0);
    let partial = verb(&f, "plan", &plan_args("tasks-pins", "pins"), 125);
    assert!(
        stderr(&partial).contains("phase-1 runs are not in"),
        "{}",
        stderr(&partial)
    );
    for c in chunks(&f) {
        work(&f, &c);
    }
    expect_code(&merge(&f, "cluster.db", &[]), 0);

    let said = stdout(&verb(&f, "plan", &plan_args("tasks-pins", "pins"), 0));
    let planned: u32 = said.split(' ').next().unwrap().parse().unwrap();
    assert!(planned > 0, "{said}");
    let manifest = read_json(&f.path("tasks-pins/manifest.json"));
    assert_eq!(manifest["phase"], "pins");
    assert!(f.path("tasks-pins/submit.sh").exists());
    let mut pin_chunks: Vec<PathBuf> = std::fs::read_dir(f.path("tasks-pins/chunks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pin_chunks.sort();
    for c in &pin_chunks {
        let units = read_json(c)["units"].as_array().unwrap().clone();
        for u in units {
            assert_eq!(
                u["instance_id"], "dated",
                "only the patch the shim fixes: {u}"
            );
            // Leave-one-out runs, and the variation runs of its disagreeing test.
            let arm = u["arm"].as_str().unwrap();
            assert!(
                arm.starts_with("shim_without_") || arm.starts_with("shim_vary_"),
                "{u}"
            );
        }
        let c = c.to_string_lossy();
        let args = [
            "--tasks",
            "tasks-pins",
            "--chunk",
            &c,
            "--results",
            "results-pins",
        ];
        verb(&f, "work", &args, 0);
    }
    let pins_merge = [
        "--tasks",
        "tasks-pins",
        "--results",
        "results-pins",
        "--db",
        "cluster.db",
    ];
    let text = stdout(&verb(&f, "merge", &pins_merge, 0));
    assert!(
        text.contains(&format!("merged {planned} new run(s)")),
        "{text}"
    );
    // Phase 1's results are not phase 2's: merging them under the pins plan is refused.
    let mixed = [
        "--tasks",
        "tasks-pins",
        "--results",
        "results",
        "--db",
        "cluster.db",
    ];
    verb(&f, "merge", &mixed, 125);

    // A cluster task makes one run at a time, as `run --jobs 1` does (the CPU pin too).
    let local = f.study(&[
        "--k",
        "2",
        "--compare-shim",
        "--pin-runs",
        "1",
        "--jobs",
        "1",
    ]);
    let merged = summary(&f, "cluster.db");
    let dated = |s: &serde_json::Value| {
        s["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance_id"] == "dated")
            .cloned()
            .unwrap()
    };
    let (m, l) = (dated(&merged), dated(&local));
    assert!(!l["pins"].as_array().unwrap().is_empty(), "{l}");
    for k in ["class_shim", "class_no_shim", "pins", "runs"] {
        assert_eq!(m[k], l[k], "{k}: merged {m} local {l}");
    }
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

/// One test cluster at a time in this process: they share the ports derived from its pid
/// and the node's name.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A one-node Slurm (slurmctld, slurmd, munged) in a temporary directory, stopped on drop.
pub(crate) struct Slurm {
    dir: tempfile::TempDir,
    /// Held while the cluster lives (declared last: dropped after the daemons stop).
    _one: std::sync::MutexGuard<'static, ()>,
}

/// `timeout 20 PROG ARGS` with the test cluster's configuration.
fn slurm_cmd(conf: &Path, prog: &str, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new("timeout");
    c.arg("20").arg(prog).args(args).env("SLURM_CONF", conf);
    c
}

impl Slurm {
    /// Starts it, or says why it cannot be started here.
    pub(crate) fn start() -> Result<Slurm, String> {
        use std::os::unix::fs::PermissionsExt;
        let tools = [
            "slurmctld",
            "slurmd",
            "sbatch",
            "sinfo",
            "munged",
            "munge",
            "runuser",
        ];
        let mut needs = vec![Need::Root];
        needs.extend(tools.map(Need::Tool));
        if let Some(why) = crate::common::skip::unmet(&needs) {
            return Err(why);
        }
        let one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let t = dir.path().to_path_buf();
        let t = t.as_path();
        std::fs::set_permissions(t, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let munge = t.join("munge");
        for d in ["munge", "ctld", "d"] {
            std::fs::create_dir(t.join(d)).map_err(|e| e.to_string())?;
        }
        let sh = |cmd: String| {
            std::process::Command::new("sh")
                .args(["-c", &cmd])
                .output()
                .map_err(|e| e.to_string())
                .and_then(|o| {
                    if o.status.success() {
                        Ok(stdout(&o))
                    } else {
                        Err(format!("{cmd}: {}{}", stdout(&o), stderr(&o)))
                    }
                })
        };
        let s = Slurm { dir, _one: one };
        // munged refuses to run as root: as the munge user, its socket in our directory.
        sh(format!(
            "chown munge: {m} && timeout 20 runuser -u munge -- munged -S {m}/munge.sock --pid-file={m}/munged.pid --log-file={m}/munged.log --seed-file={m}/munged.seed",
            m = munge.display()
        ))?;
        sh(format!(
            "timeout 20 sh -c 'munge -S {m}/munge.sock -n | unmunge -S {m}/munge.sock'",
            m = munge.display()
        ))?;
        let port = 20000 + (std::process::id() % 20000) as u16 * 2;
        let host = sh("hostname".into())?;
        let cpus = sh("nproc".into())?;
        let conf = format!(
            "ClusterName=t\nSlurmctldHost=localhost\nSlurmctldPort={port}\nSlurmdPort={}\nAuthType=auth/munge\nAuthInfo=socket={m}/munge.sock\nSlurmUser=root\nSlurmdUser=root\nStateSaveLocation={t}/ctld\nSlurmdSpoolDir={t}/d\nSlurmctldPidFile={t}/ctld.pid\nSlurmdPidFile={t}/d.pid\nSlurmctldLogFile={t}/ctld.log\nSlurmdLogFile={t}/d.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\nMpiDefault=none\nReturnToService=2\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\nNodeName=localhost NodeHostname={} CPUs={} State=UNKNOWN\nPartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            port + 1,
            host.trim(),
            cpus.trim(),
            m = munge.display(),
            t = t.display(),
        );
        std::fs::write(s.conf(), conf).map_err(|e| e.to_string())?;
        let c = s.conf().display().to_string();
        sh(format!("timeout 20 slurmctld -f {c}"))?;
        sh(format!("timeout 20 slurmd -f {c} -N localhost"))?;
        let idle = wait_until(Duration::from_secs(20), || {
            slurm_cmd(&s.conf(), "sinfo", &["-h", "-o", "%t"])
                .output()
                .is_ok_and(|o| stdout(&o).trim() == "idle")
        });
        if !idle {
            return Err(format!(
                "the node did not come up: {}",
                std::fs::read_to_string(t.join("d.log")).unwrap_or_default()
            ));
        }
        Ok(s)
    }

    pub(crate) fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let mut pids = Vec::new();
        for pid in ["d.pid", "ctld.pid", "munge/munged.pid"] {
            if let Ok(p) = std::fs::read_to_string(self.dir.path().join(pid)) {
                let _ = std::process::Command::new("kill").arg(p.trim()).status();
                pids.push(p.trim().to_string());
            }
        }
        // The next test cluster reuses the ports: wait until these daemons are gone.
        wait_until(Duration::from_secs(15), || {
            pids.iter()
                .all(|p| !Path::new(&format!("/proc/{p}")).exists())
        });
    }
}

#[test]
fn a_one_node_slurm_runs_the_plan_and_merges_it() {
    slurm_runs_and_merges(&[], "--partition=debug");
}

/// A plan of one chunk: its one task merges; no merge job is submitted.
#[test]
fn a_one_chunk_plan_is_merged_by_its_task_on_slurm() {
    let sbatch = "--partition=debug --cpus-per-task=2";
    let Some(f) = slurm_runs_and_merges(&["--chunk", "8"], sbatch) else {
        return;
    };
    let outs: Vec<String> = std::fs::read_dir(f.path("results/slurm"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(outs.len(), 1, "one task's output, no merge job's: {outs:?}");
    assert!(!outs[0].starts_with("merge-"), "{outs:?}");
}

/// `plan` (with `extra` and `--sbatch-args SBATCH`), `submit.sh --wait` on a one-node
/// Slurm, and the merged study checked; `None` when skipped.
fn slurm_runs_and_merges(extra: &[&str], sbatch: &str) -> Option<Fixture> {
    let slurm = match Slurm::start() {
        Ok(s) => s,
        Err(why) => skip!("Slurm cannot be started here: {why}"),
    };
    let f = fixture();
    let mut args = vec!["--sbatch-args", sbatch];
    args.extend(extra);
    plan(&f, "cluster.db", &args);
    let out = std::process::Command::new("timeout")
        .args(["120", "tasks/submit.sh", "--wait"])
        .current_dir(f.work.path())
        .env("SLURM_CONF", slurm.conf())
        .env("REPRORUN_SBATCH_TIMEOUT", "100")
        .env_remove("REPRORUN_ISOLATION")
        .output()
        .unwrap();
    let logs = || {
        std::fs::read_dir(f.path("results/slurm"))
            .map(|d| {
                d.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    assert!(
        out.status.success(),
        "submit.sh --wait: {}{}\n{}",
        stdout(&out),
        stderr(&out),
        logs()
    );
    let merged = logs();
    assert!(
        merged.contains("merged 8 new run(s), 0 attempt(s)"),
        "{merged}"
    );
    for r in results(&f) {
        let job = read_json(&r)["host"]["job"].as_str().unwrap().to_string();
        assert!(job.starts_with("slurm:") && job.contains('_'), "{job}");
    }
    let s = summary(&f, "cluster.db");
    assert_eq!(s["shim"]["reproducible"], 2, "{s}");
    assert_eq!(s["no_shim"]["broken"], 1, "{s}");
    Some(f)
}

#[test]
fn work_stops_starting_runs_on_sigterm_and_resumes() {
    let f = fixture();
    plan(&f, "cluster.db", &["--chunk", "8"]);
    let child = f
        .work
        .cmd(&[
            "reproduce",
            "work",
            "--tasks",
            "tasks",
            "--chunk",
            "tasks/chunks/0000.json",
            "--results",
            "results",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let runs = f.path("results/runs");
    let started = wait_until(Duration::from_secs(60), || {
        std::fs::read_dir(&runs).is_ok_and(|mut d| d.next().is_some())
    });
    assert!(started, "no result written");
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stopped by a signal before the rest"),
        "{}",
        stderr(&out)
    );
    let made = results(&f).len();
    assert!((1..8).contains(&made), "{made} of 8 made after SIGTERM");
    // The same chunk again makes the rest, and only the rest.
    let said = work(&f, &f.path("tasks/chunks/0000.json"));
    assert!(
        said.contains(&format!("{} run(s) made, {made} already done", 8 - made)),
        "{said}"
    );
    assert_eq!(results(&f).len(), 8);
}
