//! The ReproRepo paper's metrics as pure functions over a [`Dataset`]: per repeat, then
//! mean ± sample std over repeats, with a paper-level bootstrap for the headline rates.
//! Nothing here reads a database: the loader (`load`) turns a study into a `Dataset`.

use std::collections::{BTreeMap, BTreeSet};

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::input::Category;
use crate::judgment::Label;

mod bootstrap;
mod breakdown;
use bootstrap::bootstrap;
use breakdown::{by_category, by_venue, cost, count, finding_categories, taxonomy};

/// A hidden issue, where it was grounded, and what it is about.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IssueInfo {
    /// `owner/name#N`.
    pub(crate) id: String,
    pub(crate) paper_id: String,
    pub(crate) title: String,
    /// `open`, `closed_silver` or `closed_gold`.
    pub(crate) target: String,
    /// The snapshot its reporter saw (pre-fix).
    pub(crate) group_id: String,
    /// The fix commit's snapshot (`closed_gold`), where a finding of it is a false positive.
    pub(crate) post_fix_group_id: Option<String>,
    pub(crate) category: Option<Category>,
    /// The grounding rule and the snapshot commit.
    pub(crate) rule: String,
    pub(crate) commit: String,
}

/// A paper (one pair).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PaperInfo {
    pub(crate) paper_id: String,
    pub(crate) title: Option<String>,
    pub(crate) venue: Option<String>,
    pub(crate) year: Option<String>,
}

impl PaperInfo {
    /// `venue year`, either alone, or `None` when the pair has neither.
    pub(crate) fn venue_key(&self) -> Option<String> {
        match (&self.venue, &self.year) {
            (Some(v), Some(y)) => Some(format!("{v} {y}")),
            (Some(v), None) => Some(v.clone()),
            (None, Some(y)) => Some(y.clone()),
            (None, None) => None,
        }
    }
}

/// A snapshot group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupInfo {
    pub(crate) group_id: String,
    pub(crate) paper_id: String,
    pub(crate) commit: String,
    /// Issue ids whose fix commit this snapshot is.
    pub(crate) post_fix_for: Vec<String>,
}

/// A finding as the report shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FindingBrief {
    pub(crate) title: String,
    pub(crate) category: String,
    /// Its class in the paper's four-way split (`taxonomy::of_finding`), when placed.
    pub(crate) taxonomy: Option<Category>,
}

/// One agent run and its judgment.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RunData {
    pub(crate) group_id: String,
    pub(crate) repeat: u32,
    /// The run's status (`ok` when its findings validated).
    pub(crate) status: String,
    /// The judgment's status, when judged.
    pub(crate) judgment: Option<String>,
    /// (hidden issue id, finding index, label), from a judgment `ok` of a run `ok`.
    pub(crate) labels: Vec<(String, u32, Label)>,
    /// The judge's rationale per (hidden issue id, finding index), when its result has one.
    pub(crate) rationales: BTreeMap<(String, u32), String>,
    /// The validated findings in rank order.
    pub(crate) findings: Vec<FindingBrief>,
    pub(crate) input_tokens: u64,
    pub(crate) cached_input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cost_usd: Option<f64>,
}

impl RunData {
    /// Labels count only for a valid run judged `ok`; anything else leaves its issues
    /// unmatched.
    fn counts(&self) -> bool {
        self.status == "ok" && self.judgment.as_deref() == Some("ok")
    }

    /// The best (lowest) finding index labelled exact, and exact-or-semantic, for `issue`.
    fn best(&self, issue: &str) -> (Option<u32>, Option<u32>) {
        if !self.counts() {
            return (None, None);
        }
        let mut best = (None, None);
        for (id, idx, label) in &self.labels {
            if id != issue {
                continue;
            }
            let min = |cur: Option<u32>| Some(cur.map_or(*idx, |c: u32| c.min(*idx)));
            match label {
                Label::Exact => {
                    best.0 = min(best.0);
                    best.1 = min(best.1);
                }
                Label::Semantic => best.1 = min(best.1),
                Label::None => {}
            }
        }
        best
    }
}

/// One configuration's study: the corpus side and its runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Dataset {
    pub(crate) issues: Vec<IssueInfo>,
    pub(crate) papers: Vec<PaperInfo>,
    pub(crate) groups: Vec<GroupInfo>,
    pub(crate) runs: Vec<RunData>,
}

