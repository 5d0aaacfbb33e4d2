//! `reprorun audit collect` (`spec/audit.md`, "Collection"): the method's first step. For
//! each paper of `papers.jsonl` with a GitHub repository ([`papers`], pure), the repository's
//! issues, open and closed, with their comments and fix evidence from the REST API
//! ([`github`] over [`http`], rate limits as [`limits`] decides), a mirror clone and the
//! paper ([`fetch`]); written as `audit snapshot`'s input: `pairs.jsonl` and
//! `issues/owner__name.jsonl`. Runs on the host (it is the one audit step that needs the
//! network), resumes after a kill from its HTTP cache, and never writes or prints the token.

mod fetch;
mod github;
mod http;
pub(crate) mod limits;
pub(crate) mod papers;
mod progress;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{json, Value};
use thiserror::Error;

use super::AuditError;
use github::Found;
use papers::{Job, Skip};

/// Each names the step that failed.
#[derive(Debug, Error)]
pub enum CollectError {
    #[error("{0}")]
    Usage(String),
    #[error("papers: {reason}")]
    Papers { reason: String },
    #[error("--out: {0}")]
    Lock(String),
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("GET {url}: {reason}")]
    Http { url: String, reason: String },
    #[error("{0}")]
    Auth(String),
    #[error("issue {id}: {reason}")]
    Issue { id: String, reason: String },
    #[error("clone {repo}: {reason}")]
    Clone { repo: String, reason: String },
    #[error("paper {paper_id}: {reason}")]
    Paper { paper_id: String, reason: String },
    #[error("{failed} of {papers} papers failed (their reasons are in {skipped}); run the same command again to retry them: what was fetched is kept")]
    Incomplete {
        failed: usize,
        papers: usize,
        skipped: PathBuf,
    },
}

