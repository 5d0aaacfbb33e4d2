//! The audit report as a document: the configuration × metric table (Table 3), curves,
//! venue, category, FPR, cost, then every paper with its hidden issues, snapshots, each
//! run's top findings and the judge's labels. Every piece of text from the corpus or the
//! agents (issue titles, finding titles, rationales) is untrusted: it goes into the
//! document as text, which escapes it for each format.

use super::chart::{self, Series, PALETTE};
use crate::judgment::Label;
use crate::metrics::compute::{Dataset, RunData};
use crate::metrics::load::Config;
use crate::metrics::{self, pct, pct_std, Metrics};
use reprorun_pipeline::doc::{Align, Block, Cell, Doc, Header, Table};

/// A header of fixed text.
fn h(text: &'static str) -> Header {
    Header::Borrowed(text)
}

/// CSS of the report's own classes.
const CSS: &str = ".exact{color:#2e7d32;font-weight:600}.semantic{color:#b26a00}";

fn table(head: Vec<(Header, Align)>, rows: Vec<Vec<Cell>>) -> Block {
    Block::Table(Table {
        head,
        rows,
        wide: true,
    })
}

const L: Align = Align::Left;
const R: Align = Align::Right;

/// The report document of `configs` (in `--db` order) and their metrics.
pub(crate) fn document(configs: &[Config], m: &Metrics) -> Doc {
    let k = m.configs.first().map_or(10, |c| c.k);
    let mut b = vec![Block::Para(format!(
        "{} configuration(s) on {} papers with {} hidden issues. Headline rates at k = {k}; \
         ± is the sample standard deviation over repeats; FPR counts exact matches on \
         post-fix snapshots. Definitions: spec/audit.md.",
        m.configs.len(),
        m.papers,
        m.issues
    ))];
    b.push(Block::Heading("Configurations".into()));
    b.push(Block::Table(metrics::table3(m)));
    curves(&mut b, m);
    by_venue(&mut b, m);
    by_category(&mut b, m);
    taxonomy(&mut b, m);
    fpr_cost(&mut b, m);
    if let Some(first) = configs.first() {
        papers(&mut b, configs, &first.data, k);
    }
    Doc {
        title: "reprorun audit report".into(),
        css: CSS,
        blocks: b,
    }
}

fn curves(b: &mut Vec<Block>, m: &Metrics) {
    b.push(Block::Heading("Issue SM@k and EM@k".into()));
    let mut series = Vec::new();
    let mut rows = Vec::new();
    for (i, c) in m.configs.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        for (name, rates, dashed) in [("SM", &c.issue.sm, false), ("EM", &c.issue.em, true)] {
            series.push(Series {
                name: format!("{} {name}", c.agent),
                color,
                dashed,
                values: rates.at.clone(),
            });
            let mut row = vec![Cell::new(c.agent.clone()), Cell::new(name)];
            row.extend(rates.at.iter().map(|v| Cell::new(pct(*v))));
            row.push(Cell::new(pct(rates.all)));
            rows.push(row);
        }
    }
    b.push(Block::Chart(chart::lines(
        "Issue SM@k (solid) and EM@k (dashed) per configuration",
        "issues matched",
        &series,
    )));
    let k = m.configs.first().map_or(10, |c| c.k);
    let mut head = vec![(h("config"), L), (h("match"), L)];
    head.extend((1..=k).map(|i| (metrics::header(format!("@{i}")), R)));
    head.push((h("all"), R));
    b.push(table(head, rows));
}

