//! `reprorun audit judge`: every recorded run's ranked findings against the hidden issues of
//! its snapshot. Each run gets a [`task`] (`task.json`, stored as a log); a judge answers
//! with a [`result`] (`result.json`) labelling every (hidden issue, finding) pair; a valid
//! answer is recorded with its pair labels ([`crate::judgment`]), an invalid one is
//! asked again once and then recorded as `invalid_output`. Model judges ([`agent`]) run in
//! a sandbox of their own whose only input is the task; the built-in [`lexical`] judge is
//! a pure function run in-process. `sample` and `agreement` ([`validation`]) measure a
//! judge against hand labels.

pub(crate) mod agent;
pub(crate) mod anchors;
pub(crate) mod cluster;
pub(crate) mod lexical;
pub(crate) mod result;
#[cfg(test)]
mod rules_tests;
mod sandboxed;
pub(crate) mod task;
#[cfg(test)]
mod tests;
pub(crate) mod validation;

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use agent::JudgeConfig;
pub use agent::JudgeKind;
use task::{Hidden, Task};

use crate::corpus::Corpus;
use crate::judgment::{Judgment, Label, PairLabel};
use crate::run::request::{self, Sandbox};
use crate::run::store::{RunRow, Store};
use crate::run::usage::Usage;
use reprorun_pipeline::cluster::LogSink;
use reprorun_pipeline::pool::Pool;
use reprorun_pipeline::progress::{Progress, ProgressMode};
use reprorun_pipeline::store::StoreError;
use sandboxed::{sandboxed, Place};

#[derive(Debug, Error)]
pub enum JudgeError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(#[from] reprorun_pipeline::store::LockError),
    #[error(transparent)]
    Corpus(#[from] crate::corpus::CorpusError),
    #[error("worker: {0}")]
    Worker(#[from] reprorun_pipeline::pool::PoolError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] reprorun_pipeline::cluster::FileError),
    #[error(transparent)]
    Tasks(#[from] reprorun_pipeline::tasks::TasksError),
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error(transparent)]
    Key(#[from] crate::keys::KeyError),
    #[error(transparent)]
    Merge(#[from] reprorun_pipeline::driver::MergeError),
    #[error(
        "run {group} #{repeat}: {step}: {cause}; fix it and run the same command again to resume"
    )]
    Setup {
        group: String,
        repeat: u32,
        step: &'static str,
        cause: String,
    },
}

/// The built-in judge's version: its labels change meaning when its rules do.
const LEXICAL_VERSION: u32 = 1;

/// `reprorun audit judge` options.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Inside each judge's sandbox: /work/task.json and /work/PROMPT.md (read-only), /out (writable; the judge writes /out/result.json). No repository, no corpus, no network but --allow-host. Exit status: 0 when every run is judged (whatever the judges answered); 125 on bad input. Formats: spec/audit.md."
)]
pub struct JudgeArgs {
    /// The study `reprorun audit run` made (its corpus is read from it).
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// The judge: `builtin` (lexical, no model), `codex`, `claude-code`, or `cmd` (with
    /// --judge-cmd).
    #[arg(long, value_enum, default_value = "builtin")]
    pub judge: JudgeKind,
    /// Any other judge: a shell command run in the sandbox, with REPRORUN_JUDGE_TASK,
    /// REPRORUN_JUDGE_PROMPT and REPRORUN_JUDGE_OUT (where it writes result.json; a
    /// usage.json beside it is read for tokens). Implies --judge cmd.
    #[arg(long, value_name = "CMD")]
    pub judge_cmd: Option<String>,
    /// Judgings made at a time (model judges).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub jobs: u32,
    /// Limit of each judging.
    #[arg(long, default_value = "10m", value_name = "DURATION", value_parser = reprorun_runtime::parse::duration)]
    pub timeout: Duration,
    /// Let the judge reach this host (its model API); nothing else is reachable.
    /// Repeatable; without it, no network.
    #[arg(long, value_name = "PATTERN[:PORT]", value_parser = |v: &str| reprorun_runtime::net::Rule::parse(v))]
    pub allow_host: Vec<reprorun_runtime::net::Rule>,
    /// The egress proxy resolves NAME to ADDRESS. Repeatable.
    #[arg(long, value_name = "NAME:ADDRESS", value_parser = |v: &str| reprorun_runtime::net::allow::parse_add_host(v))]
    pub add_host: Vec<(String, std::net::IpAddr)>,
    /// Pass the caller's variable NAME to the judge (by name only, never recorded; the
    /// model key of codex and claude-code is not passed but injected: --key-in-sandbox).
    /// Repeatable.
    #[arg(long, value_name = "NAME")]
    pub pass_env: Vec<String>,
    #[command(flatten)]
    pub keys: crate::keys::KeyArgs,
    /// The model the judge uses (Codex `-m`, Claude Code `--model`).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The model API's base URL (Codex: a Responses-API provider; Claude Code:
    /// ANTHROPIC_BASE_URL).
    #[arg(long, value_name = "URL")]
    pub model_base_url: Option<String>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Replace this judge's configuration in the study: forget its judgments, pair labels
    /// and options, then judge every run again with these options.
    #[arg(long)]
    pub replace: bool,
}

