//! `reprorun reproduce run|report|regrade|export|...`: arguments to options, and what is printed.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::input::Defaults;
pub use super::ledger::LedgerArgs;
use super::runner::Conditions;
use super::store::Store;
pub use super::sweep::Point;
use super::{cluster, export, regrade, report, stats, study, summary, Arm, ReproduceError};
use reprorun_pipeline::cluster_args::PlanOut;
pub use reprorun_pipeline::cluster_args::{MergeArgs, WorkArgs};
use reprorun_pipeline::progress::ProgressMode;
use reprorun_runtime::plan::NetChoice;

#[derive(Debug, Args)]
pub struct ReproduceArgs {
    #[command(subcommand)]
    pub command: ReproduceCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReproduceCommand {
    /// Re-run each predicted patch k times in fresh sandboxes and record every run.
    #[command(
        after_help = "Progress: a bar (rate, ETA) on a terminal; REPRORUN_PROGRESS=lines prints one line per finished run instead, for logs. SIGTERM or SIGINT: no new run starts, the runs in flight are ended, one line says how to resume. Exit status: 0 when every run is recorded (whatever the outcomes); 125 on bad input, a signal, or a failure that stops the study (start it again to resume). Formats: spec/reproduce.md."
    )]
    Run(Box<RunArgs>),
    /// Write report.md, report.html (with SVG charts) and summary.json from a study.
    #[command(
        after_help = "Exit status: 0, or 125 when the study cannot be read or the report written."
    )]
    Report(ReportArgs),
    /// Grade every recorded run again from its stored logs under the current grading
    /// rules, without re-running anything, and update the rows whose grade changed.
    #[command(
        after_help = "Infrastructure failures keep their outcome. Runs of one instance and arm recorded with different environments (commit, patch digests, mirror lock.json digest) are refused unless --allow-mixed. Prints the counts and one line per changed run (--json: one object). Exit status: 0, or 125 when the study cannot be read, a log is missing, environments are mixed, or the study is running."
    )]
    Regrade(RegradeArgs),
    /// Per instance and per listed test, across every recorded run (all arms, hosts and
    /// repeats): how often it passed, failed, errored, was skipped or missing, its class
    /// (stable_pass, stable_fail, flaky, environment) and the causes the runs show.
    #[command(
        after_help = "Prints a headline and one line per flaky or environment-dependent test (--json: one object). --export FILE writes the graders' manifest (reprorun-known-flaky/1). Exit status: 0, or 125 when the study cannot be read. Formats: spec/reproduce.md, Ledger."
    )]
    Ledger(LedgerArgs),
    /// Write one arm's run #N of every instance in SWE-bench's evaluation layout:
    /// logs/run_evaluation/RUN_ID/MODEL/INSTANCE/{test_output.txt,patch.diff,report.json} and
    /// the run summary MODEL.RUN_ID.json.
    #[command(
        after_help = "The run id is the study's (made when it started), suffixed .ARM.N for other than shim #0. An instance whose run did not apply its patch, timed out, could not run, or shows none of its listed tests is in error_ids and gets no report.json, as SWE-bench does. Prints the summaries' paths. Exit status: 0, or 125 when the study cannot be read or the files written. Formats: spec/reproduce.md."
    )]
    Export(ExportArgs),
    /// For a batch cluster (Slurm): write the study's runs as chunk files, a manifest and
    /// sbatch scripts (tasks/submit.sh) instead of running them.
    #[command(
        after_help = "Takes run's inputs and options (--jobs and --json do nothing here). Writes DIR/manifest.json, DIR/chunks/NNNN.json, DIR/submit.sh, DIR/task.sh, DIR/merge.sh. Phase 2 (the leave-one-out pin runs of --compare-shim --pin-runs N) is planned by a second plan with --phase pins once phase 1 is merged, into its own --out and results; the clock sweep by rounds of --phase sweep --clock-sweep LIST (each merged before the next is planned) until one plans nothing. Exit status: 0, or 125 on bad input. Formats: spec/cluster.md."
    )]
    Plan(Box<PlanArgs>),
    /// Make one chunk's runs (an array task's part) and write each result to
    /// DIR/runs/KEY.json; never opens the study database.
    #[command(
        after_help = "Runs with a result already there are skipped. SIGTERM or SIGINT: no new run starts; the one in flight finishes and is written; exit 0. Trees and scratch go to $TMPDIR (node-local). Exit status: 0, or 125 on bad input or a failure that stops the chunk (run it again to resume). Formats: spec/cluster.md."
    )]
    Work(WorkArgs),
    /// Check the workers' results against the plan and record each run once in the
    /// study database (the one writer).
    #[command(
        after_help = "A result that does not belong to the plan (another manifest, an unknown unit, a log whose digest does not match) is refused with one line and nothing is merged. A second result of a recorded run goes to the attempts table. Merging again adds nothing. Exit status: 0, or 125. Formats: spec/cluster.md."
    )]
    Merge(MergeArgs),
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub plan: PlanOut,
    /// One run index per chunk: the k runs of a patch are separate array tasks, so Slurm
    /// can place them on different nodes (merge reports the hosts each patch ran on).
    #[arg(long)]
    pub spread_hosts: bool,
    /// `runs`: phase 1, the k runs of each arm. `pins`: phase 2, the leave-one-out pin runs
    /// and variation runs that the merged phase-1 runs in --db call for (needs every phase-1
    /// run merged; the results default to `results-pins` beside --out). `sweep`: one round
    /// of --clock-sweep LIST (its days not yet merged, then the bisection's next days;
    /// results `results-NAME` beside an --out named NAME): plan, work and merge again, into a
    /// new --out, until it plans nothing.
    #[arg(long, value_enum, default_value = "runs")]
    pub phase: cluster::plan::Phase,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// SWE-bench instances: a JSON array or JSON Lines; or a directory of task directories
    /// in Harbor's layout (TASK/tests/config.json, the test command of TASK/tests/test.sh).
    #[arg(long, value_name = "FILE|DIR")]
    pub instances: PathBuf,
    /// Predictions, JSON Lines (instance_id, model_name_or_path, model_patch); those for
    /// instances not in the study are skipped and counted in one line. `gold`: each
    /// instance's own patch.
    #[arg(long, value_name = "FILE|gold")]
    pub predictions: PathBuf,
    /// The study's SQLite database; created, or resumed when it exists. Logs go to
    /// FILE.logs/, scratch trees to FILE.work/.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// Runs per patch and arm.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub k: u32,
    /// Also run each patch k times without the shim (host-like), pair the outcomes
    /// (McNemar) and find which pin a non-reproducing patch needs.
    #[arg(long)]
    pub compare_shim: bool,
    /// Also run the unpatched repository (test patch only) k times under each arm.
    #[arg(long)]
    pub baseline: bool,
    /// Runs made in parallel.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub jobs: u32,
    /// Start run i of every patch no earlier than i×DURATION after the study began.
    #[arg(long, value_name = "DURATION", value_parser = reprorun_runtime::parse::duration)]
    pub stagger: Option<Duration>,
    /// Print one JSON summary object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The recorded outcomes: a SWE-bench report.json (per instance {"resolved": bool}, or
    /// the run summary with resolved_ids), over the instances' recorded_resolved.
    #[arg(long, value_name = "FILE")]
    pub recorded: Option<PathBuf>,
    /// Where repositories are found (DIR/owner__name, or its bundle DIR/owner__name.bundle)
    /// for instances without repo_path.
    #[arg(long, value_name = "DIR")]
    pub repos: Option<PathBuf>,
    /// The test command for instances without test_cmd (run by /bin/sh -c in /work).
    #[arg(long, value_name = "CMD")]
    pub test_cmd: Option<String>,
    /// SWE-bench's specs as JSON, keyed by repo and version (install, test_cmd, ...): the
    /// test command of instances without test_cmd, from their repo and version.
    #[arg(long, value_name = "FILE")]
    pub specs: Option<PathBuf>,
    /// Only these instances (comma- or space-separated ids; all when not given).
    #[arg(long, value_name = "ID", num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    /// Image store for instances with an `image` (env REPRORUN_STORE; default as for
    /// `reprorun image`).
    #[arg(long, value_name = "DIR", env = "REPRORUN_STORE")]
    pub store: Option<PathBuf>,
    /// When an instance's `image` the store lacks is pulled from its registry (once per
    /// study, before the runs): `missing`, `never` (offline: an error), `always`.
    #[arg(long, value_enum, default_value = "missing", value_name = "POLICY")]
    pub pull: crate::input::images::PullPolicy,
    /// Mirrors and registry locations for pulls: a containers-registries.conf(5) file or
    /// Docker's daemon.json (default: podman's files, then /etc/docker/daemon.json; as
    /// `image pull`).
    #[arg(long, value_name = "FILE")]
    pub registries_conf: Option<PathBuf>,
    /// The engine that builds instances' `dockerfile`: podman or docker (default: podman
    /// when on PATH, else docker).
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub build_engine: Option<reprorun_runtime::image::build::Engine>,
    /// What runs a Dockerfile's RUN steps: `reprorun` (podman's --runtime; Docker uses its
    /// daemon's runtime) or `engine` (the engine's default runtime).
    #[arg(long, value_enum, default_value = "reprorun", value_name = "RUNTIME")]
    pub build_runtime: crate::input::images::BuildRuntime,
    /// With `--instances DIR` of Harbor tasks: `dockerfile` runs each task in the image its
    /// `environment/Dockerfile` builds (context `environment/`) unless its record names an
    /// image, dockerfile or rootfs; `host` runs it on the host's root.
    #[arg(long, value_enum, default_value = "dockerfile", value_name = "WHERE")]
    pub task_environment: crate::input::tasks::TaskEnvironment,
    /// The frozen mirror for instances without a mirror field (shim arm).
    #[arg(long, value_name = "DIR")]
    pub mirror: Option<PathBuf>,
    /// Cassettes by instance: the shim arm of an instance without a `cassette` field is
    /// answered from DIR/<instance_id> when it holds one (`exec --net-replay`: offline).
    #[arg(long, value_name = "DIR")]
    pub net_cassettes: Option<PathBuf>,
    /// The index the no-shim arm installs from, as a mirror directory (the "live" index);
    /// without it, host-like runs use the host's own pip/uv configuration.
    #[arg(long, value_name = "DIR")]
    pub no_shim_mirror: Option<PathBuf>,
    /// The no-shim arm's network: `none` (loopback only), `host`, or `allow:PATTERN,...`
    /// (only the named hosts, through the egress proxy, e.g.
    /// `allow:pypi.org,files.pythonhosted.org`; patterns as for `exec --allow-host`).
    #[arg(long, default_value = "none", value_name = "MODE", value_parser = NetChoice::parse)]
    pub no_shim_net: NetChoice,
    /// Limit for each test command.
    #[arg(long, default_value = "30m", value_name = "DURATION", value_parser = reprorun_runtime::parse::duration)]
    pub timeout: Duration,
    /// Share a Go build cache, warmed once per instance and tree, read-only among the shim
    /// arm's runs (faster; other arms build cold; a cache can hide a build that does not
    /// reproduce and changes the go tool's work: spec/reproduce.md).
    #[arg(long)]
    pub go_cache: bool,
    /// Memory limit (cgroup) for each run; an OOM kill is an infrastructure failure.
    #[arg(long, value_name = "BYTES", value_parser = |v: &str| reprorun_runtime::security::size("--memory", v))]
    pub memory: Option<u64>,
    /// The shim's seed (hash seeds, entropy streams).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed: u64,
    /// Runs per left-out pin for patches that reproduce only with the shim (default k; 0
    /// turns this off).
    #[arg(long, value_name = "N")]
    pub pin_runs: Option<u32>,
    /// Also run the shim arm with its clock on each of these days (comma-separated:
    /// created_at, now, +Ny, +Nd or YYYY-MM-DD), and bisect to the day where a test that
    /// passes at the benchmark's date starts to fail (a time bomb; `reproduce ledger`).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = |v: &str| super::sweep::parse_point(v))]
    pub clock_sweep: Vec<Point>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The study's database.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// Directory for report.md, report.html and summary.json.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print the JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
    /// Summarize the first N runs per arm; default: the k of the study's last `run`.
    #[arg(long, value_name = "N")]
    pub k: Option<u32>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The directory to write SWE-bench's layout into (created).
    #[arg(long, value_name = "DIR")]
    pub swebench: PathBuf,
    /// The study's database.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// The arm whose runs are exported (shim, no_shim, baseline_shim, ...).
    #[arg(long, default_value = "shim", value_name = "ARM", value_parser = parse_arm)]
    pub arm: Arm,
    /// Which of the arm's k runs (0-based).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub idx: u32,
}

