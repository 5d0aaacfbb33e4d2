//! Measuring a judge against people (the ReproRepo paper's judge validation):
//! `audit sample` draws (finding, issue) pairs per judge label, the label hidden, for hand
//! labelling — each distinct pair once, however many repeats gave it; `audit agreement`
//! compares the hand labels with the judge's: raw agreement, precision and recall of the
//! match decision (exact or semantic vs none) as labelled, the same weighted back to the
//! study's pairs per judge label (a per-label sample over-represents rare labels), and the
//! 3×3 confusion table.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::JudgeError;
use crate::corpus::Corpus;
use crate::judgment::{Label, PairLabel};
use crate::run::store::Store;

/// `reprorun audit sample` options.
#[derive(Debug, clap::Args)]
pub struct SampleArgs {
    /// The study.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// The judge whose labels are sampled (`builtin`, `codex`, `claude-code`, `cmd`).
    #[arg(long, value_name = "NAME")]
    pub judge: String,
    /// Pairs drawn per judge label (exact, semantic, none), at most.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub per_label: usize,
    /// Where the pairs go (JSON Lines); the judge's labels go to OUT.key beside it.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The draw: the same seed draws the same pairs.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed: u64,
}

/// `reprorun audit agreement` options.
#[derive(Debug, clap::Args)]
pub struct AgreementArgs {
    /// The study.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// The judge compared (`builtin`, `codex`, `claude-code`, `cmd`).
    #[arg(long, value_name = "NAME")]
    pub judge: String,
    /// Hand labels, JSON Lines: {"pair_id", "label"} (from `audit sample`), or
    /// {"group_id", "repeat", "hidden_issue_id", "finding_index", "label"}.
    #[arg(long, value_name = "FILE")]
    pub labels: PathBuf,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A pair's stable id: the first 16 hex digits of the sha256 of its key.
pub(crate) fn pair_id(l: &PairLabel) -> String {
    let key = format!(
        "{}\n{}\n{}\n{}",
        l.group_id, l.repeat, l.hidden_issue_id, l.finding_index
    );
    reprorun_pipeline::store::sha256_hex(key.as_bytes())[..16].to_string()
}

/// The order of the draw: a hash of the seed and the pair id (the same seed, the same
/// pairs; a hash instead of a PRNG crate, whose streams may change between versions).
fn draw_key(seed: u64, id: &str) -> String {
    reprorun_pipeline::store::sha256_hex(format!("{seed}\n{id}").as_bytes())
}

/// The pairs a sample draws from: one per (group, hidden issue, finding), the finding by its
/// content (`content`: its JSON as stored; `None` when its run has none, then the pair is
/// its own). A repeat that gives the same finding for the same issue adds no pair: the
/// first repeat's is kept.
pub(crate) fn distinct(
    labels: &[PairLabel],
    content: impl Fn(&PairLabel) -> Option<String>,
) -> Vec<&PairLabel> {
    let mut sorted: Vec<&PairLabel> = labels.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.group_id, a.repeat, &a.hidden_issue_id, a.finding_index).cmp(&(
            &b.group_id,
            b.repeat,
            &b.hidden_issue_id,
            b.finding_index,
        ))
    });
    let mut seen = BTreeSet::new();
    sorted
        .into_iter()
        .filter(|l| match content(l) {
            Some(c) => seen.insert((l.group_id.clone(), l.hidden_issue_id.clone(), c)),
            None => true,
        })
        .collect()
}

/// Up to `per_label` pairs of each label, drawn by `seed`; sorted by pair id (an order that
/// tells nothing of the label).
pub(crate) fn draw<'a>(
    labels: &[&'a PairLabel],
    per_label: usize,
    seed: u64,
) -> Vec<&'a PairLabel> {
    let mut picked = Vec::new();
    for want in [Label::Exact, Label::Semantic, Label::None] {
        let mut of: Vec<(String, &PairLabel)> = labels
            .iter()
            .copied()
            .filter(|l| l.label == want)
            .map(|l| (draw_key(seed, &pair_id(l)), l))
            .collect();
        of.sort_by(|a, b| a.0.cmp(&b.0));
        picked.extend(of.into_iter().take(per_label).map(|(_, l)| l));
    }
    picked.sort_by_key(|l| pair_id(l));
    picked
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> JudgeError + '_ {
    move |source| JudgeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The study's labels of `judge`; an error when there are none.