/// What every judging of a study shares.
struct Study {
    db: PathBuf,
    corpus: Corpus,
    hidden: Vec<Hidden>,
    cfg: JudgeConfig,
    /// `None` for the built-in judge (in-process).
    sandbox: Option<Sandbox>,
}

impl Study {
    fn name(&self) -> &'static str {
        self.cfg.kind.name()
    }
}

/// Runs `reprorun audit judge`.
pub(crate) fn command(args: JudgeArgs) -> Result<(), super::AuditError> {
    let study = resolve(&args)?;
    let lock = reprorun_pipeline::store::lock(&study.db).map_err(JudgeError::from)?;
    let pending: Vec<RunRow> = {
        let store = Store::open(&study.db, false).map_err(JudgeError::from)?;
        if args.replace {
            let n = store.forget_judge(study.name()).map_err(JudgeError::from)?;
            eprintln!(
                "reprorun: audit judge: --replace: forgot the {} judge's options and {n} judgment(s)",
                study.name()
            );
        }
        check_fingerprint(&store, &study)?;
        let retry = store
            .unsettled_judgments(study.name())
            .map_err(JudgeError::from)?;
        if retry > 0 {
            eprintln!(
                "reprorun: audit judge: judging {retry} run(s) again whose judging failed before"
            );
        }
        let _ = std::fs::remove_dir_all(store.db.work_dir().join("judge"));
        if let Some(root) = study.sandbox.as_ref().and_then(|s| s.root.as_ref()) {
            request::prepare_root(root).map_err(|e| JudgeError::Io {
                path: root.clone(),
                source: e,
            })?;
        }
        let mut pending = Vec::new();
        for r in store.rows().map_err(JudgeError::from)? {
            if !store
                .has_judgment(&r.group_id, r.repeat, study.name())
                .map_err(JudgeError::from)?
            {
                pending.push(r);
            }
        }
        pending
    };
    let mut progress = Progress::new(ProgressMode::for_stderr(), "judgments");
    if study.sandbox.is_none() {
        progress.add(pending.len());
        let store = Store::open(&study.db, false).map_err(JudgeError::from)?;
        for row in &pending {
            record(&study, &store, row)?;
            progress.done(&format!("{} #{}", row.group_id, row.repeat));
        }
    } else {
        let mut pool = Pool {
            workers: args.jobs.max(1) as usize,
            close_in_worker: vec![lock.as_raw_fd()],
            progress: &mut progress,
        };
        pool.run(
            pending,
            |_| 0,
            |r| format!("{} #{}", r.group_id, r.repeat),
            |r| {
                Store::open(&study.db, false)
                    .map_err(JudgeError::from)
                    .and_then(|store| record(&study, &store, r))
            },
        )
        .map_err(JudgeError::from)?;
    }
    progress.finish();
    drop(lock);
    let store = Store::open(&study.db, false).map_err(JudgeError::from)?;
    print_summary(&store, study.name(), args.json)
}