fn parse_arm(s: &str) -> Result<Arm, String> {
    Arm::parse(s).ok_or_else(|| {
        format!(
            "unknown arm {s:?} (shim, no_shim, baseline_shim, baseline_no_shim, shim_without_PIN)"
        )
    })
}

#[derive(Debug, Args)]
pub struct RegradeArgs {
    /// The study's database.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// Print one JSON object (counts and the changed runs) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Regrade even when runs of one instance and arm were made in different environments
    /// (another commit, patch or mirror lock.json); without it such a study is refused.
    #[arg(long)]
    pub allow_mixed: bool,
    /// Grade without the tests a graders' manifest (`reproduce ledger --export`,
    /// reprorun-known-flaky/1) says not to trust; regrading without it grades them again.
    #[arg(long, value_name = "FILE")]
    pub exclude: Option<PathBuf>,
}

/// Runs the subcommand; returns the exit status.
pub fn run(args: ReproduceArgs) -> Result<(), ReproduceError> {
    match args.command {
        ReproduceCommand::Run(a) => run_study(*a),
        ReproduceCommand::Report(a) => run_report(a),
        ReproduceCommand::Regrade(a) => run_regrade(a),
        ReproduceCommand::Ledger(a) => super::ledger::run(&a),
        ReproduceCommand::Export(a) => run_export(a),
        ReproduceCommand::Plan(a) => run_plan(*a),
        ReproduceCommand::Work(a) => run_work(a),
        ReproduceCommand::Merge(a) => run_merge(a),
    }
}