fn judge_labels(store: &Store, db: &Path, judge: &str) -> Result<Vec<PairLabel>, JudgeError> {
    let labels = store.pair_labels(judge)?;
    if labels.is_empty() {
        return Err(JudgeError::Usage(format!(
            "--db {}: no pair labels of judge {judge:?} (run `reprorun audit judge --judge {judge}` first)",
            db.display()
        )));
    }
    Ok(labels)
}

/// Runs `reprorun audit sample`.
pub(crate) fn sample(args: SampleArgs) -> Result<(), JudgeError> {
    let store = Store::open(&args.db, false)?;
    let labels = judge_labels(&store, &args.db, &args.judge)?;
    let corpus_dir = store.db.meta("corpus")?.unwrap_or_default();
    let corpus = Corpus::open(Path::new(&corpus_dir))?;
    let hidden: BTreeMap<String, super::task::Hidden> =
        super::task::hidden_issues(&corpus.manifest)
            .map_err(|why| JudgeError::Usage(format!("corpus {corpus_dir}: {why}")))?
            .into_iter()
            .map(|h| (h.id.clone(), h))
            .collect();
    let findings = run_findings(&store)?;
    let content = |l: &PairLabel| finding_of(&findings, l).map(|f| f.to_string());
    let pairs = distinct(&labels, content);
    let (mut out, mut key) = (Vec::new(), Vec::new());
    let mut counts = BTreeMap::<&str, usize>::new();
    for l in draw(&pairs, args.per_label, args.seed) {
        let finding = finding_of(&findings, l).cloned().unwrap_or(Value::Null);
        let issue = hidden.get(&l.hidden_issue_id);
        let id = pair_id(l);
        let row = json!({
            "pair_id": id,
            "hidden_issue_id": l.hidden_issue_id,
            "issue_title": issue.map(|h| h.title.as_str()),
            "issue_body": issue.map(|h| h.body.as_str()),
            "finding_id": finding.get("finding_id"),
            "finding_index": l.finding_index,
            "finding": finding,
            "group_id": l.group_id,
            "repeat": l.repeat,
        });
        writeln!(out, "{row}").map_err(io(&args.out))?;
        writeln!(key, "{}", json!({"pair_id": id, "label": l.label.as_str()}))
            .map_err(io(&args.out))?;
        *counts.entry(l.label.as_str()).or_default() += 1;
    }
    let mut key_path = args.out.clone().into_os_string();
    key_path.push(".key");
    let key_path = PathBuf::from(key_path);
    std::fs::write(&args.out, out).map_err(io(&args.out))?;
    std::fs::write(&key_path, key).map_err(io(&key_path))?;
    let c: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    eprintln!(
        "reprorun: sample: {} pairs ({}) of {} distinct pairs ({} labelled over the repeats) to {}; the judge's labels in {}",
        counts.values().sum::<usize>(),
        c.join(", "),
        pairs.len(),
        labels.len(),
        args.out.display(),
        key_path.display()
    );
    Ok(())
}

/// Every run's validated findings as JSON, by (group, repeat); a run without valid
/// findings has none.
type RunFindings = BTreeMap<(String, u32), Vec<Value>>;

fn run_findings(store: &Store) -> Result<RunFindings, JudgeError> {
    Ok(store
        .rows()?
        .into_iter()
        .map(|r| {
            let list = r
                .findings_sha256
                .as_deref()
                .and_then(|sha| store.db.log(sha))
                .and_then(|b| crate::findings::validate(&b).ok())
                .map(|f| f.findings.iter().map(|f| json!(f)).collect())
                .unwrap_or_default();
            ((r.group_id, r.repeat), list)
        })
        .collect())
}

