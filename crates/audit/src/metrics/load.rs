//! A study database (one agent configuration) and its corpus as a [`Dataset`]: the hidden
//! issues and their grounding, the papers, the runs with their findings, and one judge's
//! judgments and pair labels.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::compute::{Dataset, FindingBrief, GroupInfo, IssueInfo, PaperInfo, RunData};
use super::MetricsError;
use crate::corpus::{Corpus, Grounding};
use crate::input::Category;
use crate::run::store::Store;

/// Each run's (hidden issue, finding index, label), by (group, repeat).
type LabelsByRun = BTreeMap<(String, u32), Vec<(String, u32, crate::judgment::Label)>>;

/// One opened configuration.
pub(crate) struct Config {
    pub(crate) db: PathBuf,
    pub(crate) agent: String,
    pub(crate) judge: String,
    /// The corpus manifest's sha256.
    pub(crate) corpus: String,
    pub(crate) data: Dataset,
}

/// The part of a manifest issue the metrics use; the rest is the judge's.
#[derive(serde::Deserialize)]
struct IssueHead {
    repo: String,
    number: u64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    category: Option<String>,
}

#[derive(serde::Deserialize)]
struct ManifestIssue {
    issue: IssueHead,
    grounding: Grounding,
}

/// The corpus side of a dataset: issues, papers, groups.
pub(crate) fn corpus_part(corpus: &Corpus) -> Result<Dataset, MetricsError> {
    let m = &corpus.manifest;
    let mut issues = Vec::new();
    for v in &m.issues {
        let mi: ManifestIssue =
            serde_json::from_value(v.clone()).map_err(|e| MetricsError::Bad {
                path: corpus.dir.clone(),
                why: format!("a hidden issue is not {{issue, grounding}}: {e}"),
            })?;
        let paper_id = m
            .groups
            .iter()
            .find(|g| g.group_id == mi.grounding.group_id)
            .map(|g| g.paper_id.clone())
            .or_else(|| {
                m.pairs
                    .iter()
                    .find(|p| p.repo == mi.issue.repo)
                    .map(|p| p.paper_id.clone())
            })
            .unwrap_or_default();
        issues.push(IssueInfo {
            id: format!("{}#{}", mi.issue.repo, mi.issue.number),
            paper_id,
            title: mi.issue.title,
            target: mi.grounding.target,
            group_id: mi.grounding.group_id,
            post_fix_group_id: mi.grounding.post_fix_group_id,
            category: mi.issue.category.as_deref().and_then(Category::parse),
            rule: mi.grounding.rule,
            commit: mi.grounding.commit,
        });
    }
    let papers = m
        .pairs
        .iter()
        .map(|p| PaperInfo {
            paper_id: p.paper_id.clone(),
            title: p.title.clone(),
            venue: p.venue.clone(),
            year: p.year.clone(),
        })
        .collect();
    let groups = m
        .groups
        .iter()
        .map(|g| GroupInfo {
            group_id: g.group_id.clone(),
            paper_id: g.paper_id.clone(),
            commit: g.commit.clone(),
            post_fix_for: g
                .post_fix_for
                .iter()
                .map(|n| format!("{}#{n}", g.repo))
                .collect(),
        })
        .collect();
    Ok(Dataset {
        issues,
        papers,
        groups,
        runs: Vec::new(),
    })
}

/// Opens `db` and its corpus, with `judge`'s verdicts (default: the only judge present,
/// else `builtin`).
pub(crate) fn open(db: &Path, judge: Option<&str>) -> Result<Config, MetricsError> {
    let store = Store::open(db, false)?;
    let meta = |key: &str| store.db.meta(key);
    let corpus_dir = meta("corpus")?.ok_or_else(|| MetricsError::Study {
        path: db.to_path_buf(),
        why: "names no corpus (was it made by `reprorun audit run`?)".into(),
    })?;
    let corpus = Corpus::open(Path::new(&corpus_dir))?;
    let agent = meta("agent")?.unwrap_or_else(|| db.display().to_string());
    let judgments = store.judgments()?;
    let judge = match judge {
        Some(j) => j.to_string(),
        None => {
            let mut names: Vec<&str> = judgments.iter().map(|j| j.judge.as_str()).collect();
            names.dedup();
            names.sort_unstable();
            names.dedup();
            match names.as_slice() {
                [one] => one.to_string(),
                _ => "builtin".to_string(),
            }
        }
    };
    let mut labels: LabelsByRun = BTreeMap::new();
    for l in store.pair_labels(&judge)? {
        labels.entry((l.group_id, l.repeat)).or_default().push((
            l.hidden_issue_id,
            l.finding_index,
            l.label,
        ));
    }
    let mut data = corpus_part(&corpus)?;
    for row in store.rows()? {
        let j = judgments
            .iter()
            .find(|j| j.group_id == row.group_id && j.repeat == row.repeat && j.judge == judge);
        let key = (row.group_id.clone(), row.repeat);
        let findings = row
            .findings_sha256
            .as_deref()
            .and_then(|d| store.db.log(d))
            .and_then(|b| crate::findings::validate(&b).ok())
            .map(|f| {
                f.findings
                    .iter()
                    .map(|f| FindingBrief {
                        title: f.issue_title.clone(),
                        category: f.category.map_or("unknown", |c| c.as_str()).to_string(),
                        taxonomy: crate::taxonomy::of_finding(f).map(|(c, _)| c),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let rationales = j
            .and_then(|j| j.result_sha256.as_deref())
            .and_then(|d| store.db.log(d))
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .map(|v| rationales(&v))
            .unwrap_or_default();
        data.runs.push(RunData {
            group_id: row.group_id,
            repeat: row.repeat,
            status: row.status,
            judgment: j.map(|j| j.status.clone()),
            labels: labels.remove(&key).unwrap_or_default(),
            rationales,
            findings,
            input_tokens: row.input_tokens,
            cached_input_tokens: row.cached_input_tokens,
            output_tokens: row.output_tokens,
            cost_usd: row.cost_usd,
        });
    }
    Ok(Config {
        db: db.to_path_buf(),
        agent,
        judge,
        corpus: corpus.fingerprint(),
        data,
    })
}

/// The rationales of a judge's `result.json` (`spec/audit.md`), by (hidden issue, finding
/// index): an issue alignment's rationale for its best finding, and a finding alignment's
/// for each issue it matched (where the issue's own did not already say).
pub(crate) fn rationales(v: &Value) -> BTreeMap<(String, u32), String> {
    let mut out = BTreeMap::new();
    let list = |key: &str| {
        v.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let index = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
    };
    for a in list("issue_alignments") {
        let (Some(id), Some(idx), Some(text)) = (
            a.get("hidden_issue_id").and_then(Value::as_str),
            index(&a, "best_finding_index"),
            a.get("rationale").and_then(Value::as_str),
        ) else {
            continue;
        };
        out.insert((id.to_string(), idx), text.to_string());
    }
    for f in list("finding_alignments") {
        let (Some(idx), Some(text)) = (
            index(&f, "finding_index"),
            f.get("rationale").and_then(Value::as_str),
        ) else {
            continue;
        };
        let ids = f.get("matched_hidden_issue_ids").and_then(Value::as_array);
        for id in ids.into_iter().flatten().filter_map(Value::as_str) {
            out.entry((id.to_string(), idx))
                .or_insert_with(|| text.to_string());
        }
    }
    out
}