fn run_plan(a: PlanArgs) -> Result<(), ReproduceError> {
    let results = a.plan.results.clone().unwrap_or_else(|| {
        let parent = a.plan.out.parent().unwrap_or(std::path::Path::new("."));
        parent.join(match a.phase {
            cluster::plan::Phase::Runs => "results",
            cluster::plan::Phase::Pins => "results-pins",
            // Each round of the sweep is a plan of its own: its results beside it, by name.
            cluster::plan::Phase::Sweep => {
                let name = a.plan.out.file_name().unwrap_or_default().to_string_lossy();
                return parent.join(format!("results-{name}"));
            }
        })
    });
    if !a.run.clock_sweep.is_empty() && a.phase != cluster::plan::Phase::Sweep {
        return Err(ReproduceError::Usage(
            "--clock-sweep is planned as its own phase: merge phase 1, then `reprorun reproduce plan --phase sweep --clock-sweep LIST` with the same inputs and --db, work and merge, and plan again until it plans nothing (each round bisects further)".into(),
        ));
    }
    let phase = a.phase;
    let reprorun = std::env::current_exe().map_err(ReproduceError::Print)?;
    let p = cluster::plan::PlanOptions {
        study: study_options(a.run),
        out: a.plan.out,
        results,
        chunk: a.plan.chunk,
        sbatch_args: a.plan.sbatch_args,
        spread_hosts: a.spread_hosts,
        reprorun,
        phase: a.phase,
    };
    let Some(m) = cluster::plan::plan(&p)? else {
        return write_out(if phase == cluster::plan::Phase::Sweep {
            "0 runs: every day of the sweep is recorded and every time bomb's first failing day is known to the day; nothing to submit\n"
        } else {
            "0 runs: no patch reproduces with the shim and not without it; nothing to submit\n"
        });
    };
    let units: u32 = m.chunks.iter().map(|c| c.units).sum();
    let text = format!(
        "{units} runs in {} chunks; submit with {}\n",
        m.chunks.len(),
        std::path::absolute(&p.out)
            .unwrap_or(p.out.clone())
            .join("submit.sh")
            .display()
    );
    write_out(&text)
}

