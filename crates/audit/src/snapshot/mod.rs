//! `reprorun audit snapshot` (`spec/audit.md`, "Snapshots"): each issue's repository as its
//! reporter saw it. Per pair: open the clone ([`git`]), read the default branch's history,
//! ground each issue on a commit ([`select`], pure), write each distinct commit's tree as a
//! deterministic tar ([`tar`]) while scanning it for leaks of the hidden issues ([`leak`]),
//! and record it all in the corpus manifest ([`crate::corpus`]).

mod git;
mod leak;
pub(crate) mod select;
pub(crate) mod tar;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::json;
use thiserror::Error;

use super::corpus::{self, Corpus, Grounding, Group, Manifest, PairEntry, Writer};
use super::input::{self, Issue, Pair};
use super::AuditError;
use git::Repo;
use select::{History, Target};

pub use select::PreFix;

/// What `audit snapshot` does with an issue its own snapshot names (`--leaked`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Leaked {
    /// Keep it in the study, recorded as `grounding.named_in`.
    Keep,
    /// Leave it out, with one line naming it.
    Drop,
}

#[derive(Debug, Error)]
pub enum SnapshotError {
    /// Bad input, one line naming the pair or issue (`--skip-bad` goes on without it).
    #[error("{0}")]
    Bad(String),
    /// git failed on a clone that opened.
    #[error("pair {paper_id}: {reason}")]
    Git { paper_id: String, reason: String },
    #[error("group {group}: write its tree: {source}")]
    Tree {
        group: String,
        source: std::io::Error,
    },
}

/// `reprorun audit snapshot` options.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// The pairs (JSON array or JSONL): paper_id, repo, clone, paper, collected_at, ...
    #[arg(long, value_name = "FILE")]
    pub pairs: PathBuf,
    /// The issues: a JSON/JSONL file or a directory of owner__name.json files (gh or REST
    /// spelling, or `audit filter` output).
    #[arg(long, value_name = "PATH")]
    pub issues: PathBuf,
    /// The corpus directory to write: new, or an earlier corpus (rebuilt in place).
    #[arg(long, value_name = "CORPUS")]
    pub out: PathBuf,
    /// Record bad pairs and issues in the manifest's warnings and go on without them.
    #[arg(long)]
    pub skip_bad: bool,
    /// Only issues labelled reproducibility: true (unlabelled ones by the built-in rules).
    #[arg(long)]
    pub only_reproducibility: bool,
    /// A fixed issue's pre-fix snapshot: the fix commit's parent, or the default branch
    /// when the issue was opened (recorded per issue as `grounding.pre_fix`).
    #[arg(long, value_enum, default_value = "fix-parent", value_name = "WHICH")]
    pub pre_fix: select::PreFix,
    /// An issue its own snapshot names outright (its URL, or #N with its title: a README
    /// at head listing it as fixed): keep it (recorded as grounding.named_in, counted
    /// unsolved unless an agent finds it) or drop it from the study.
    #[arg(long, value_enum, default_value = "keep", value_name = "WHAT")]
    pub leaked: Leaked,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `reprorun audit snapshot`.
pub(crate) fn command(args: SnapshotArgs) -> Result<(), AuditError> {
    let corpus = build(&args)?;
    let m = &corpus.manifest;
    let trees: BTreeSet<&str> = m.groups.iter().map(|g| g.tree.as_str()).collect();
    eprintln!(
        "reprorun: audit snapshot: {} pairs, {} issues, {} groups, {} trees, {} warnings -> {}",
        m.pairs.len(),
        m.issues.len(),
        m.groups.len(),
        trees.len(),
        m.warnings.len(),
        corpus.dir.display()
    );
    if args.json {
        let summary = json!({
            "corpus": corpus.dir,
            "fingerprint": corpus.fingerprint(),
            "pairs": m.pairs.len(),
            "issues": m.issues.len(),
            "groups": m.groups.len(),
            "trees": trees.len(),
            "warnings": m.warnings,
        });
        println!("{summary}");
    }
    Ok(())
}

