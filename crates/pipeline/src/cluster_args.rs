//! The options the cluster verbs of both pipelines share (`reproduce plan|work|merge`,
//! `audit plan|judge-plan|work|merge`; `spec/cluster.md`): what a plan writes, which chunk a
//! task runs, what a merge reads.

use std::path::PathBuf;

/// Where a plan goes and how it is cut (`plan`, `judge-plan`).
#[derive(Debug, clap::Args)]
pub struct PlanOut {
    /// The tasks directory to write.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Where workers write results (default: `results` beside --out).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Units per chunk (array task); default: as few as keep the array under 1000 tasks.
    #[arg(long, value_name = "N")]
    pub chunk: Option<u32>,
    /// Arguments for every sbatch of submit.sh, verbatim (shell words), e.g.
    /// '--partition=cpu --time=4:00:00 --cpus-per-task=2'.
    #[arg(
        long,
        value_name = "ARGS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub sbatch_args: String,
}

/// `work`: one array task's chunk.
#[derive(Debug, clap::Args)]
pub struct WorkArgs {
    /// The tasks directory `plan` wrote.
    #[arg(long, value_name = "DIR")]
    pub tasks: PathBuf,
    /// The chunk to run (DIR/chunks/NNNN.json).
    #[arg(long, value_name = "FILE")]
    pub chunk: PathBuf,
    /// The results directory (shared by every task).
    #[arg(long, value_name = "DIR")]
    pub results: PathBuf,
    /// Units made at a time in this task, each in a worker process with its share of the
    /// task's CPUs (default: $SLURM_CPUS_PER_TASK, else 1): one array task per node is enough.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: Option<u32>,
}

impl WorkArgs {
    /// `--jobs`, else Slurm's `SLURM_CPUS_PER_TASK` (when it is a number from 1), else 1.
    pub fn jobs(&self) -> usize {
        self.jobs
            .or_else(|| {
                std::env::var("SLURM_CPUS_PER_TASK")
                    .ok()
                    .and_then(|v| v.trim().parse::<u32>().ok())
                    .filter(|n| (1..=1024).contains(n))
            })
            .unwrap_or(1) as usize
    }
}

/// `merge`: the workers' results into the study.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The tasks directory `plan` wrote.
    #[arg(long, value_name = "DIR")]
    pub tasks: PathBuf,
    /// The results directory the workers wrote.
    #[arg(long, value_name = "DIR")]
    pub results: PathBuf,
    /// The study database (created, or added to).
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// Print the array indices (chunks) with a unit still unrecorded, comma-separated, for
    /// `sbatch --array=LIST` (an empty line when none).
    #[arg(long)]
    pub missing: bool,
    /// Print what was merged as one JSON object.
    #[arg(long)]
    pub json: bool,
}

impl MergeArgs {
    /// What `merge` prints: its JSON (`--json`, given as `json`), the indices of the chunks
    /// still missing (`--missing`, with the summary line for stderr), or the summary line.
    /// `verb`: `reproduce merge`; `what`: `run` or `judgment`; `counts`: inserted, attempts,
    /// already merged. Returns (standard output, a line for standard error).
    pub fn output(
        &self,
        verb: &str,
        what: &str,
        counts: [u32; 3],
        c: &super::cluster::Coverage,
        json: Option<String>,
    ) -> (String, Option<String>) {
        let [inserted, attempts, already] = counts;
        let line = format!(
            "merged {inserted} new {what}(s), {attempts} attempt(s), {already} already merged; {} of {} planned {what}s recorded",
            c.recorded, c.planned
        );
        let list: Vec<String> = c.missing_chunks.iter().map(u32::to_string).collect();
        match json {
            Some(text) => (format!("{text}\n"), None),
            None if self.missing => (
                format!("{}\n", list.join(",")),
                Some(format!("reprorun: {verb}: {line}")),
            ),
            None => (format!("{line}\n"), None),
        }
    }
}