fn run_work(a: WorkArgs) -> Result<(), ReproduceError> {
    let jobs = a.jobs();
    let done = cluster::work::work(&cluster::work::WorkOptions {
        tasks: a.tasks,
        chunk: a.chunk,
        results: a.results,
        jobs,
    })?;
    eprintln!(
        "reprorun: reproduce work: {} run(s) made, {} already done{}",
        done.ran,
        done.skipped,
        if done.stopped {
            "; stopped by a signal before the rest"
        } else {
            ""
        }
    );
    Ok(())
}

fn run_merge(a: MergeArgs) -> Result<(), ReproduceError> {
    let m = cluster::merge::merge(&cluster::merge::MergeOptions {
        tasks: a.tasks.clone(),
        results: a.results.clone(),
        db: a.db.clone(),
    })?;
    let json = a.json.then(|| serde_json::to_string(&m)).transpose();
    let json = json.map_err(|e| ReproduceError::Print(e.into()))?;
    let counts = [m.inserted, m.attempts, m.already];
    let (out, err) = a.output("reproduce merge", "run", counts, &m.coverage, json);
    if let Some(line) = err {
        eprintln!("{line}");
    }
    write_out(&out)
}

/// The summary with each instance's distinct hosts, where the study was merged from a
/// cluster, and its per-test part (the ledger).
fn with_hosts(store: &Store, mut s: summary::Summary) -> Result<summary::Summary, ReproduceError> {
    let hosts = cluster::merge::distinct_hosts(store)?;
    for i in &mut s.instances {
        i.distinct_hosts = hosts.get(&i.instance_id).copied();
    }
    super::ledger::with_ledger(store, s)
}

