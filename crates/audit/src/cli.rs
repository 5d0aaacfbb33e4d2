//! `reprorun audit ...`: arguments to options, and what is printed.

use clap::{Args, Subcommand};

use super::AuditError;

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Collect from GitHub, on the host: each paper's repository (a mirror clone), all its
    /// issues with comments and fix evidence, and the paper; written as `audit snapshot`'s
    /// --pairs and --issues. Resumable, cached (ETag), within the API's rate limits.
    Collect(super::collect::CollectArgs),
    /// Label each issue's relevance to reproducibility and its category (built-in rules,
    /// or a judge command); labels given in the input win.
    Filter(super::filter::FilterArgs),
    /// Build the snapshots: each issue's repository as its reporter saw it, without history,
    /// into a content-addressed corpus directory.
    Snapshot(super::snapshot::SnapshotArgs),
    /// Run an audit agent on every snapshot group of a corpus, in fresh sandboxes, and
    /// record each run's findings.
    Run(Box<super::run::RunArgs>),
    /// `audit run` on a batch cluster: write the runs as chunk files, a manifest and sbatch
    /// scripts (submit.sh: an array over the chunks, then the merge job).
    Plan(Box<super::run::cluster::PlanArgs>),
    /// One array task: make one chunk's runs, each result into its own file (never SQLite).
    Work(super::run::cluster::WorkArgs),
    /// Check every result against the plan and record each run (or judgment) in the study
    /// exactly once.
    #[command(
        after_help = "A result that does not belong to the plan is refused with one line and nothing is merged. A second result of a recorded run goes to the attempts table. Merging again adds nothing. Exit status: 0, or 125. Formats: spec/cluster.md."
    )]
    Merge(super::run::cluster::MergeArgs),
    /// `audit judge` on a batch cluster: the recorded runs not yet judged as chunk files and
    /// sbatch scripts (then `audit work` per chunk and `audit merge`, as for `audit plan`).
    JudgePlan(Box<super::judge::cluster::JudgePlanArgs>),
    /// Judge each run's ranked findings against the hidden issues of its snapshot, in a
    /// sandbox whose only input is the task file; every (issue, finding) pair labelled.
    Judge(Box<super::judge::JudgeArgs>),
    /// Draw (finding, issue) pairs per judge label, the label hidden, for hand labelling.
    Sample(super::judge::SampleArgs),
    /// The judge's agreement with hand labels: agreement, precision, recall, confusion.
    Agreement(super::judge::AgreementArgs),
    /// Issue and paper EM@k/SM@k, FPR on post-fix snapshots, recall by category, cost.
    Metrics(super::metrics::MetricsArgs),
    /// Write report.md and report.html (self-contained, with SVG charts) from studies.
    Report(super::report::ReportArgs),
    /// The built-in auditor as a sandbox's workload (what `audit run --agent builtin`
    /// starts inside each sandbox).
    #[command(hide = true)]
    AgentBuiltin(AgentBuiltinArgs),
}

/// `reprorun audit agent-builtin` options.
#[derive(Debug, Args)]
pub struct AgentBuiltinArgs {
    #[arg(long, value_name = "DIR")]
    repo: std::path::PathBuf,
    /// The paper: Markdown or plain text, or a PDF (its text by pdftotext, here in the
    /// agent's sandbox).
    #[arg(long, value_name = "FILE")]
    paper: Option<std::path::PathBuf>,
    #[arg(long, value_name = "FILE")]
    out: std::path::PathBuf,
}

/// The built-in auditor on `--repo` (and the paper's text), its findings written to `--out`.
fn agent_builtin(args: AgentBuiltinArgs) -> Result<(), AuditError> {
    let io = |what: &std::path::Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| AuditError::Usage(format!("{what}: {e}"))
    };
    let paper = match &args.paper {
        Some(p) => {
            let bytes = std::fs::read(p).map_err(io(p))?;
            if super::pdf::is_pdf(&bytes) {
                match super::pdf::text(p) {
                    Ok(text) => Some(text),
                    Err(e) => {
                        // The audit goes on without the paper, and says so.
                        eprintln!("reprorun: audit agent-builtin: {}: {e}; audited without the paper's text", p.display());
                        None
                    }
                }
            } else {
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
        }
        None => None,
    };
    let findings = super::builtin::audit(&args.repo, paper.as_deref());
    std::fs::write(&args.out, findings.to_json()).map_err(io(&args.out))
}

