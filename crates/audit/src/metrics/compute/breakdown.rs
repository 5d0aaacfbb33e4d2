//! The breakdowns beside the headline rates: recall by category and by venue/year, the
//! findings' category mix, cost and tokens.

use super::*;

pub(super) fn count<'a>(items: impl Iterator<Item = &'a str>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for s in items {
        *m.entry(s.to_string()).or_insert(0) += 1;
    }
    m
}

/// Recall at k per issue category; every category is listed.
pub(super) fn by_category(p: &Prepared, k: u32) -> BTreeMap<String, Recall> {
    Category::ALL
        .iter()
        .map(|&c| {
            let idx: Vec<usize> = (0..p.data.issues.len())
                .filter(|&i| p.data.issues[i].category == Some(c))
                .collect();
            let rate = |em: bool| {
                over_repeats(p, |v| {
                    let hit = idx
                        .iter()
                        .filter(|&&i| within(if em { v.ranks[i].0 } else { v.ranks[i].1 }, Some(k)))
                        .count();
                    ratio(hit, idx.len())
                })
                .0
            };
            let r = Recall {
                em: rate(true),
                sm: rate(false),
                n: idx.len(),
            };
            (c.as_str().to_string(), r)
        })
        .collect()
}

/// Issue EM/SM and paper-any SM at k per venue (and year) of the pairs that carry one.
pub(super) fn by_venue(p: &Prepared, k: u32) -> BTreeMap<String, VenueRecall> {
    let mut groups: BTreeMap<String, Vec<&[usize]>> = BTreeMap::new();
    for (paper, issues) in &p.papers {
        let key = p
            .data
            .papers
            .iter()
            .find(|q| q.paper_id == *paper)
            .and_then(PaperInfo::venue_key);
        if let Some(key) = key {
            groups.entry(key).or_default().push(issues);
        }
    }
    groups
        .into_iter()
        .map(|(key, papers)| {
            let at = |m: usize| over_repeats(p, |v| repeat_rates(v, &papers, Some(k))[m]).0;
            let r = VenueRecall {
                issue_em: at(0),
                issue_sm: at(1),
                paper_any_sm: at(3),
                issues: papers.iter().map(|i| i.len()).sum(),
                papers: papers.len(),
            };
            (key, r)
        })
        .collect()
}

/// The findings' own `category` over every valid run, with each one's share.
pub(super) fn finding_categories(data: &Dataset) -> BTreeMap<String, Share> {
    shares(count(
        data.runs
            .iter()
            .filter(|r| r.status == "ok")
            .flat_map(|r| r.findings.iter().map(|f| f.category.as_str())),
    ))
}

/// The four-way split of the issues and of the valid runs' findings.
pub(super) fn taxonomy(data: &Dataset) -> Taxonomy {
    let split = |items: Vec<Option<Category>>, other: &str| {
        let mut counts: BTreeMap<String, u64> = Category::ALL
            .iter()
            .map(|c| (c.as_str().to_string(), 0))
            .collect();
        for c in items {
            *counts
                .entry(c.map_or(other, |c| c.as_str()).to_string())
                .or_insert(0) += 1;
        }
        shares(counts)
    };
    Taxonomy {
        issues: split(
            data.issues.iter().map(|i| i.category).collect(),
            "unlabelled",
        ),
        findings: split(
            data.runs
                .iter()
                .filter(|r| r.status == "ok")
                .flat_map(|r| r.findings.iter().map(|f| f.taxonomy))
                .collect(),
            "unclassified",
        ),
    }
}

/// Each count with its share of their total (0 when there are none).
fn shares(counts: BTreeMap<String, u64>) -> BTreeMap<String, Share> {
    let total: u64 = counts.values().sum();
    counts
        .into_iter()
        .map(|(c, n)| {
            let share = if total > 0 {
                n as f64 / total as f64
            } else {
                0.0
            };
            (c, Share { n, share })
        })
        .collect()
}

pub(super) fn cost(data: &Dataset) -> Cost {
    let mean = |f: &dyn Fn(&RunData) -> Option<f64>| {
        mean_std(&data.runs.iter().map(f).collect::<Vec<_>>()).0
    };
    Cost {
        runs: data.runs.len(),
        mean_usd: mean(&|r| r.cost_usd),
        mean_input_tokens: mean(&|r| Some(r.input_tokens as f64)),
        mean_cached_input_tokens: mean(&|r| Some(r.cached_input_tokens as f64)),
        mean_output_tokens: mean(&|r| Some(r.output_tokens as f64)),
    }
}