fn finding_of<'a>(findings: &'a RunFindings, l: &PairLabel) -> Option<&'a Value> {
    findings
        .get(&(l.group_id.clone(), l.repeat))?
        .get(l.finding_index as usize)
}

/// Human (rows) × judge (columns) counts, in the order exact, semantic, none.
pub(crate) type Confusion = [[u64; 3]; 3];

fn idx(l: Label) -> usize {
    match l {
        Label::Exact => 0,
        Label::Semantic => 1,
        Label::None => 2,
    }
}

/// What `agreement` reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Agreement {
    pub(crate) pairs: u64,
    pub(crate) agree: u64,
    /// `agree / pairs`.
    pub(crate) raw_agreement: Option<f64>,
    /// Pairs both call a match (exact or semantic).
    pub(crate) match_both: u64,
    pub(crate) match_judge: u64,
    pub(crate) match_human: u64,
    /// `match_both / match_judge`.
    pub(crate) precision: Option<f64>,
    /// `match_both / match_human`.
    pub(crate) recall: Option<f64>,
    pub(crate) confusion: Confusion,
    /// The study's distinct pairs per judge label (exact, semantic, none): the population
    /// the hand-labelled pairs were drawn from.
    pub(crate) population: [u64; 3],
    /// Precision and recall with each hand-labelled pair weighted by its judge label's
    /// pairs in the study over its hand-labelled pairs: the study-wide estimate from a
    /// sample stratified by judge label; equal to the plain figures when every pair is
    /// labelled. `None` when a label the judge gave has no hand-labelled pair.
    pub(crate) weighted_precision: Option<f64>,
    pub(crate) weighted_recall: Option<f64>,
}

/// The agreement figures of a confusion table, the hand-labelled pairs drawn from
/// `population` (the study's pairs per judge label).
pub(crate) fn agreement_of(c: &Confusion, population: [u64; 3]) -> Agreement {
    let pairs: u64 = c.iter().flatten().sum();
    let agree: u64 = (0..3).map(|i| c[i][i]).sum();
    let sum = |rows: &[usize], cols: &[usize]| -> u64 {
        rows.iter()
            .flat_map(|r| cols.iter().map(move |k| c[*r][*k]))
            .sum()
    };
    let (m, all) = ([0, 1], [0, 1, 2]);
    let match_both = sum(&m, &m);
    let match_judge = sum(&all, &m);
    let match_human = sum(&m, &all);
    let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
    let w = weighted(c, population);
    Agreement {
        pairs,
        agree,
        raw_agreement: ratio(agree, pairs),
        match_both,
        match_judge,
        match_human,
        precision: ratio(match_both, match_judge),
        recall: ratio(match_both, match_human),
        confusion: *c,
        population,
        weighted_precision: w.and_then(|w| w.0),
        weighted_recall: w.and_then(|w| w.1),
    }
}

/// Precision and recall with each cell weighted by its judge column's population over its
/// labelled pairs; `None` when a column with a population has no labelled pair.
fn weighted(c: &Confusion, population: [u64; 3]) -> Option<(Option<f64>, Option<f64>)> {
    let mut w = [0.0; 3];
    for j in 0..3 {
        let labelled: u64 = (0..3).map(|h| c[h][j]).sum();
        if labelled == 0 {
            if population[j] > 0 {
                return None;
            }
            continue;
        }
        w[j] = population[j] as f64 / labelled as f64;
    }
    let cell = |h: usize, j: usize| c[h][j] as f64 * w[j];
    let (m, all) = ([0, 1], [0, 1, 2]);
    let sum = |rows: &[usize], cols: &[usize]| -> f64 {
        rows.iter()
            .flat_map(|r| cols.iter().map(move |k| cell(*r, *k)))
            .sum()
    };
    let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
    let both = sum(&m, &m);
    Some((ratio(both, sum(&all, &m)), ratio(both, sum(&m, &all))))
}