/// How the metrics are computed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// k = 1..=k, plus "all"; the headline rates are at this k.
    pub(crate) k: u32,
    /// Bootstrap draws (0: no intervals).
    pub(crate) bootstrap: u32,
    pub(crate) seed: u64,
}

/// Rates at k = 1..=K and over all findings; `None` where there is nothing to count.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KRates {
    pub(crate) at: Vec<Option<f64>>,
    pub(crate) all: Option<f64>,
}

impl KRates {
    /// The rate at `k` (1-based), or over all findings past the last k.
    pub(crate) fn get(&self, k: u32) -> Option<f64> {
        self.at.get(k as usize - 1).copied().unwrap_or(self.all)
    }
}

impl Serialize for KRates {
    /// `{"1": x, ..., "K": x, "all": x}` in that order.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.at.len() + 1))?;
        for (i, v) in self.at.iter().enumerate() {
            m.serialize_entry(&(i + 1).to_string(), v)?;
        }
        m.serialize_entry("all", &self.all)?;
        m.end()
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct EmSm {
    pub(crate) em: KRates,
    pub(crate) sm: KRates,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Fpr {
    pub(crate) exact: Option<f64>,
    pub(crate) exact_or_semantic: Option<f64>,
    /// Papers with a post-fix snapshot (the denominator).
    pub(crate) papers: usize,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct FprStd {
    pub(crate) exact: Option<f64>,
    pub(crate) exact_or_semantic: Option<f64>,
}

/// Recall at the headline k of the issues of one category (or venue).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Recall {
    pub(crate) em: Option<f64>,
    pub(crate) sm: Option<f64>,
    pub(crate) n: usize,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct VenueRecall {
    pub(crate) issue_em: Option<f64>,
    pub(crate) issue_sm: Option<f64>,
    pub(crate) paper_any_sm: Option<f64>,
    pub(crate) issues: usize,
    pub(crate) papers: usize,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Share {
    pub(crate) n: u64,
    pub(crate) share: f64,
}

/// The paper's four-way split (its Figures 7–9) of the human issues and of the agent's
/// predictions: every class listed, then `unlabelled` issues / `unclassified` findings when
/// there are any.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Taxonomy {
    /// The corpus's hidden issues by their `category`.
    pub(crate) issues: BTreeMap<String, Share>,
    /// The findings of every valid run (all repeats, all ranks) by their class.
    pub(crate) findings: BTreeMap<String, Share>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Cost {
    pub(crate) runs: usize,
    /// Over the runs with a known cost; `null` when none has one.
    pub(crate) mean_usd: Option<f64>,
    pub(crate) mean_input_tokens: Option<f64>,
    pub(crate) mean_cached_input_tokens: Option<f64>,
    pub(crate) mean_output_tokens: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Std {
    pub(crate) issue: EmSm,
    pub(crate) paper_any: EmSm,
    pub(crate) paper_all: EmSm,
    pub(crate) fpr: FprStd,
}

/// One configuration's metrics: the `--json` object's `configs[]` entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct ConfigMetrics {
    pub(crate) agent: String,
    pub(crate) judge: String,
    pub(crate) repeats: usize,
    /// The headline k.
    pub(crate) k: u32,
    pub(crate) papers: usize,
    pub(crate) issues: usize,
    pub(crate) issue: EmSm,
    pub(crate) paper_any: EmSm,
    pub(crate) paper_all: EmSm,
    pub(crate) fpr: Fpr,
    pub(crate) by_category: BTreeMap<String, Recall>,
    pub(crate) finding_categories: BTreeMap<String, Share>,
    pub(crate) taxonomy: Taxonomy,
    pub(crate) by_venue: BTreeMap<String, VenueRecall>,
    pub(crate) cost: Cost,
    pub(crate) std: Std,
    pub(crate) ci95: BTreeMap<String, Option<[f64; 2]>>,
    /// Runs per status.
    pub(crate) status: BTreeMap<String, u64>,
    /// Judgments per status.
    pub(crate) judgments: BTreeMap<String, u64>,
}

/// `num / den`, `None` for an empty denominator.
pub(crate) fn ratio(num: usize, den: usize) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// The mean and the sample standard deviation (n − 1) of the values present; the std is
/// `None` below two values.
pub(crate) fn mean_std(values: &[Option<f64>]) -> (Option<f64>, Option<f64>) {
    let v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.is_empty() {
        return (None, None);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let std = (v.len() > 1)
        .then(|| (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
    (Some(mean), std)
}

/// Best exact and exact-or-semantic rank per issue, for one repeat.
type Ranks = Vec<(Option<u32>, Option<u32>)>;

/// What one repeat gives, per issue and per paper.
struct RepeatView {
    /// Per issue (index into `Dataset::issues`): its own run's best ranks.
    ranks: Ranks,
    /// Per post-fix paper (index into `Prepared::post_fix_papers`): (exact, exact-or-semantic)
    /// false positive.
    fp: Vec<(bool, bool)>,
}

/// The dataset indexed once.
struct Prepared<'a> {
    data: &'a Dataset,
    /// Repeats present, ascending.
    repeats: Vec<u32>,
    /// Papers with at least one hidden issue, in `papers` order, with their issue indices.
    papers: Vec<(&'a str, Vec<usize>)>,
    /// Papers with a post-fix snapshot: (paper, [(issue index, post-fix group)]).
    post_fix_papers: Vec<(&'a str, Vec<(usize, &'a str)>)>,
    views: Vec<RepeatView>,
}

fn prepare(data: &Dataset) -> Prepared<'_> {
    let repeats: Vec<u32> = data
        .runs
        .iter()
        .map(|r| r.repeat)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let runs: BTreeMap<(&str, u32), &RunData> = data
        .runs
        .iter()
        .map(|r| ((r.group_id.as_str(), r.repeat), r))
        .collect();
    let mut paper_ids: Vec<&str> = data.papers.iter().map(|p| p.paper_id.as_str()).collect();
    for i in &data.issues {
        if !paper_ids.contains(&i.paper_id.as_str()) {
            paper_ids.push(&i.paper_id);
        }
    }
    let mut papers = Vec::new();
    let mut post_fix_papers = Vec::new();
    for p in paper_ids {
        let own: Vec<usize> = (0..data.issues.len())
            .filter(|&i| data.issues[i].paper_id == p)
            .collect();
        let fixed: Vec<(usize, &str)> = own
            .iter()
            .filter_map(|&i| data.issues[i].post_fix_group_id.as_deref().map(|g| (i, g)))
            .collect();
        if !fixed.is_empty() {
            post_fix_papers.push((p, fixed));
        }
        if !own.is_empty() {
            papers.push((p, own));
        }
    }
    let views = repeats
        .iter()
        .map(|&r| {
            let best = |group: &str, issue: &str| {
                runs.get(&(group, r))
                    .map_or((None, None), |run| run.best(issue))
            };
            let ranks = data
                .issues
                .iter()
                .map(|i| best(&i.group_id, &i.id))
                .collect();
            let fp = post_fix_papers
                .iter()
                .map(|(_, fixed)| {
                    fixed.iter().fold((false, false), |acc, &(i, g)| {
                        let (e, s) = best(g, &data.issues[i].id);
                        (acc.0 || e.is_some(), acc.1 || s.is_some())
                    })
                })
                .collect();
            RepeatView { ranks, fp }
        })
        .collect();
    Prepared {
        data,
        repeats,
        papers,
        post_fix_papers,
        views,
    }
}

/// Matched within the top `k` (`None`: all findings).
fn within(rank: Option<u32>, k: Option<u32>) -> bool {
    match (rank, k) {
        (Some(r), Some(k)) => r < k,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The thresholds 1..=K, then "all".
fn thresholds(k: u32) -> Vec<Option<u32>> {
    (1..=k).map(Some).chain(std::iter::once(None)).collect()
}

/// Per threshold: issue EM, issue SM, paper-any EM/SM, paper-all EM/SM of one repeat over
/// the issues `issues` of papers `papers`.
fn repeat_rates(view: &RepeatView, papers: &[&[usize]], t: Option<u32>) -> [Option<f64>; 6] {
    let n_issues: usize = papers.iter().map(|p| p.len()).sum();
    let mut c = [0usize; 6];
    for issues in papers {
        let em = issues
            .iter()
            .filter(|&&i| within(view.ranks[i].0, t))
            .count();
        let sm = issues
            .iter()
            .filter(|&&i| within(view.ranks[i].1, t))
            .count();
        c[0] += em;
        c[1] += sm;
        c[2] += usize::from(em > 0);
        c[3] += usize::from(sm > 0);
        c[4] += usize::from(em == issues.len());
        c[5] += usize::from(sm == issues.len());
    }
    let np = papers.len();
    [
        ratio(c[0], n_issues),
        ratio(c[1], n_issues),
        ratio(c[2], np),
        ratio(c[3], np),
        ratio(c[4], np),
        ratio(c[5], np),
    ]
}

/// FPR (exact, exact-or-semantic) of one repeat over post-fix papers `which`.
fn repeat_fpr(view: &RepeatView, which: &[usize]) -> (Option<f64>, Option<f64>) {
    let e = which.iter().filter(|&&p| view.fp[p].0).count();
    let s = which.iter().filter(|&&p| view.fp[p].1).count();
    (ratio(e, which.len()), ratio(s, which.len()))
}

/// Mean and std over repeats of `f(view)`.
fn over_repeats(
    p: &Prepared,
    f: impl Fn(&RepeatView) -> Option<f64>,
) -> (Option<f64>, Option<f64>) {
    mean_std(&p.views.iter().map(f).collect::<Vec<_>>())
}

/// The rate tables (mean, std) of issue, paper-any and paper-all, EM and SM.
fn rate_tables(p: &Prepared, k: u32) -> ([EmSm; 3], [EmSm; 3]) {
    let all: Vec<&[usize]> = p.papers.iter().map(|(_, i)| i.as_slice()).collect();
    let ts = thresholds(k);
    let mut mean: [Vec<Option<f64>>; 6] = Default::default();
    let mut std: [Vec<Option<f64>>; 6] = Default::default();
    for &t in &ts {
        let per: Vec<[Option<f64>; 6]> = p.views.iter().map(|v| repeat_rates(v, &all, t)).collect();
        for m in 0..6 {
            let (a, s) = mean_std(&per.iter().map(|r| r[m]).collect::<Vec<_>>());
            mean[m].push(a);
            std[m].push(s);
        }
    }
    let krates = |mut v: Vec<Option<f64>>| {
        let all = v.pop().flatten();
        KRates { at: v, all }
    };
    let pack = |v: [Vec<Option<f64>>; 6]| {
        let [a, b, c, d, e, f] = v;
        [
            EmSm {
                em: krates(a),
                sm: krates(b),
            },
            EmSm {
                em: krates(c),
                sm: krates(d),
            },
            EmSm {
                em: krates(e),
                sm: krates(f),
            },
        ]
    };
    (pack(mean), pack(std))
}

/// Computes one configuration's metrics.
pub(crate) fn compute(data: &Dataset, agent: &str, judge: &str, o: Options) -> ConfigMetrics {
    let k = o.k.max(1);
    let p = prepare(data);
    let ([issue, paper_any, paper_all], [s_issue, s_any, s_all]) = rate_tables(&p, k);
    let fixed: Vec<usize> = (0..p.post_fix_papers.len()).collect();
    let (fe, fe_s) = over_repeats(&p, |v| repeat_fpr(v, &fixed).0);
    let (fs, fs_s) = over_repeats(&p, |v| repeat_fpr(v, &fixed).1);
    ConfigMetrics {
        agent: agent.to_string(),
        judge: judge.to_string(),
        repeats: p.repeats.len(),
        k,
        papers: p.papers.len(),
        issues: data.issues.len(),
        issue,
        paper_any,
        paper_all,
        fpr: Fpr {
            exact: fe,
            exact_or_semantic: fs,
            papers: p.post_fix_papers.len(),
        },
        by_category: by_category(&p, k),
        finding_categories: finding_categories(data),
        taxonomy: taxonomy(data),
        by_venue: by_venue(&p, k),
        cost: cost(data),
        std: Std {
            issue: s_issue,
            paper_any: s_any,
            paper_all: s_all,
            fpr: FprStd {
                exact: fe_s,
                exact_or_semantic: fs_s,
            },
        },
        ci95: bootstrap(&p, k, o),
        status: count(data.runs.iter().map(|r| r.status.as_str())),
        judgments: count(data.runs.iter().filter_map(|r| r.judgment.as_deref())),
    }
}