/// The judge `args` name and the values of its `--pass-env` variables.
fn kind_and_env(args: &JudgeArgs) -> Result<(JudgeKind, Vec<(String, String)>), JudgeError> {
    let usage = |m: String| JudgeError::Usage(m);
    let kind = match (&args.judge_cmd, args.judge) {
        (Some(_), JudgeKind::Builtin | JudgeKind::Cmd) => JudgeKind::Cmd,
        (Some(_), other) => {
            return Err(usage(format!(
                "--judge-cmd runs a command of yours; it cannot be combined with --judge {}",
                other.name()
            )))
        }
        (None, JudgeKind::Cmd) => return Err(usage("--judge cmd needs --judge-cmd 'CMD'".into())),
        (None, k) => k,
    };
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
    Ok((kind, pass_env))
}

/// Checks the options and reads the study's corpus.
fn resolve(args: &JudgeArgs) -> Result<Study, JudgeError> {
    let usage = |m: String| JudgeError::Usage(m);
    let (kind, pass_env) = kind_and_env(args)?;
    let db = std::path::absolute(&args.db).unwrap_or_else(|_| args.db.clone());
    let store = Store::open(&db, false)?;
    let corpus_dir = store.db.meta("corpus")?.ok_or_else(|| {
        usage(format!(
            "--db {}: the study records no corpus (run `reprorun audit run` on it first)",
            db.display()
        ))
    })?;
    resolve_in(args, db, &corpus_dir, pass_env, kind)
}

/// [`resolve`] with the study's corpus directory known (a cluster worker reads it from the
/// plan, never from the database).
fn resolve_in(
    args: &JudgeArgs,
    db: PathBuf,
    corpus_dir: &str,
    pass_env: Vec<(String, String)>,
    kind: JudgeKind,
) -> Result<Study, JudgeError> {
    let usage = |m: String| JudgeError::Usage(m);
    let corpus = Corpus::open(std::path::Path::new(corpus_dir))?;
    let hidden = task::hidden_issues(&corpus.manifest)
        .map_err(|why| usage(format!("corpus {corpus_dir}: {why}")))?;
    let sandbox = if kind == JudgeKind::Builtin {
        None
    } else {
        let provider = match kind {
            JudgeKind::Codex => Some(crate::keys::Provider::OpenAi),
            JudgeKind::ClaudeCode => Some(crate::keys::Provider::Anthropic),
            JudgeKind::Builtin | JudgeKind::Cmd => None,
        };
        let (net, key) = crate::keys::network(
            &args.allow_host,
            &args.add_host,
            provider,
            &args.keys,
            args.model_base_url.as_deref(),
            &pass_env,
        )?;
        let self_bin = std::env::current_exe()
            .map_err(|e| usage(format!("find reprorun's own binary: {e}")))?;
        Some(Sandbox {
            root: Some(reprorun_pipeline::store::sibling(&db, "work").join("judge-root")),
            image: None,
            agent_root: None,
            self_bin,
            net,
            pass_env,
            key,
            timeout: args.timeout,
            memory: None,
            pids: None,
        })
    };
    Ok(Study {
        db,
        corpus,
        hidden,
        cfg: JudgeConfig {
            kind,
            cmd: args.judge_cmd.clone(),
            model: args.model.clone(),
            base_url: args.model_base_url.clone(),
        },
        sandbox,
    })
}

/// What a judge's labels depend on: its configuration and the corpus.
fn fingerprint(study: &Study) -> String {
    serde_json::json!({
        "judge": study.cfg,
        "lexical": (study.cfg.kind == JudgeKind::Builtin).then_some(LEXICAL_VERSION),
        "corpus": study.corpus.fingerprint(),
    })
    .to_string()
}