/// The judge's label of each hand-labelled pair: `(human, judge)` per line.
fn pairs_of(
    text: &str,
    path: &Path,
    labels: &[PairLabel],
    judge: &str,
) -> Result<Vec<(Label, Label)>, JudgeError> {
    let by_id: BTreeMap<String, &PairLabel> = labels.iter().map(|l| (pair_id(l), l)).collect();
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad =
            |why: String| JudgeError::Usage(format!("{} line {}: {why}", path.display(), n + 1));
        let v: Value = serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
        let human = v["label"].as_str().and_then(Label::parse).ok_or_else(|| {
            bad(format!(
                "label {} is not exact, semantic or none",
                v["label"]
            ))
        })?;
        let id = match v["pair_id"].as_str() {
            Some(id) => id.to_string(),
            None => {
                let (Some(g), Some(r), Some(i), Some(f)) = (
                    v["group_id"].as_str(),
                    v["repeat"].as_u64(),
                    v["hidden_issue_id"].as_str(),
                    v["finding_index"].as_u64(),
                ) else {
                    return Err(bad(
                        "give pair_id, or group_id, repeat, hidden_issue_id and finding_index"
                            .into(),
                    ));
                };
                pair_id(&PairLabel {
                    group_id: g.into(),
                    repeat: r as u32,
                    judge: judge.into(),
                    hidden_issue_id: i.into(),
                    finding_index: f as u32,
                    label: human,
                })
            }
        };
        let Some(l) = by_id.get(&id) else {
            return Err(bad(format!(
                "pair {id} is not a pair judge {judge} labelled"
            )));
        };
        if let Some(first) = seen.insert(id.clone(), n + 1) {
            return Err(bad(format!(
                "pair {id} is labelled on line {first} already"
            )));
        }
        out.push((human, l.label));
    }
    Ok(out)
}

/// Runs `reprorun audit agreement`.
pub(crate) fn agreement(args: AgreementArgs) -> Result<(), crate::AuditError> {
    let store = Store::open(&args.db, false).map_err(JudgeError::from)?;
    let labels = judge_labels(&store, &args.db, &args.judge)?;
    let text = std::fs::read_to_string(&args.labels).map_err(io(&args.labels))?;
    let pairs = pairs_of(&text, &args.labels, &labels, &args.judge)?;
    if pairs.is_empty() {
        return Err(JudgeError::Usage(format!("{}: no labels", args.labels.display())).into());
    }
    let mut c: Confusion = [[0; 3]; 3];
    for (h, j) in pairs {
        c[idx(h)][idx(j)] += 1;
    }
    let findings = run_findings(&store)?;
    let mut population = [0; 3];
    for l in distinct(&labels, |l| finding_of(&findings, l).map(|f| f.to_string())) {
        population[idx(l.label)] += 1;
    }
    let a = agreement_of(&c, population);
    let print = |s: String| writeln!(std::io::stdout(), "{s}").map_err(crate::AuditError::Print);
    if args.json {
        return print(format!(
            "{:#}",
            json!({"judge": args.judge, "agreement": a})
        ));
    }
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.1}%", 100.0 * x));
    let [pe, ps, pn] = a.population;
    let mut s = format!(
        "judge {} against {} hand labels\nraw agreement  {} ({}/{})\nmatch (exact or semantic vs none): precision {} ({}/{}), recall {} ({}/{})\nweighted to the study's {} distinct pairs (judge: exact {pe}, semantic {ps}, none {pn}): precision {}, recall {}\n\nhuman \\ judge   exact  semantic      none\n",
        args.judge,
        a.pairs,
        pct(a.raw_agreement),
        a.agree,
        a.pairs,
        pct(a.precision),
        a.match_both,
        a.match_judge,
        pct(a.recall),
        a.match_both,
        a.match_human,
        pe + ps + pn,
        pct(a.weighted_precision),
        pct(a.weighted_recall),
    );
    for (i, name) in ["exact", "semantic", "none"].iter().enumerate() {
        s.push_str(&format!(
            "{name:<14}{:>7}{:>10}{:>10}\n",
            c[i][0], c[i][1], c[i][2]
        ));
    }
    print(s.trim_end().to_string())
}