fn by_venue(b: &mut Vec<Block>, m: &Metrics) {
    let rows: Vec<Vec<Cell>> = m
        .configs
        .iter()
        .flat_map(|c| {
            c.by_venue.iter().map(|(venue, v)| {
                vec![
                    Cell::new(c.agent.clone()),
                    Cell::new(venue.clone()),
                    Cell::new(v.papers.to_string()),
                    Cell::new(v.issues.to_string()),
                    Cell::new(pct(v.issue_em)),
                    Cell::new(pct(v.issue_sm)),
                    Cell::new(pct(v.paper_any_sm)),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    b.push(Block::Heading("By venue".into()));
    let k = m.configs.first().map_or(10, |c| c.k);
    b.push(table(
        vec![
            (h("config"), L),
            (h("venue"), L),
            (h("papers"), R),
            (h("issues"), R),
            (metrics::header(format!("Issue EM@{k}")), R),
            (metrics::header(format!("Issue SM@{k}")), R),
            (metrics::header(format!("Paper-any SM@{k}")), R),
        ],
        rows,
    ));
}

fn by_category(b: &mut Vec<Block>, m: &Metrics) {
    let k = m.configs.first().map_or(10, |c| c.k);
    b.push(Block::Heading("Recall by failure category".into()));
    let rows = m
        .configs
        .iter()
        .flat_map(|c| {
            c.by_category.iter().map(|(cat, r)| {
                vec![
                    Cell::new(c.agent.clone()),
                    Cell::new(cat.clone()),
                    Cell::new(r.n.to_string()),
                    Cell::new(pct(r.em)),
                    Cell::new(pct(r.sm)),
                ]
            })
        })
        .collect();
    b.push(table(
        vec![
            (h("config"), L),
            (h("category"), L),
            (h("issues"), R),
            (metrics::header(format!("EM@{k}")), R),
            (metrics::header(format!("SM@{k}")), R),
        ],
        rows,
    ));
    b.push(Block::Heading("Findings by category".into()));
    let rows = m
        .configs
        .iter()
        .flat_map(|c| {
            c.finding_categories.iter().map(|(cat, s)| {
                vec![
                    Cell::new(c.agent.clone()),
                    Cell::new(cat.clone()),
                    Cell::new(s.n.to_string()),
                    Cell::new(pct(Some(s.share))),
                ]
            })
        })
        .collect();
    b.push(table(
        vec![
            (h("config"), L),
            (h("category"), L),
            (h("findings"), R),
            (h("share"), R),
        ],
        rows,
    ));
}

/// The paper's four-way split of the human issues and of each configuration's predictions
/// (its Figures 7–8), with each configuration's recall per class (Figure 9).
fn taxonomy(b: &mut Vec<Block>, m: &Metrics) {
    let Some(first) = m.configs.first() else {
        return;
    };
    let k = first.k;
    b.push(Block::Heading(
        "Taxonomy: human issues and predictions".into(),
    ));
    b.push(Block::Para(
        "The paper's four-way split: crash immediate, crash late, silent wrong setup, silent \
         wrong number. Human issues by their category; predictions (every finding of every \
         valid run) by the issue rules on their text, else by their category and stage \
         (spec/audit.md, \"Metrics\"); recall is Issue SM at k per class."
            .into(),
    ));
    let share = |m: &std::collections::BTreeMap<String, metrics::compute::Share>, key: &str| {
        m.get(key).map_or(0.0, |s| s.share)
    };
    let classes = crate::input::Category::ALL.map(|c| c.as_str());
    let mut series = vec![chart::Bars {
        name: "human issues".into(),
        color: "#616161",
        values: classes
            .iter()
            .map(|c| share(&first.taxonomy.issues, c))
            .collect(),
    }];
    for (i, c) in m.configs.iter().enumerate() {
        series.push(chart::Bars {
            name: format!("{} predictions", c.agent),
            color: PALETTE[i % PALETTE.len()],
            values: classes
                .iter()
                .map(|k| share(&c.taxonomy.findings, k))
                .collect(),
        });
    }
    b.push(Block::Chart(chart::bars(
        "The four-way split of human issues and of each configuration's predictions",
        "share",
        &classes,
        &series,
    )));
    // Human issues, then each configuration's predictions with its recall per class (the
    // configuration's name goes in cells, which are escaped, never in a header).
    let row = |class: &str, s: Option<&metrics::compute::Share>| {
        vec![
            Cell::new(class.to_string()),
            Cell::new(s.map_or(0, |s| s.n).to_string()),
            Cell::new(pct(Some(s.map_or(0.0, |s| s.share)))),
        ]
    };
    let listed = |m: &std::collections::BTreeMap<String, metrics::compute::Share>, other| {
        let mut keys: Vec<&str> = classes.to_vec();
        if m.contains_key(other) {
            keys.push(other);
        }
        keys
    };
    let issues = &first.taxonomy.issues;
    let rows = listed(issues, "unlabelled")
        .into_iter()
        .map(|class| row(class, issues.get(class)))
        .collect();
    b.push(table(
        vec![(h("class"), L), (h("human issues"), R), (h("share"), R)],
        rows,
    ));
    let rows = m
        .configs
        .iter()
        .flat_map(|c| {
            listed(&c.taxonomy.findings, "unclassified")
                .into_iter()
                .map(|class| {
                    let mut r = vec![Cell::new(c.agent.clone())];
                    r.extend(row(class, c.taxonomy.findings.get(class)));
                    r.push(Cell::new(pct(c.by_category.get(class).and_then(|r| r.sm))));
                    r
                })
                .collect::<Vec<_>>()
        })
        .collect();
    b.push(table(
        vec![
            (h("config"), L),
            (h("class"), L),
            (h("predictions"), R),
            (h("share"), R),
            (metrics::header(format!("SM@{k} of its issues")), R),
        ],
        rows,
    ));
}

fn ci(c: Option<[f64; 2]>) -> String {
    c.map_or("n/a".into(), |[lo, hi]| {
        format!("{}–{}", pct(Some(lo)), pct(Some(hi)))
    })
}

fn fpr_cost(b: &mut Vec<Block>, m: &Metrics) {
    b.push(Block::Heading(
        "False positives on post-fix snapshots".into(),
    ));
    let rows = m
        .configs
        .iter()
        .map(|c| {
            vec![
                Cell::new(c.agent.clone()),
                Cell::new(c.fpr.papers.to_string()),
                Cell::new(pct_std(c.fpr.exact, c.std.fpr.exact)),
                Cell::new(pct_std(
                    c.fpr.exact_or_semantic,
                    c.std.fpr.exact_or_semantic,
                )),
            ]
        })
        .collect();
    b.push(table(
        vec![
            (h("config"), L),
            (h("papers"), R),
            (h("FPR exact"), R),
            (h("FPR exact or semantic"), R),
        ],
        rows,
    ));
    b.push(Block::Heading(
        "Bootstrap 95% intervals (papers resampled)".into(),
    ));
    let rows = m
        .configs
        .iter()
        .flat_map(|c| {
            c.ci95.iter().map(|(name, v)| {
                vec![
                    Cell::new(c.agent.clone()),
                    Cell::new(name.clone()),
                    Cell::new(ci(*v)),
                ]
            })
        })
        .collect();
    b.push(table(
        vec![(h("config"), L), (h("statistic"), L), (h("95% CI"), R)],
        rows,
    ));
    b.push(Block::Heading("Cost and run status".into()));
    let num = |x: Option<f64>| x.map_or("n/a".into(), |v| format!("{v:.0}"));
    let rows = m
        .configs
        .iter()
        .map(|c| {
            let status: Vec<String> = c.status.iter().map(|(s, n)| format!("{s} {n}")).collect();
            vec![
                Cell::new(c.agent.clone()),
                Cell::new(c.cost.runs.to_string()),
                Cell::new(c.cost.mean_usd.map_or("n/a".into(), |u| format!("{u:.2}"))),
                Cell::new(num(c.cost.mean_input_tokens)),
                Cell::new(num(c.cost.mean_cached_input_tokens)),
                Cell::new(num(c.cost.mean_output_tokens)),
                Cell::new(status.join(", ")),
            ]
        })
        .collect();
    b.push(table(
        vec![
            (h("config"), L),
            (h("runs"), R),
            (h("$/run"), R),
            (h("input tokens"), R),
            (h("cached input tokens"), R),
            (h("output tokens"), R),
            (h("status"), L),
        ],
        rows,
    ));
}

/// Per paper: its snapshots, hidden issues, and each configuration's runs on them.
fn papers(b: &mut Vec<Block>, configs: &[Config], corpus: &Dataset, k: u32) {
    for p in &corpus.papers {
        let issues: Vec<_> = corpus
            .issues
            .iter()
            .filter(|i| i.paper_id == p.paper_id)
            .collect();
        let groups: Vec<_> = corpus
            .groups
            .iter()
            .filter(|g| g.paper_id == p.paper_id)
            .collect();
        let mut title = format!("Paper {}", p.paper_id);
        if let Some(t) = &p.title {
            title.push_str(&format!(": {t}"));
        }
        if let Some(v) = p.venue_key() {
            title.push_str(&format!(" ({v})"));
        }
        b.push(Block::Heading(title));
        let rows = issues
            .iter()
            .map(|i| {
                vec![
                    Cell::new(i.id.clone()),
                    Cell::new(i.title.clone()),
                    Cell::new(i.target.clone()),
                    Cell::new(i.category.map_or("", |c| c.as_str())),
                    Cell::new(i.group_id.clone()),
                    Cell::new(i.commit.clone()),
                    Cell::new(i.rule.clone()),
                    Cell::new(i.post_fix_group_id.clone().unwrap_or_default()),
                ]
            })
            .collect();
        b.push(table(
            vec![
                (h("hidden issue"), L),
                (h("title"), L),
                (h("target"), L),
                (h("category"), L),
                (h("snapshot"), L),
                (h("commit"), L),
                (h("grounding rule"), L),
                (h("post-fix snapshot"), L),
            ],
            rows,
        ));
        for g in groups {
            let role = if g.post_fix_for.is_empty() {
                "pre-fix".to_string()
            } else {
                format!("post-fix of {}", g.post_fix_for.join(", "))
            };
            for c in configs {
                for r in c.data.runs.iter().filter(|r| r.group_id == g.group_id) {
                    b.push(Block::Para(format!(
                        "{} on snapshot {} (commit {}, {role}), repeat {}: run {}, judgment ({}) {}.",
                        c.agent,
                        g.group_id,
                        g.commit,
                        r.repeat,
                        r.status,
                        c.judge,
                        r.judgment.as_deref().unwrap_or("missing")
                    )));
                    if let Some(t) = run_table(r, k) {
                        b.push(t);
                    }
                }
            }
        }
    }
}

/// A run's top `k` findings with the judge's label for each hidden issue (and rationale).
fn run_table(r: &RunData, k: u32) -> Option<Block> {
    if r.findings.is_empty() {
        return None;
    }
    let rows = r
        .findings
        .iter()
        .take(k as usize)
        .enumerate()
        .map(|(i, f)| {
            let own: Vec<_> = r
                .labels
                .iter()
                .filter(|(_, idx, _)| *idx as usize == i)
                .collect();
            let labels: Vec<String> = own
                .iter()
                .map(
                    |(issue, idx, label)| match r.rationales.get(&(issue.clone(), *idx)) {
                        Some(why) => format!("{issue}: {} ({why})", label.as_str()),
                        None => format!("{issue}: {}", label.as_str()),
                    },
                )
                .collect();
            let has = |l: Label| own.iter().any(|(_, _, x)| *x == l);
            let class = if has(Label::Exact) {
                Some("exact")
            } else if has(Label::Semantic) {
                Some("semantic")
            } else {
                None
            };
            let label_cell = match class {
                Some(cl) => Cell::classed(labels.join("; "), cl),
                None => Cell::new(labels.join("; ")),
            };
            vec![
                Cell::new((i + 1).to_string()),
                Cell::new(f.title.clone()),
                Cell::new(f.category.clone()),
                label_cell,
            ]
        })
        .collect();
    Some(table(
        vec![
            (h("rank"), R),
            (h("finding"), L),
            (h("category"), L),
            (h("judge's labels"), L),
        ],
        rows,
    ))
}