/// Bad input: an error, or with `--skip-bad` a warning line.
struct Bad<'a> {
    skip: bool,
    warnings: &'a mut Vec<String>,
}

impl Bad<'_> {
    fn report(&mut self, line: String) -> Result<(), SnapshotError> {
        if !self.skip {
            return Err(SnapshotError::Bad(line));
        }
        eprintln!("reprorun: audit snapshot: skipped: {line}");
        self.warnings.push(format!("skipped: {line}"));
        Ok(())
    }
}

/// Builds the corpus.
pub(crate) fn build(args: &SnapshotArgs) -> Result<Corpus, AuditError> {
    let pairs = input::load_pairs(&args.pairs)?;
    let issues = input::load_issues(&args.issues)?;
    let mut warnings = Vec::new();
    let mut bad = Bad {
        skip: args.skip_bad,
        warnings: &mut warnings,
    };
    for e in pairs.bad.iter().chain(&issues.bad) {
        bad.report(e.to_string())?;
    }
    let writer = Writer::create(&args.out)?;
    let mut by_repo: BTreeMap<String, Vec<Issue>> = BTreeMap::new();
    for mut issue in issues.items {
        if !pairs.items.iter().any(|p| p.repo == issue.repo) {
            bad.report(format!(
                "issue {}: no pair has repository {}",
                issue.id(),
                issue.repo
            ))?;
            continue;
        }
        if args.only_reproducibility {
            super::filter::label(&mut issue, None)?;
            if issue.reproducibility != Some(true) {
                continue;
            }
        }
        by_repo.entry(issue.repo.clone()).or_default().push(issue);
    }
    let mut manifest = Manifest {
        version: corpus::CORPUS_VERSION,
        pairs: Vec::new(),
        groups: Vec::new(),
        issues: Vec::new(),
        warnings: Vec::new(),
    };
    // Every pair and issue is checked (and grounded) before any tree is written, so bad
    // input stops the command before it has done, or printed, anything else.
    let mut plans = Vec::new();
    let mut named = 0;
    for pair in &pairs.items {
        let issues = by_repo.remove(&pair.repo).unwrap_or_default();
        if let Some(plan) = plan_pair(pair, issues, args.pre_fix, &mut bad)? {
            plans.push(plan);
        }
    }
    for plan in &plans {
        let built = write_pair(plan, &writer, args.leaked, &mut bad)?;
        named += built.named;
        manifest.pairs.push(built.entry);
        manifest.groups.extend(built.groups);
        manifest.issues.extend(built.issues);
    }
    manifest.groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    if named > 0 {
        eprintln!(
            "reprorun: audit snapshot: {named} issue(s) named outright by their own snapshot (its URL, or #N and its title): {}",
            match args.leaked {
                Leaked::Keep => "kept, as grounding.named_in; they count as unsolved unless an agent finds them (--leaked drop leaves them out)",
                Leaked::Drop => "left out (--leaked drop)",
            }
        );
    }
    manifest.warnings = warnings;
    Ok(writer.finish(&manifest)?)
}

/// What one pair adds to the manifest.
struct Built {
    /// Issues their own snapshot names outright (kept or dropped).
    named: usize,
    entry: PairEntry,
    groups: Vec<Group>,
    issues: Vec<serde_json::Value>,
}

/// The issues grounded on one commit, and those whose fix it is.
#[derive(Default)]
struct Acc {
    issues: Vec<u64>,
    post_fix_for: Vec<u64>,
}

/// A pair whose clone opened, with its issues grounded.
struct Plan<'a> {
    pair: &'a Pair,
    repo: Repo,
    branch: String,
    grounded: Vec<(Issue, Target)>,
}