fn write_out(text: &str) -> Result<(), ReproduceError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(ReproduceError::Print)
}

fn study_options(a: RunArgs) -> study::Options {
    let mut conditions = Conditions::new(a.timeout, a.seed);
    conditions.memory = a.memory;
    conditions.no_shim_mirror = a.no_shim_mirror.clone();
    conditions.no_shim_net = a.no_shim_net;
    conditions.store = a.store.clone();
    conditions.go_cache = a.go_cache;
    study::Options {
        instances: a.instances,
        predictions: a.predictions,
        db: a.db,
        k: a.k,
        compare_shim: a.compare_shim,
        baseline: a.baseline,
        jobs: a.jobs,
        stagger: a.stagger,
        pin_runs: a.pin_runs.unwrap_or(a.k),
        clock_sweep: a.clock_sweep,
        defaults: Defaults {
            repos: a.repos,
            test_cmd: a.test_cmd,
            recorded: a.recorded,
            mirror: a.mirror,
            net_cassettes: a.net_cassettes,
            store: a.store,
            specs: a.specs,
            instance_ids: a.instance_ids,
            pull: a.pull,
            registries_conf: a.registries_conf,
            build_engine: a.build_engine,
            build_runtime: a.build_runtime,
            task_environment: a.task_environment,
        },
        conditions,
        progress: ProgressMode::for_stderr(),
    }
}

fn run_study(a: RunArgs) -> Result<(), ReproduceError> {
    let (db, k, json) = (a.db.clone(), a.k, a.json);
    let opts = study_options(a);
    let (skipped, unknown) = study::run(&opts)?;
    if unknown > 0 {
        eprintln!(
            "reprorun: reproduce: {unknown} prediction(s) for instances not in the study were skipped"
        );
    }
    if !skipped.is_empty() {
        eprintln!(
            "reprorun: reproduce: {} instance(s) without a prediction were not run: {}",
            skipped.len(),
            skipped.join(", ")
        );
    }
    let store = Store::open(&db, false)?;
    let summary = with_hosts(&store, summary::summarize(&store.instance_runs()?, k))?;
    print(&summary, json)
}

fn run_report(a: ReportArgs) -> Result<(), ReproduceError> {
    let store = Store::open(&a.db, false)?;
    let runs = store.instance_runs()?;
    // The k of the study's last `run`, unless asked otherwise.
    let k = match a.k {
        Some(k) => k,
        None => store.meta("k")?.and_then(|k| k.parse().ok()).unwrap_or(1),
    };
    let summary = with_hosts(&store, summary::summarize(&runs, k))?;
    let links = swebench_logs(&store, &a)?;
    let files = report::write_report(&summary, &a.out, &links)?;
    if a.json {
        print(&summary, true)
    } else {
        for f in files {
            println!("{}", f.display());
        }
        Ok(())
    }
}

