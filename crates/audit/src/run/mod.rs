//! `reprorun audit run`: every snapshot group of a corpus, `--repeats` times, each in a
//! fresh sandbox ([`request`]) with the chosen agent ([`agent`]); every run recorded once in
//! the study database ([`store`]) with its findings, logs, tokens and cost ([`usage`]). A
//! study killed at any point and started again with the same command finishes the runs
//! still missing.

pub(crate) mod agent;
pub(crate) mod cluster;
pub(crate) mod request;
pub(crate) mod store;
#[cfg(test)]
mod tests;
pub mod usage;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use thiserror::Error;

pub use agent::AgentKind;
use agent::{AgentConfig, Invocation};
use request::Sandbox;
use store::{RunRow, Status, Store};

use crate::corpus::{Corpus, Group};
use reprorun_pipeline::cluster::LogSink;
use reprorun_pipeline::pool::Pool;
use reprorun_pipeline::progress::{Progress, ProgressMode};
use reprorun_pipeline::store::StoreError;
use reprorun_pipeline::unit::{Scratch, UnitOutcome};
use reprorun_runtime::plan::{HostFacts, NetMode};

#[derive(Debug, Error)]
pub enum RunError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(#[from] reprorun_pipeline::store::LockError),
    #[error("worker: {0}")]
    Worker(#[from] reprorun_pipeline::pool::PoolError),
    #[error(transparent)]
    Prices(#[from] usage::PricesError),
    #[error(transparent)]
    Corpus(#[from] crate::corpus::CorpusError),
    #[error(transparent)]
    File(#[from] reprorun_pipeline::cluster::FileError),
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error(transparent)]
    Tasks(#[from] reprorun_pipeline::tasks::TasksError),
    #[error(transparent)]
    Merge(#[from] reprorun_pipeline::driver::MergeError),
    #[error(transparent)]
    Key(#[from] crate::keys::KeyError),
    #[error("--image: {0}")]
    Image(#[from] reprorun_runtime::image::ImageError),
    #[error("group {group}: {step}: {cause}; fix it and run the same command again to resume")]
    Setup {
        group: String,
        step: &'static str,
        cause: SetupCause,
    },
}

/// What failed in a step that sets a run up: the step's own error, kept typed.
#[derive(Debug, Error)]
pub enum SetupCause {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Unit(#[from] reprorun_pipeline::unit::UnitError),
    #[error(transparent)]
    Plan(#[from] reprorun_runtime::plan::PlanError),
    #[error(transparent)]
    Host(#[from] reprorun_pipeline::unit::HostFailure),
    /// Laying out `/work` (the snapshot, the paper, the prompt).
    #[error("{0}")]
    Layout(String),
}

/// `reprorun audit run` options.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Inside each sandbox: /work/repo (the snapshot, read-only), /work/paper.<ext>, /work/PROMPT.md, /out (the only writable directory besides /tmp). Exit status: 0 when every run is recorded (whatever the agents did); 125 on bad input or a failure that stops the study (run the same command again to resume). Formats: spec/audit.md."
)]
pub struct RunArgs {
    /// The corpus `reprorun audit snapshot` wrote.
    #[arg(long, value_name = "DIR")]
    pub corpus: PathBuf,
    /// The agent: `builtin` (no model), `codex`, `claude-code`, or `cmd` (with --agent-cmd).
    #[arg(long, value_enum, default_value = "builtin")]
    pub agent: AgentKind,
    /// Any other agent: a shell command run in the sandbox, with REPRORUN_AUDIT_PROMPT,
    /// REPRORUN_AUDIT_REPO, REPRORUN_AUDIT_PAPER and REPRORUN_AUDIT_OUT (where it writes
    /// findings.json; a usage.json beside it is read for tokens). Implies --agent cmd.
    #[arg(long, value_name = "CMD")]
    pub agent_cmd: Option<String>,
    /// The study database (created; the same command resumes it).
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// Runs per snapshot group.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeats: u32,
    /// Runs made at a time.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub jobs: u32,
    /// Limit of each run.
    #[arg(long, default_value = "30m", value_name = "DURATION", value_parser = reprorun_runtime::parse::duration)]
    pub timeout: Duration,
    /// Memory limit (cgroup) of each run.
    #[arg(long, value_name = "BYTES", value_parser = |v: &str| reprorun_runtime::security::size("--memory", v))]
    pub memory: Option<u64>,
    /// Limit on processes and threads of each run.
    #[arg(long, value_name = "N", value_parser = reprorun_runtime::security::pids)]
    pub pids: Option<u64>,
    /// Let the agent reach this host (its model API) through the egress proxy; nothing
    /// else is reachable. Repeatable; without it, no network (`spec/network.md`).
    #[arg(long, value_name = "PATTERN[:PORT]", value_parser = |v: &str| reprorun_runtime::net::Rule::parse(v))]
    pub allow_host: Vec<reprorun_runtime::net::Rule>,
    /// The egress proxy resolves NAME to ADDRESS. Repeatable.
    #[arg(long, value_name = "NAME:ADDRESS", value_parser = |v: &str| reprorun_runtime::net::allow::parse_add_host(v))]
    pub add_host: Vec<(String, std::net::IpAddr)>,
    /// Pass the caller's variable NAME to the agent (by name only, never recorded; the
    /// model key of codex and claude-code is not passed but injected: --key-in-sandbox).
    /// Repeatable.
    #[arg(long, value_name = "NAME")]
    pub pass_env: Vec<String>,
    #[command(flatten)]
    pub keys: crate::keys::KeyArgs,
    /// The agent's installation, bound read-only at /opt/agent with /opt/agent/bin first on
    /// PATH (default: what the host's /usr holds).
    #[arg(long, value_name = "DIR", conflicts_with = "image")]
    pub agent_root: Option<PathBuf>,
    /// Run the agents on this imported image's root instead of the host's /usr and /etc.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Image store for --image (env REPRORUN_STORE).
    #[arg(long, value_name = "DIR", env = "REPRORUN_STORE")]
    pub store: Option<PathBuf>,
    /// The model the agent uses (Codex `-m`, Claude Code `--model`; the --prices key).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The model API's base URL (Codex: a Responses-API provider; Claude Code:
    /// ANTHROPIC_BASE_URL).
    #[arg(long, value_name = "URL")]
    pub model_base_url: Option<String>,
    /// Claude Code's --max-turns.
    #[arg(long, default_value_t = 40, value_name = "N")]
    pub max_turns: u32,
    /// USD per million tokens, for agents that report tokens but no cost:
    /// {"MODEL": {"input": USD, "cached_input": USD, "output": USD}}.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Ablation: the agent gets no paper.
    #[arg(long)]
    pub no_paper: bool,
    /// Ablation: the prompt does not ask for findings ordered by how likely a reproducer
    /// would report them.
    #[arg(long)]
    pub no_order_instruction: bool,
    /// Print the study's summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The most findings an agent is asked for.
const MAX_FINDINGS: usize = 20;

/// Everything a worker needs, resolved once by the coordinator.
struct Study {
    corpus: Corpus,
    db: PathBuf,
    agent: AgentConfig,
    sandbox: Sandbox,
    prices: usage::Prices,
}

/// One run to make.
#[derive(Debug, Clone, Copy)]
struct Job {
    group: usize,
    repeat: u32,
}

/// Runs `reprorun audit run`.
pub(crate) fn command(args: RunArgs) -> Result<(), super::AuditError> {
    let corpus = Corpus::open(&args.corpus)?;
    let study = resolve(args.corpus.as_path(), &args, corpus)?;
    let lock = reprorun_pipeline::store::lock(&study.db).map_err(RunError::from)?;
    {
        let store = Store::open(&study.db, true).map_err(RunError::from)?;
        store
            .db
            .check_options(&fingerprint(&study, &args))
            .map_err(RunError::from)?;
        // Where the corpus is, for the judge, the metrics and the report.
        let corpus_dir = std::path::absolute(&args.corpus).unwrap_or_else(|_| args.corpus.clone());
        store
            .db
            .set_meta("corpus", &corpus_dir.to_string_lossy())
            .map_err(RunError::from)?;
        store
            .db
            .set_meta("agent", &study.agent.label())
            .map_err(RunError::from)?;
        let _ = std::fs::remove_dir_all(store.db.work_dir().join("runs"));
        if let Some(root) = &study.sandbox.root {
            request::prepare_root(root).map_err(|e| RunError::Setup {
                group: "-".into(),
                step: "agent root",
                cause: e.into(),
            })?;
        }
    }
    let mut pending = Vec::new();
    {
        let store = Store::open(&study.db, false).map_err(RunError::from)?;
        for repeat in 0..args.repeats {
            for (group, g) in study.corpus.manifest.groups.iter().enumerate() {
                if !store.has_run(&g.group_id, repeat).map_err(RunError::from)? {
                    pending.push(Job { group, repeat });
                }
            }
        }
    }
    let mut progress = Progress::new(ProgressMode::for_stderr(), "runs");
    let mut pool = Pool {
        workers: args.jobs.max(1) as usize,
        close_in_worker: vec![lock.as_raw_fd()],
        progress: &mut progress,
    };
    let groups = &study.corpus.manifest.groups;
    pool.run(
        pending,
        |_| 0,
        |j| format!("{} #{}", groups[j.group].group_id, j.repeat),
        |j| worker(&study, &groups[j.group], j.repeat),
    )
    .map_err(RunError::from)?;
    progress.finish();
    drop(lock);
    let rows = Store::open(&study.db, false)
        .and_then(|s| s.rows())
        .map_err(RunError::from)?;
    print_summary(&rows, args.json)
}

/// Checks the options and resolves what every run shares.
fn resolve(corpus_dir: &Path, args: &RunArgs, corpus: Corpus) -> Result<Study, RunError> {
    let usage = |m: String| RunError::Usage(m);
    if args.repeats == 0 {
        return Err(usage("--repeats must be at least 1".into()));
    }
    let kind = match (&args.agent_cmd, args.agent) {
        (Some(_), AgentKind::Builtin | AgentKind::Cmd) => AgentKind::Cmd,
        (Some(_), other) => {
            return Err(usage(format!(
                "--agent-cmd runs a command of yours; it cannot be combined with --agent {}",
                clap::ValueEnum::to_possible_value(&other)
                    .map_or(String::new(), |v| v.get_name().to_string())
            )))
        }
        (None, AgentKind::Cmd) => return Err(usage("--agent cmd needs --agent-cmd 'CMD'".into())),
        (None, k) => k,
    };
    for (what, path) in [("--corpus", corpus_dir), ("--db", args.db.as_path())] {
        if args.image.is_none() {
            if let Some(dir) = request::exposed(path) {
                return Err(usage(format!(
                    "{what} {}: lies under /{dir}, which agents see; put it elsewhere (agents must not reach the hidden issues)",
                    path.display()
                )));
            }
        }
    }
    let mut pass_env = Vec::new();
    for name in &args.pass_env {
        match std::env::var(name) {
            Ok(v) => pass_env.push((name.clone(), v)),
            Err(_) => {
                return Err(usage(format!(
                    "--pass-env {name}: not set in reprorun's environment"
                )))
            }
        }
    }
    let provider = match kind {
        AgentKind::Codex => Some(crate::keys::Provider::OpenAi),
        AgentKind::ClaudeCode => Some(crate::keys::Provider::Anthropic),
        AgentKind::Builtin | AgentKind::Cmd => None,
    };
    let (net, key) = crate::keys::network(
        &args.allow_host,
        &args.add_host,
        provider,
        &args.keys,
        args.model_base_url.as_deref(),
        &pass_env,
    )?;
    let image = match &args.image {
        Some(r) => Some(reprorun_runtime::image::lookup(args.store.clone(), r)?),
        None => None,
    };
    let self_bin =
        std::env::current_exe().map_err(|e| usage(format!("find reprorun's own binary: {e}")))?;
    let db = std::path::absolute(&args.db).unwrap_or_else(|_| args.db.clone());
    let root = image
        .is_none()
        .then(|| reprorun_pipeline::store::sibling(&db, "work").join("agent-root"));
    let prices = match &args.prices {
        Some(p) => usage::Prices::read(p)?,
        None => usage::Prices::default(),
    };
    Ok(Study {
        corpus,
        db,
        agent: AgentConfig {
            kind,
            cmd: args.agent_cmd.clone(),
            model: args.model.clone(),
            base_url: args.model_base_url.clone(),
            max_turns: args.max_turns,
            no_paper: args.no_paper,
            no_order_instruction: args.no_order_instruction,
            max_findings: MAX_FINDINGS,
        },
        sandbox: Sandbox {
            root,
            image,
            agent_root: args.agent_root.clone(),
            self_bin,
            net,
            pass_env,
            key,
            timeout: args.timeout,
            memory: args.memory,
            pids: args.pids,
        },
        prices,
    })
}

/// What the runs of a study depend on: the corpus and the agent's configuration (never the
/// values of --pass-env).
fn fingerprint(study: &Study, args: &RunArgs) -> String {
    let mut f = serde_json::json!({
        "corpus": study.corpus.fingerprint(),
        "agent": study.agent,
        "net": study.sandbox.net.to_string(),
        "add_host": args.add_host,
        "agent_root": args.agent_root,
        "image": study.sandbox.image.as_ref().map(|i| i.digest.clone()),
        "timeout_ms": args.timeout.as_millis() as u64,
        "memory": args.memory,
    });
    if let Some(k) = &study.sandbox.key {
        // Where the key goes (never its value); absent as before without one.
        f["key"] = k.spec().into();
    }
    f.to_string()
}

/// One run, recorded.
fn worker(study: &Study, group: &Group, repeat: u32) -> Result<(), RunError> {
    let store = Store::open(&study.db, false)?;
    let row = run_one(
        study,
        &store.db,
        &store.db.work_dir().join("runs"),
        group,
        repeat,
    )?;
    store.insert(&row)?;
    Ok(())
}

/// Lays out the run's /work: the snapshot extracted at `repo`, the paper, the prompt.
/// Returns the paper's path inside, if any.
fn lay_out(
    study: &Study,
    group: &Group,
    work: &Path,
    inv_prompt: impl Fn(Option<&str>) -> Invocation,
) -> Result<(Invocation, Option<String>), String> {
    let repo = work.join("repo");
    std::fs::create_dir_all(&repo).map_err(|e| format!("{}: {e}", repo.display()))?;
    let tar = study.corpus.tree_path(group);
    let file = std::fs::File::open(&tar).map_err(|e| format!("{}: {e}", tar.display()))?;
    let mut archive = tar::Archive::new(file);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(true);
    archive.set_unpack_xattrs(false);
    archive
        .unpack(&repo)
        .map_err(|e| format!("extract {}: {e}", tar.display()))?;
    let pair = study
        .corpus
        .manifest
        .pairs
        .iter()
        .find(|p| p.paper_id == group.paper_id)
        .ok_or_else(|| format!("no pair {} in the corpus", group.paper_id))?;
    let paper = if study.agent.no_paper {
        None
    } else {
        let name = format!("paper.{}", pair.paper_kind);
        let src = study.corpus.paper_path(pair);
        std::fs::copy(&src, work.join(&name)).map_err(|e| format!("{}: {e}", src.display()))?;
        Some(format!("/work/{name}"))
    };
    let inv = inv_prompt(paper.as_deref());
    std::fs::write(work.join("PROMPT.md"), &inv.prompt).map_err(|e| format!("PROMPT.md: {e}"))?;
    Ok((inv, paper))
}

/// Makes one run in a scratch directory under `scratch` and returns its row, its logs put
/// into `logs` (the study's database, or a cluster worker's results directory). What the
/// agent did wrong is a row; only a failure of the host is an error.
fn run_one(
    study: &Study,
    logs: &impl LogSink,
    scratch: &Path,
    group: &Group,
    repeat: u32,
) -> Result<RunRow, RunError> {
    let setup = |step: &'static str| {
        move |cause: SetupCause| RunError::Setup {
            group: group.group_id.clone(),
            step,
            cause,
        }
    };
    let started_at = reprorun_pipeline::unix_now_ms() / 1000;
    let dir = scratch.join(format!(
        "{}-{repeat}-{}",
        reprorun_pipeline::unit::file_name_part(&group.group_id),
        std::process::id()
    ));
    let mut scratch = Scratch::create(dir.clone()).map_err(|e| setup("scratch")(e.into()))?;
    let work = dir.join("work");
    let (inv, _paper) = lay_out(study, group, &work, |paper| {
        agent::invocation(&study.agent, paper)
    })
    .map_err(|e| setup("lay out /work")(SetupCause::Layout(e)))?;
    let codex_home = match &inv.codex_config {
        Some(config) => {
            let home = dir.join("codex-home");
            std::fs::create_dir_all(&home)
                .and_then(|()| std::fs::write(home.join("config.toml"), config))
                .map_err(|e| setup("codex home")(e.into()))?;
            Some(home)
        }
        None => None,
    };
    let req = request::request(
        &study.sandbox,
        &inv,
        &work,
        &scratch.out_dir(),
        codex_home.as_deref(),
    )?;
    let host = HostFacts::current().map_err(|e| setup("host facts")(e.into()))?;
    let clock = Instant::now();
    let result = scratch
        .run(&req, &host)
        .map_err(|e| setup("plan")(e.into()))?;
    let wall_ms = clock.elapsed().as_millis() as u64;
    let (out, err) = (scratch.stdout(), scratch.stderr());
    let mut row = RunRow {
        group_id: group.group_id.clone(),
        repeat,
        status: String::new(),
        reason: None,
        exit_code: reprorun_runtime::exit::RUNTIME_ERROR,
        wall_ms,
        started_at,
        n_findings: None,
        findings_sha256: None,
        raw_sha256: None,
        stdout_sha256: logs.put_log(&out)?,
        stderr_sha256: logs.put_log(&err)?,
        input_tokens: 0,
        cached_input_tokens: 0,
        output_tokens: 0,
        cost_usd: None,
        cost_source: "none".into(),
        network_sha256: None,
    };
    let outcome = match result {
        UnitOutcome::Ran(o) => o,
        UnitOutcome::CommandMissing(e) => {
            row.status = Status::AgentMissing.name().into();
            row.exit_code = e.exit_code();
            row.reason = Some(e.to_string());
            return Ok(row);
        }
        UnitOutcome::HostFailure(e) => return Err(setup("sandbox")(e.into())),
    };
    row.exit_code = outcome.exit_code;
    if study.sandbox.net.mode == NetMode::Allow {
        let record = serde_json::json!({
            "network": outcome.network.records,
            "network_dropped": outcome.network.dropped,
        });
        row.network_sha256 = Some(logs.put_log(record.to_string().as_bytes())?);
    }
    let answer = agent::answer(study.agent.kind, &scratch.out_dir(), &out);
    let (cost, source) = study
        .prices
        .cost(study.agent.model.as_deref(), &answer.usage);
    row.input_tokens = answer.usage.input;
    row.cached_input_tokens = answer.usage.cached_input;
    row.output_tokens = answer.usage.output;
    row.cost_usd = cost;
    row.cost_source = source.into();
    let (status, reason) = judge_output(logs, &mut row, &answer)?;
    row.status = if outcome.timed_out {
        Status::Timeout
    } else if outcome.oom_killed {
        Status::Oom
    } else {
        status
    }
    .name()
    .into();
    row.reason = reason;
    Ok(row)
}

/// Validates the agent's findings document into the row: `ok` with the findings stored,
/// or why there are none.
fn judge_output(
    logs: &impl LogSink,
    row: &mut RunRow,
    answer: &agent::Answer,
) -> Result<(Status, Option<String>), RunError> {
    let Some(doc) = answer.document.as_deref().filter(|d| !d.is_empty()) else {
        let why = answer
            .missing
            .clone()
            .unwrap_or_else(|| "no findings.json was written".into());
        return Ok((Status::NoOutput, Some(why)));
    };
    row.raw_sha256 = Some(logs.put_log(doc)?);
    match crate::findings::validate(doc) {
        Ok(findings) => {
            row.n_findings = Some(findings.findings.len() as u64);
            row.findings_sha256 = Some(logs.put_log(findings.to_json().as_bytes())?);
            // What was dropped while reading stays with the run, the run stays valid.
            Ok((Status::Ok, findings.problems_line(2000)))
        }
        Err(e) => Ok((Status::InvalidOutput, Some(e.to_string()))),
    }
}

/// The study's counts on stderr (or as JSON on stdout).
fn print_summary(rows: &[RunRow], json: bool) -> Result<(), super::AuditError> {
    let mut by_status = std::collections::BTreeMap::<String, u64>::new();
    for r in rows {
        *by_status.entry(r.status.clone()).or_default() += 1;
    }
    let sum = |f: fn(&RunRow) -> u64| rows.iter().map(f).sum::<u64>();
    let cost: Option<f64> = rows.iter().map(|r| r.cost_usd).sum();
    let summary = serde_json::json!({
        "runs": rows.len(),
        "by_status": by_status,
        "findings": sum(|r| r.n_findings.unwrap_or(0)),
        "input_tokens": sum(|r| r.input_tokens),
        "cached_input_tokens": sum(|r| r.cached_input_tokens),
        "output_tokens": sum(|r| r.output_tokens),
        "cost_usd": cost,
        "rows": rows,
    });
    use std::io::Write;
    if json {
        writeln!(std::io::stdout(), "{summary:#}").map_err(super::AuditError::Print)?;
    } else {
        let counts: Vec<String> = by_status.iter().map(|(k, v)| format!("{k} {v}")).collect();
        eprintln!("reprorun: {} runs: {}", rows.len(), counts.join(", "));
    }
    Ok(())
}