fn plan_pair<'a>(
    pair: &'a Pair,
    issues: Vec<Issue>,
    pre_fix: select::PreFix,
    bad: &mut Bad,
) -> Result<Option<Plan<'a>>, AuditError> {
    let name = |reason: String| format!("pair {}: {reason}", pair.paper_id);
    if !pair.paper.is_file() {
        bad.report(name(format!(
            "paper {}: no such file",
            pair.paper.display()
        )))?;
        return Ok(None);
    }
    let repo = match Repo::open(&pair.clone) {
        Ok(r) => r,
        Err(reason) => {
            bad.report(name(reason))?;
            return Ok(None);
        }
    };
    let branch = match repo.default_branch(pair.default_branch.as_deref()) {
        Ok(b) => b,
        Err(reason) => {
            bad.report(name(reason))?;
            return Ok(None);
        }
    };
    let git_err = |reason: String| SnapshotError::Git {
        paper_id: pair.paper_id.clone(),
        reason,
    };
    let first_parent = repo.log(&branch, true).map_err(git_err)?;
    let all = repo.log(&branch, false).map_err(git_err)?;
    let resolve = |id: &str| repo.resolve(id);
    let history = History {
        first_parent: &first_parent,
        all: &all,
        resolve: &resolve,
    };
    let mut grounded = Vec::new();
    for issue in issues {
        let target = issue
            .created_secs()
            .map_err(|e| e.to_string())
            .and_then(|created| select::ground(&issue, created, pair.collected, pre_fix, &history));
        match target {
            Ok(t) => grounded.push((issue, t)),
            Err(reason) => bad.report(format!("issue {}: {reason}", issue.id()))?,
        }
    }
    Ok(Some(Plan {
        pair,
        repo,
        branch,
        grounded,
    }))
}

/// Writes a pair's trees and paper; returns what it adds to the manifest.
/// A group whose tree cannot be read from the clone (a blob missing: a partial or shallow
/// clone) is bad input: with `--skip-bad` it is left out with one line, its issues with it,
/// and an issue whose post-fix group it was keeps its pre-fix group without one.
/// An issue its own snapshot names outright is kept with `named_in`, or left out with one
/// line (`--leaked drop`).
fn write_pair(
    plan: &Plan,
    writer: &Writer,
    leaked: Leaked,
    bad: &mut Bad,
) -> Result<Built, AuditError> {
    let pair = plan.pair;
    let mut commits: BTreeMap<&str, Acc> = BTreeMap::new();
    for (issue, t) in &plan.grounded {
        commits
            .entry(&t.commit)
            .or_default()
            .issues
            .push(issue.number);
        if let Some(fix) = &t.fix {
            commits
                .entry(fix)
                .or_default()
                .post_fix_for
                .push(issue.number);
        }
    }
    let group_id = |commit: &str| format!("{}@{}", pair.paper_id, &commit[..commit.len().min(12)]);
    let mut groups = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut named_in: BTreeMap<u64, String> = BTreeMap::new();
    for (commit, acc) in commits {
        let id = group_id(commit);
        let hidden: Vec<&Issue> = plan
            .grounded
            .iter()
            .map(|(i, _)| i)
            .filter(|i| acc.issues.contains(&i.number))
            .collect();
        let tree = match write_tree(&plan.repo, commit, &id, &hidden, writer, bad.warnings) {
            Ok((tree, named)) => {
                for i in &hidden {
                    if let Some(path) = named.get(&i.id()) {
                        named_in.insert(i.number, path.clone());
                    }
                }
                tree
            }
            Err(AuditError::Snapshot(e @ SnapshotError::Tree { .. })) => {
                let issues: Vec<String> = acc.issues.iter().map(|n| format!("#{n}")).collect();
                bad.report(format!(
                    "pair {}: {e}; left out with its issues [{}]",
                    pair.paper_id,
                    issues.join(", ")
                ))?;
                failed.push(commit.to_string());
                continue;
            }
            Err(e) => return Err(e),
        };
        groups.push(Group {
            group_id: id,
            paper_id: pair.paper_id.clone(),
            repo: pair.repo.clone(),
            commit: commit.to_string(),
            tree,
            issues: acc.issues,
            post_fix_for: acc.post_fix_for,
        });
    }
    let mut dropped: Vec<u64> = plan
        .grounded
        .iter()
        .filter(|(_, t)| failed.contains(&t.commit))
        .map(|(i, _)| i.number)
        .collect();
    if leaked == Leaked::Drop {
        for (n, path) in &named_in {
            let line = format!(
                "left out: issue {}#{n}: its own snapshot names it ({path})",
                pair.repo
            );
            eprintln!("reprorun: audit snapshot: {line}");
            bad.warnings.push(line);
            dropped.push(*n);
        }
    }
    for g in &mut groups {
        g.post_fix_for.retain(|n| !dropped.contains(n));
        g.issues.retain(|n| !dropped.contains(n));
    }
    groups.retain(|g| !g.issues.is_empty() || !g.post_fix_for.is_empty());
    let issues = plan
        .grounded
        .iter()
        .filter(|(i, _)| !dropped.contains(&i.number))
        .map(|(issue, t)| {
            let fix = t.fix.as_deref().filter(|f| !failed.iter().any(|c| c == f));
            let grounding = Grounding {
                target: t.target.to_string(),
                group_id: group_id(&t.commit),
                commit: t.commit.clone(),
                post_fix_group_id: fix.map(group_id),
                rule: t.rule.to_string(),
                fix_commit: t.fix.clone(),
                pre_fix: t.pre_fix.map(|p| p.name().to_string()),
                named_in: named_in.get(&issue.number).cloned(),
            };
            json!({ "issue": issue, "grounding": grounding })
        })
        .collect();
    let paper = writer.add_paper(&pair.paper, &pair.paper_kind)?;
    Ok(Built {
        named: named_in.len(),
        entry: PairEntry {
            paper_id: pair.paper_id.clone(),
            title: pair.title.clone(),
            repo: pair.repo.clone(),
            paper,
            paper_kind: pair.paper_kind.clone(),
            collected_at: pair.collected_at.clone(),
            venue: pair.venue.clone(),
            year: pair.year.clone(),
            default_branch: plan.branch.clone(),
        },
        groups,
        issues,
    })
}