/// `reprorun audit collect` options.
#[derive(Debug, clap::Args)]
pub struct CollectArgs {
    /// The papers (JSONL or a JSON array): paper_id, title, venue, year, repo_url,
    /// paper_url or paper_path.
    #[arg(long, value_name = "FILE")]
    pub papers: PathBuf,
    /// The output directory (made if missing; an earlier one is brought up to date):
    /// pairs.jsonl, skipped.jsonl, issues/, repos/, papers/, .cache/.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The environment variable that holds a GitHub token (sent to --api only, never
    /// written or printed). Without it requests are anonymous (60 an hour).
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
    /// The REST API's base URL (GitHub Enterprise: https://HOST/api/v3).
    #[arg(long, value_name = "URL", default_value = "https://api.github.com")]
    pub api: String,
    /// Where repositories are cloned from: BASE/owner/name.git (a URL or a directory of
    /// bare repositories).
    #[arg(long, value_name = "BASE", default_value = "https://github.com")]
    pub clone_base: String,
    /// Only issues updated after DATE (RFC 3339 or YYYY-MM-DD; the API's `since`).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Skip repositories with more than N issues (pull requests not counted), as the
    /// method does with 100.
    #[arg(long, value_name = "N")]
    pub max_issues: Option<usize>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// What became of one paper.
enum Outcome {
    Pair(Value),
    Skip(Skip),
}

/// The run's state: the client, the output, what is known so far.
struct Run<'a> {
    args: &'a CollectArgs,
    out: PathBuf,
    client: http::Client,
    since: Option<String>,
    progress: progress::Bar,
    pairs: Vec<Value>,
    /// The previous run's pairs of papers this run has not reached yet: kept in
    /// `pairs.jsonl` until then, so that a run cut short leaves the earlier result whole.
    previous: BTreeMap<String, Value>,
    skipped: Vec<Skip>,
    failed: usize,
    issues: usize,
    warnings: Vec<String>,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The `--since` date as the API takes it.
fn since(text: &str) -> Result<String, CollectError> {
    let t = text.trim();
    let secs = if t.len() == 10 {
        reprorun_runtime::determinism::date::parse_date(t).ok()
    } else {
        crate::input::strict_time(t)
    };
    secs.map(reprorun_runtime::determinism::date::rfc3339_secs)
        .ok_or_else(|| {
            CollectError::Usage(format!(
                "--since {text:?}: expected RFC 3339 (2024-03-01T12:00:00Z) or YYYY-MM-DD"
            ))
        })
}

/// The token, from the variable `--token-env` names.
fn token(var: Option<&str>) -> Result<Option<String>, CollectError> {
    let Some(var) = var else { return Ok(None) };
    match std::env::var(var) {
        Ok(t) if !t.trim().is_empty() => Ok(Some(t)),
        _ => Err(CollectError::Usage(format!(
            "--token-env {var}: the variable is not set (or empty)"
        ))),
    }
}

/// The pairs an earlier run wrote, of papers still in the plan, by `paper_id`.
fn previous_pairs(path: &std::path::Path, jobs: &[Job]) -> BTreeMap<String, Value> {
    let Ok(records) = reprorun_pipeline::records::read_records(path, "pairs") else {
        return BTreeMap::new();
    };
    records
        .into_iter()
        .filter_map(|(_, obj)| {
            let id = obj.get("paper_id")?.as_str()?.to_string();
            jobs.iter()
                .any(|j| j.paper_id == id)
                .then_some((id, Value::Object(obj)))
        })
        .collect()
}

/// Runs `reprorun audit collect`.
pub(crate) fn command(args: CollectArgs) -> Result<(), AuditError> {
    Ok(collect(&args)?)
}

fn collect(args: &CollectArgs) -> Result<(), CollectError> {
    if !args.api.starts_with("https://") && !args.api.starts_with("http://") {
        return Err(CollectError::Usage(format!(
            "--api {}: expected an http(s) URL",
            args.api
        )));
    }
    let since = args.since.as_deref().map(since).transpose()?;
    let token = token(args.token_env.as_deref())?;
    let plan = papers::plan(&args.papers)?;
    let out = std::path::absolute(&args.out).unwrap_or_else(|_| args.out.clone());
    for dir in ["issues", "repos", "papers", ".cache"] {
        let d = out.join(dir);
        std::fs::create_dir_all(&d).map_err(|source| CollectError::Write { path: d, source })?;
    }
    let _lock = reprorun_pipeline::store::lock(&out.join(".cache").join("collect"))
        .map_err(|e| CollectError::Lock(format!("{}: {e}", out.display())))?;
    let mut client = http::Client::new(&args.api, token, &out)?;
    let total = plan.jobs.len() + plan.skipped.len();
    let progress = progress::Bar::new(plan.jobs.len());
    client.on_wait = progress.waiter();
    let previous = previous_pairs(&out.join("pairs.jsonl"), &plan.jobs);
    let mut run = Run {
        args,
        out,
        client,
        since,
        progress,
        pairs: Vec::new(),
        previous,
        skipped: plan.skipped,
        failed: 0,
        issues: 0,
        warnings: Vec::new(),
    };
    for job in &plan.jobs {
        run.progress.start(&job.repo);
        let what = match run.one(job) {
            Ok(Outcome::Pair(p)) => {
                let n = p.get("issues").and_then(Value::as_u64).unwrap_or(0);
                run.pairs.push(p);
                format!("{n} issues")
            }
            Ok(Outcome::Skip(s)) => {
                let what = format!("skipped: {}", s.reason);
                run.skipped.push(s);
                what
            }
            Err(e @ (CollectError::Auth(_) | CollectError::Write { .. })) => return Err(e),
            Err(e) => {
                run.failed += 1;
                let reason = format!("failed: {e}");
                run.skipped.push(Skip {
                    paper_id: job.paper_id.clone(),
                    repo_url: None,
                    repo: Some(job.repo.clone()),
                    reason: reason.clone(),
                });
                reason
            }
        };
        run.previous.remove(&job.paper_id);
        run.write_lists()?;
        run.progress.done(&job.repo, &what, run.client.budget);
    }
    run.progress.finish();
    run.write_lists()?;
    run.prune()?;
    run.summary(total)
}

impl Run<'_> {
    /// One paper: the repository's issues, its mirror, the paper, the issues file.
    fn one(&mut self, job: &Job) -> Result<Outcome, CollectError> {
        let skip = |repo: &str, reason: String| {
            Outcome::Skip(Skip {
                paper_id: job.paper_id.clone(),
                repo_url: None,
                repo: Some(repo.to_string()),
                reason,
            })
        };
        let collected_at = reprorun_runtime::determinism::date::rfc3339_secs(now());
        let info = match github::repo(&mut self.client, &job.repo)? {
            Found::Yes(i) => i,
            Found::Gone(why) => return Ok(skip(&job.repo, why)),
        };
        let repo = info.full_name.clone();
        let list = match github::issue_list(&mut self.client, &repo, self.since.as_deref())? {
            Found::Yes(l) => l,
            Found::Gone(why) => return Ok(skip(&repo, why)),
        };
        if let Some(max) = self.args.max_issues.filter(|m| list.len() > *m) {
            let why = format!("{} issues, more than --max-issues {max}", list.len());
            return Ok(skip(&repo, why));
        }
        self.progress.issues(list.len());
        let mut merge_commits = BTreeMap::new();
        let mut issues = Vec::new();
        for obj in &list {
            match github::issue(&mut self.client, &repo, obj, &mut merge_commits) {
                Ok(i) => issues.push(i),
                Err(e @ CollectError::Issue { .. }) => self.warnings.push(e.to_string()),
                Err(e) => return Err(e),
            }
            self.progress.issue_done(self.client.budget);
        }
        let stem = repo.replacen('/', "__", 1);
        let clone_url = format!("{}/{repo}.git", self.args.clone_base.trim_end_matches('/'));
        let clone = format!("repos/{stem}.git");
        fetch::mirror(&clone_url, &self.out.join(&clone), &repo)?;
        let paper = fetch::paper(&self.out, &job.paper_id, &job.paper)?;
        issues.sort_by_key(|i| i.number);
        let mut text = String::new();
        for i in &issues {
            let line = serde_json::to_string(i).map_err(|e| CollectError::Issue {
                id: i.id(),
                reason: e.to_string(),
            })?;
            text.push_str(&line);
            text.push('\n');
        }
        self.write(&format!("issues/{stem}.jsonl"), text.as_bytes())?;
        self.issues += issues.len();
        let mut pair = json!({
            "paper_id": job.paper_id,
            "title": job.title,
            "venue": job.venue,
            "year": job.year,
            "repo": repo,
            "clone": clone,
            "default_branch": info.default_branch,
            "paper": paper.file,
            "paper_pdf": paper.pdf,
            "collected_at": collected_at,
            "issues": issues.len(),
        });
        if let (Some(obj), papers::PaperSource::Url(u)) = (pair.as_object_mut(), &job.paper) {
            obj.insert("paper_url".into(), Value::String(u.clone()));
        }
        if let Some(obj) = pair.as_object_mut() {
            obj.retain(|_, v| !v.is_null());
        }
        Ok(Outcome::Pair(pair))
    }

    fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), CollectError> {
        let path = self.out.join(rel);
        reprorun_runtime::sys::write_atomic(&path, bytes, 0o644)
            .map_err(|source| CollectError::Write { path, source })
    }

    /// `pairs.jsonl` and `skipped.jsonl` as they stand.
    fn write_lists(&self) -> Result<(), CollectError> {
        let lines = |items: Vec<String>| items.iter().map(|l| format!("{l}\n")).collect::<String>();
        let pairs = lines(
            self.pairs
                .iter()
                .chain(self.previous.values())
                .map(Value::to_string)
                .collect(),
        );
        let skipped = lines(
            self.skipped
                .iter()
                .filter_map(|s| serde_json::to_string(s).ok())
                .collect(),
        );
        self.write("pairs.jsonl", pairs.as_bytes())?;
        self.write("skipped.jsonl", skipped.as_bytes())
    }

    /// Removes the issue files of repositories no pair has now (skipped or failed this
    /// time), so that `audit snapshot` reads exactly the pairs' issues.
    fn prune(&self) -> Result<(), CollectError> {
        let keep: BTreeSet<String> = self
            .pairs
            .iter()
            .filter_map(|p| p.get("repo").and_then(Value::as_str))
            .map(|r| format!("{}.jsonl", r.replacen('/', "__", 1)))
            .collect();
        let dir = self.out.join("issues");
        let entries = std::fs::read_dir(&dir).map_err(|source| CollectError::Write {
            path: dir.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !keep.contains(&name) {
                let path = entry.path();
                std::fs::remove_file(&path)
                    .map_err(|source| CollectError::Write { path, source })?;
            }
        }
        Ok(())
    }

    fn summary(&self, papers: usize) -> Result<(), CollectError> {
        let s = self.client.stats;
        if self.failed > 0 {
            // The error's one line says it all; the summary goes to stdout with --json.
            self.print_json();
            return Err(CollectError::Incomplete {
                failed: self.failed,
                papers,
                skipped: self.out.join("skipped.jsonl"),
            });
        }
        eprintln!(
            "reprorun: audit collect: {} papers: {} collected ({} issues), {} skipped; {} requests ({} conditional, {} answered 304), {} waits -> {}",
            papers,
            self.pairs.len(),
            self.issues,
            self.skipped.len(),
            s.requests,
            s.conditional,
            s.not_modified,
            s.retries,
            self.out.display()
        );
        for w in &self.warnings {
            eprintln!("reprorun: audit collect: left out {w}");
        }
        self.print_json();
        Ok(())
    }

    fn print_json(&self) {
        if self.args.json {
            let summary = json!({
                "out": self.out,
                "pairs": self.pairs.len(),
                "issues": self.issues,
                "skipped": self.skipped,
                "failed": self.failed,
                "requests": self.client.stats,
                "warnings": self.warnings,
            });
            println!("{summary}");
        }
    }
}

#[cfg(test)]
mod tests;