/// Runs one `reprorun audit` command.
pub fn run(args: AuditArgs) -> Result<(), AuditError> {
    match args.command {
        AuditCommand::Collect(a) => super::collect::command(a),
        AuditCommand::Filter(a) => super::filter::command(a),
        AuditCommand::Snapshot(a) => super::snapshot::command(a),
        AuditCommand::Run(a) => super::run::command(*a),
        AuditCommand::Plan(a) => plan(*a),
        AuditCommand::Work(a) => work(a),
        AuditCommand::Merge(a) => merge(a),
        AuditCommand::JudgePlan(a) => judge_plan(*a),
        AuditCommand::Judge(a) => super::judge::command(*a),
        AuditCommand::Sample(a) => super::judge::sample(a),
        AuditCommand::Agreement(a) => super::judge::agreement(a),
        AuditCommand::Metrics(a) => super::metrics::command(a),
        AuditCommand::Report(a) => super::report::command(a),
        AuditCommand::AgentBuiltin(a) => agent_builtin(a),
    }
}

fn write_out(text: &str) -> Result<(), AuditError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(AuditError::Print)
}

fn plan(a: super::run::cluster::PlanArgs) -> Result<(), AuditError> {
    let reprorun = std::env::current_exe().map_err(AuditError::Print)?;
    let m = super::run::cluster::plan(&a, &reprorun)?;
    let units: u32 = m.chunks.iter().map(|c| c.units).sum();
    let out = std::path::absolute(&a.plan.out).unwrap_or(a.plan.out.clone());
    write_out(&format!(
        "{units} runs in {} chunks; submit with {}\n",
        m.chunks.len(),
        out.join("submit.sh").display()
    ))
}

fn judge_plan(a: super::judge::cluster::JudgePlanArgs) -> Result<(), AuditError> {
    let reprorun = std::env::current_exe().map_err(AuditError::Print)?;
    let m = super::judge::cluster::plan(&a, &reprorun)?;
    let units: u32 = m.chunks.iter().map(|c| c.units).sum();
    let out = std::path::absolute(&a.plan.out).unwrap_or(a.plan.out.clone());
    write_out(&format!(
        "{units} judgings in {} chunks; submit with {}\n",
        m.chunks.len(),
        out.join("submit.sh").display()
    ))
}

/// Whether the plan in `dir` is a judging plan (`audit judge-plan`).
fn judging(dir: &std::path::Path) -> bool {
    super::judge::cluster::plan_format(dir).as_deref()
        == Some(super::judge::cluster::MANIFEST_FORMAT)
}

fn work(a: super::run::cluster::WorkArgs) -> Result<(), AuditError> {
    if judging(&a.tasks) {
        let done = super::judge::cluster::work(&a.tasks, &a.chunk, &a.results, a.jobs())?;
        eprintln!(
            "reprorun: audit work: {} judging(s) made, {} already done{}",
            done.ran,
            done.skipped,
            if done.stopped {
                "; stopped by a signal before the rest"
            } else {
                ""
            }
        );
        return Ok(());
    }
    let done = super::run::cluster::work(&a)?;
    eprintln!(
        "reprorun: audit work: {} run(s) made, {} already done{}",
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

fn merge(a: super::run::cluster::MergeArgs) -> Result<(), AuditError> {
    let what = if judging(&a.tasks) { "judgment" } else { "run" };
    let m = if judging(&a.tasks) {
        super::judge::cluster::merge(&a.tasks, &a.results, &a.db)?
    } else {
        super::run::cluster::merge(&a.tasks, &a.results, &a.db)?
    };
    let json = a.json.then(|| serde_json::to_string(&m)).transpose();
    let json = json.map_err(|e| AuditError::Print(e.into()))?;
    let counts = [m.inserted, m.attempts, m.already];
    let (out, err) = a.output("audit merge", what, counts, &m.coverage, json);
    if let Some(line) = err {
        eprintln!("{line}");
    }
    write_out(&out)
}