/// A judge's labels in a study are of one configuration: the first judging records it, a
/// later one with another is refused.
fn check_fingerprint(store: &Store, study: &Study) -> Result<(), JudgeError> {
    let fp = fingerprint(study);
    let key = format!("judge:{}", study.name());
    let recorded = store.db.meta_or_set(&key, &fp)?;
    if recorded != fp {
        return Err(JudgeError::Usage(format!(
            "--db {}: the {} judge judged this study with other options ({recorded}); this run asks {fp}: pass the same --judge-cmd, --model and --model-base-url, or --replace to judge the study again with these",
            study.db.display(),
            study.name()
        )));
    }
    Ok(())
}

/// Judges one run and records it (once).
fn record(study: &Study, store: &Store, row: &RunRow) -> Result<(), JudgeError> {
    let scratch = store.db.work_dir().join("judge");
    let (judgment, labels) = judge_run(study, &store.db, &scratch, row)?;
    store.insert_judgment(&judgment, &labels)?;
    Ok(())
}

/// One attempt's outcome.
struct Attempt {
    status: &'static str,
    reason: Option<String>,
    result_sha256: Option<String>,
    stdout_sha256: Option<String>,
    stderr_sha256: Option<String>,
    usage: Usage,
    pairs: Option<result::Pairs>,
}

impl Attempt {
    fn failed(status: &'static str, reason: String) -> Attempt {
        Attempt {
            status,
            reason: Some(reason),
            result_sha256: None,
            stdout_sha256: None,
            stderr_sha256: None,
            usage: Usage::default(),
            pairs: None,
        }
    }
}

/// Validates a judge's document against the task: `ok` with its pairs, or why not.
fn check_answer(
    logs: &impl LogSink,
    doc: Option<&[u8]>,
    missing: Option<String>,
    task: &Task,
) -> Result<Attempt, JudgeError> {
    let Some(doc) = doc.filter(|d| !d.is_empty()) else {
        let why = missing.unwrap_or_else(|| "no result.json was written".into());
        return Ok(Attempt::failed("no_output", why));
    };
    let sha = logs.put_log(doc)?;
    let mut a = match result::validate_from(doc, task) {
        Ok((pairs, from)) => Attempt {
            pairs: Some(pairs),
            reason: from.note(),
            ..Attempt::failed("ok", String::new())
        },
        Err(e) => Attempt::failed("invalid_output", e.to_string()),
    };
    a.result_sha256 = Some(sha);
    Ok(a)
}