/// The shim's run #0 of each instance in SWE-bench's layout under the report's directory,
/// and each instance's link to its logs there; none for a study that predates the inputs
/// the export needs.
fn swebench_logs(store: &Store, a: &ReportArgs) -> Result<report::Links, ReproduceError> {
    let e = match export::swebench::resolve(store, &a.db, Arm::Shim, 0) {
        Ok(e) => e,
        Err(export::swebench::ExportError::NoInputs(_)) => return Ok(report::Links::new()),
        Err(e) => return Err(e.into()),
    };
    export::swebench::write(&e, &a.out)?;
    Ok(e.instances
        .iter()
        .filter(|i| i.class != export::swebench::Class::EmptyPatch)
        .map(|i| {
            let dir = e.instance_dir(&i.model, &i.instance_id);
            (i.instance_id.clone(), format!("{}/", dir.display()))
        })
        .collect())
}

fn run_export(a: ExportArgs) -> Result<(), ReproduceError> {
    let store = Store::open(&a.db, false)?;
    let e = export::swebench::resolve(&store, &a.db, a.arm, a.idx)?;
    if !e.not_run.is_empty() {
        eprintln!(
            "reprorun: reproduce export: {} instance(s) have no {} run #{} yet; they are counted in error_ids, as SWE-bench counts an instance without a report",
            e.not_run.len(),
            a.arm.name(),
            a.idx
        );
    }
    let files = export::swebench::write(&e, &a.swebench)?;
    let text: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
    write_out(&text)
}

fn run_regrade(a: RegradeArgs) -> Result<(), ReproduceError> {
    let done = regrade::regrade(&a.db, a.allow_mixed, a.exclude.as_deref())?;
    let text = if a.json {
        let line = serde_json::to_string(&done).map_err(|e| ReproduceError::Print(e.into()))?;
        format!("{line}\n")
    } else {
        done.text()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(ReproduceError::Print)
}

/// The summary as one JSON object, or as a short table.
fn print(summary: &summary::Summary, json: bool) -> Result<(), ReproduceError> {
    let mut out = std::io::stdout().lock();
    let text = if json {
        let line = serde_json::to_string(summary).map_err(|e| ReproduceError::Print(e.into()))?;
        format!("{line}\n")
    } else {
        table(summary)
    };
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(ReproduceError::Print)
}

fn table(s: &summary::Summary) -> String {
    let mut t = String::from("arm          reproducible  flaky  broken  error  resolved\n");
    for (arm, counts) in [("shim", Some(&s.shim)), ("no_shim", s.no_shim.as_ref())] {
        if let Some(c) = counts {
            let resolved = s
                .resolved
                .get(arm)
                .map_or("-".into(), |r| format!("{}/{} runs", r.resolved, r.runs));
            t.push_str(&format!(
                "{arm:<12} {:>12}  {:>5}  {:>6}  {:>5}  {resolved}\n",
                c.reproducible, c.flaky, c.broken, c.error
            ));
        }
    }
    if let Some(p) = s.mcnemar_p {
        t.push_str(&format!("McNemar exact p = {p:.4}\n"));
    }
    if let Some(o) = s.overhead_median {
        let n = &s.overhead_runs;
        t.push_str(&format!(
            "median shim overhead = {:+.1}% (over {} instances: {} shim and {} no-shim runs that ran the tests)\n",
            o * 100.0,
            s.overhead_instances,
            n.shim,
            n.no_shim
        ));
    }
    if let Some(h) = s.half_life_days {
        t.push_str(&format!("dependency-drift half-life = {h:.0} days\n"));
    }
    let name = |c: Option<stats::Class>| c.map_or("-", stats::Class::name);
    for i in &s.instances {
        t.push_str(&format!("  {}: shim {}", i.instance_id, name(i.class_shim)));
        if i.class_no_shim.is_some() {
            t.push_str(&format!(", no shim {}", name(i.class_no_shim)));
        }
        t.push('\n');
    }
    t
}