/// Writes a commit's tree into the corpus and scans it for leaks of `hidden`; returns the
/// tree's sha256 and the hidden issues it names outright (id → first file).
fn write_tree(
    repo: &Repo,
    commit: &str,
    group: &str,
    hidden: &[&Issue],
    writer: &Writer,
    warnings: &mut Vec<String>,
) -> Result<(String, BTreeMap<String, String>), AuditError> {
    let git_err = |reason: String| SnapshotError::Tree {
        group: group.to_string(),
        source: std::io::Error::other(reason),
    };
    let tree_err = |source: std::io::Error| SnapshotError::Tree {
        group: group.to_string(),
        source,
    };
    let entries = tar::parse_ls_tree(&repo.ls_tree(commit).map_err(git_err)?).map_err(git_err)?;
    let mut blobs = repo.blobs().map_err(git_err)?;
    let mut scanner = leak::Scanner::new(hidden);
    let tmp = writer.tree_tmp();
    let file = std::fs::File::create(&tmp).map_err(tree_err)?;
    let out = tar::Hashing::new(std::io::BufWriter::new(file));
    let out = tar::write_tar(
        &entries,
        &mut |e| blobs.read(&e.oid),
        &mut |path, bytes| scanner.scan(path, bytes),
        out,
    )
    .map_err(tree_err)?;
    let (sha, mut inner) = out.finish();
    std::io::Write::flush(&mut inner).map_err(tree_err)?;
    drop(inner);
    writer.add_tree(&sha)?;
    for w in scanner.warnings(group) {
        eprintln!("reprorun: audit snapshot: warning: {w}");
        warnings.push(w);
    }
    Ok((sha, scanner.named()))
}

#[cfg(test)]
mod tests;