/// Judges run `row`: its judgment and pair labels, the logs read from and put into `logs`
/// (the study's database, or a cluster worker's results directory), a model judge's
/// scratch under `scratch`. What the judge did wrong is a judgment; only a failure of the
/// host is an error.
fn judge_run(
    study: &Study,
    logs: &impl LogSink,
    scratch: &std::path::Path,
    row: &RunRow,
) -> Result<(Judgment, Vec<PairLabel>), JudgeError> {
    let setup = |step: &'static str| {
        move |cause: String| JudgeError::Setup {
            group: row.group_id.clone(),
            repeat: row.repeat,
            step,
            cause,
        }
    };
    let group = study
        .corpus
        .manifest
        .groups
        .iter()
        .find(|g| g.group_id == row.group_id)
        .ok_or_else(|| setup("corpus")("the group is not in the study's corpus".into()))?;
    let findings = match (row.status.as_str(), &row.findings_sha256) {
        ("ok", Some(sha)) => {
            let bytes = logs
                .log(sha)
                .ok_or_else(|| setup("findings")(format!("log {sha} is missing")))?;
            Some(crate::findings::validate(&bytes).map_err(|e| setup("findings")(e.to_string()))?)
        }
        _ => None,
    };
    let task = task::build(
        &study.corpus.manifest,
        &study.hidden,
        group,
        row.repeat,
        findings.as_ref(),
    );
    let task_json = task.to_json();
    let mut j = Judgment {
        group_id: row.group_id.clone(),
        repeat: row.repeat,
        judge: study.name().into(),
        status: "skipped".into(),
        reason: Some(format!(
            "the run has no valid findings (status {})",
            row.status
        )),
        attempts: 0,
        task_sha256: logs.put_log(&task_json)?,
        result_sha256: None,
        stdout_sha256: None,
        stderr_sha256: None,
        input_tokens: 0,
        cached_input_tokens: 0,
        output_tokens: 0,
        cost_usd: None,
    };
    if findings.is_none() {
        return Ok((j, Vec::new()));
    }
    let mut last = None;
    for attempt in 1..=2u32 {
        // Nothing to ask a model about without findings or hidden issues: every issue
        // is unmatched, which the built-in judge says as well.
        let trivial = task.findings.is_empty() || task.hidden_issues.is_empty();
        let a = match &study.sandbox {
            Some(sb) if !trivial => {
                let at = Place { logs, scratch };
                sandboxed(study, sb, &at, row, attempt, &task, &task_json)?
            }
            _ => {
                let doc = lexical::judge(&task).to_json();
                check_answer(logs, Some(&doc), None, &task)?
            }
        };
        j.attempts = attempt;
        j.input_tokens += a.usage.input;
        j.cached_input_tokens += a.usage.cached_input;
        j.output_tokens += a.usage.output;
        if let Some(c) = a.usage.cost_usd {
            j.cost_usd = Some(j.cost_usd.unwrap_or(0.0) + c);
        }
        let retry = a.status == "invalid_output";
        last = Some(a);
        if !retry {
            break;
        }
    }
    let Some(a) = last else {
        return Err(setup("judge")("no attempt was made".into()));
    };
    j.status = a.status.into();
    j.reason = a.reason;
    j.result_sha256 = a.result_sha256;
    j.stdout_sha256 = a.stdout_sha256;
    j.stderr_sha256 = a.stderr_sha256;
    let labels = a
        .pairs
        .unwrap_or_default()
        .into_iter()
        .map(|((issue, index), label)| PairLabel {
            group_id: row.group_id.clone(),
            repeat: row.repeat,
            judge: study.name().into(),
            hidden_issue_id: issue,
            finding_index: index as u32,
            label,
        })
        .collect();
    Ok((j, labels))
}

/// The judge's counts on stderr (or as JSON on stdout).
fn print_summary(store: &Store, judge: &str, json: bool) -> Result<(), super::AuditError> {
    let rows: Vec<Judgment> = store
        .judgments()
        .map_err(JudgeError::from)?
        .into_iter()
        .filter(|j| j.judge == judge)
        .collect();
    let labels = store.pair_labels(judge).map_err(JudgeError::from)?;
    let mut by_status = std::collections::BTreeMap::<String, u64>::new();
    for r in &rows {
        *by_status.entry(r.status.clone()).or_default() += 1;
    }
    let mut by_label = std::collections::BTreeMap::<&str, u64>::new();
    for l in [Label::Exact, Label::Semantic, Label::None] {
        by_label.insert(l.as_str(), 0);
    }
    for l in &labels {
        *by_label.entry(l.label.as_str()).or_default() += 1;
    }
    use std::io::Write;
    if json {
        let summary = serde_json::json!({
            "judge": judge,
            "judgments": rows.len(),
            "by_status": by_status,
            "labels": by_label,
            "rows": rows,
        });
        writeln!(std::io::stdout(), "{summary:#}").map_err(super::AuditError::Print)?;
    } else {
        let counts: Vec<String> = by_status.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let l: Vec<String> = by_label.iter().map(|(k, v)| format!("{k} {v}")).collect();
        eprintln!(
            "reprorun: {judge}: {} judgments: {}; pairs: {}",
            rows.len(),
            counts.join(", "),
            l.join(", ")
        );
    }
    Ok(())
}

pub use validation::{AgreementArgs, SampleArgs};

/// Runs `reprorun audit sample`.
pub(crate) fn sample(args: SampleArgs) -> Result<(), super::AuditError> {
    validation::sample(args).map_err(Into::into)
}

/// Runs `reprorun audit agreement`.
pub(crate) fn agreement(args: AgreementArgs) -> Result<(), super::AuditError> {
    validation::agreement(args)
}
