//! The real corpus of `reprorun audit` (`images/audit-real/`), all 27 repositories from their
//! committed bundles, through what `images/audit-real/demo.sh` runs, offline: snapshot, the
//! built-in auditor, the built-in judge, metrics, report (with the four-way taxonomy of the
//! human issues and of the predictions), the figures against the hand labels per half, the
//! judge's validation as the paper samples it and over all pairs, and the keyword-stuffing
//! agent. Checks that every figure is computed and that the hand labels still name the
//! auditor's findings; never a tuned value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::audit::SNAPSHOT_BUILT_INPUT;
use crate::common::*;

fn recipe_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("images/audit-real")
}

#[test]
fn the_real_corpus_runs_end_to_end_offline_and_its_figures_are_computed() {
    require!(Need::Root, Need::Tool("git"), Need::Tool("python3"));
    let work = Work::new();
    let o = Command::new(recipe_dir().join("demo.sh"))
        .arg(work.path().join("demo"))
        .env("REPRORUN", BIN)
        .env_remove("ONLY")
        .output()
        .expect("run images/audit-real/demo.sh");
    let out = stdout(&o);
    assert!(o.status.success(), "demo.sh: {out}\n{}", stderr(&o));
    for stage in ["build", "snapshot", "run", "judge", "report"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("stage {stage} ")) && l.contains(" s ")),
            "no time and disk for {stage}: {out}"
        );
    }
    let papers = std::fs::read_to_string(recipe_dir().join("pairs.jsonl"))
        .expect("pairs.jsonl")
        .lines()
        .count();
    assert!(out.contains(&format!("papers: {papers}\n")), "{out}");
    for half in ["tuning", "held-out"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{half}: ")))
            .unwrap_or_else(|| panic!("no figures for the {half} half: {out}"));
        for figure in [
            "judge_match_precision",
            "judge_match_recall",
            "auditor_precision_at_1",
            "issue_sm10_hand",
            "issue_sm10_judge",
        ] {
            assert!(line.contains(figure), "{figure} missing: {line}");
        }
        // Every rank-1 finding and every pair of the subset is hand-labelled: a change of
        // the auditor's output must come with new labels.
        assert!(line.contains("unlabelled_pairs 0;"), "{line}");
        assert!(line.contains("unlabelled_rank1 0;"), "{line}");
        let p1 = line
            .split("auditor_precision_at_1 ")
            .nth(1)
            .unwrap_or_default();
        assert!(
            p1.contains("% ("),
            "precision at rank 1 not computed: {line}"
        );
    }
    // The judge against the hand labels, as the paper samples (up to 50 pairs per judge
    // label) and over every pair; each with the estimate weighted back to the study.
    let sampled = section(&out, "-- sampled", "-- all pairs");
    let all = section(&out, "-- all pairs", "== keyword stuffing");
    for (name, text) in [("sampled", sampled), ("all pairs", all)] {
        assert!(
            text.contains("match (exact or semantic vs none): precision ")
                && text.contains("weighted to the study's "),
            "{name}: {text}"
        );
    }
    let labelled = |text: &str| -> u64 {
        text.split("against ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        labelled(sampled) > 0 && labelled(sampled) <= labelled(all),
        "the sample is part of the hand-labelled pairs: {sampled}\n{all}"
    );
    // Both the honest auditor and the stuffing agent are measured, the stuffing agent's
    // pairs also against hand labels (every pair of it labelled, as the auditor's).
    assert!(out.contains("| builtin |"), "{out}");
    assert!(out.contains("| cmd |"), "{out}");
    let stuffing = section(
        &out,
        "== the stuffing agent against the hand labels",
        "report: ",
    );
    for name in ["-- stuffing, sampled", "-- stuffing, all pairs"] {
        let text = section(stuffing, name, "weighted to the study's");
        assert!(text.contains("precision "), "{name}: {stuffing}");
    }
    for half in ["tuning", "held-out"] {
        assert!(
            stuffing.lines().any(|l| l.starts_with(&format!("{half}: "))
                && l.contains("judge_match_precision ")
                && l.contains("unlabelled_pairs 0;")),
            "{half}: {stuffing}"
        );
    }
    let report =
        std::fs::read_to_string(work.path().join("demo/report/report.md")).expect("report.md");
    assert!(
        report.contains("## Taxonomy: human issues and predictions"),
        "{report}"
    );
    // The human issues' split is the hand labels' (issues/*.json, reproducibility issues).
    for (class, n) in hand_categories() {
        let row = format!("| {} | {n} | ", class.replace('_', "\\_"));
        assert!(report.contains(&row), "{row} not in the report: {report}");
    }
}

/// The text of `out` from the line `from` to the line `to`.
fn section<'a>(out: &'a str, from: &str, to: &str) -> &'a str {
    let start = out.find(from).unwrap_or_else(|| panic!("no {from}: {out}"));
    let end = out[start..].find(to).map_or(out.len(), |e| start + e);
    &out[start..end]
}

/// The reproducibility issues of `issues/` per hand-labelled category.
fn hand_categories() -> BTreeMap<String, u64> {
    let mut n = BTreeMap::new();
    for class in [
        "crash_immediate",
        "crash_late",
        "silent_wrong_setup",
        "silent_wrong_number",
    ] {
        n.insert(class.to_string(), 0);
    }
    let dir = recipe_dir().join("issues");
    for e in std::fs::read_dir(&dir).expect("issues/") {
        let text = std::fs::read_to_string(e.expect("entry").path()).expect("an issues file");
        let v: serde_json::Value = serde_json::from_str(&text).expect("issues JSON");
        for i in v.as_array().expect("an array of issues") {
            if i["reproducibility"] == true {
                if let Some(c) = i["category"].as_str() {
                    *n.entry(c.to_string()).or_insert(0) += 1;
                }
            }
        }
    }
    n
}

/// The built-in judge's match precision and recall on the held-out half (`split.tsv`: 16
/// repositories, 25 issues), per agent and pooled, as (numerator, denominator) pairs: what
/// this version measured (spec/audit.md, "Held-out, blind"), against hand labels committed
/// before the judge first ran on these pairs. A judge that matches fewer true pairs, or more
/// false ones, fails here.
type Fraction = (u64, u64);
/// An agent, its database here, its precision floor and its recall floor.
type Floors = (&'static str, &'static str, Fraction, Fraction);
const HELD_OUT_FLOORS: [Floors; 3] = [
    ("built-in auditor", "audit.db", (4, 5), (4, 4)),
    ("stuffing agent", "gaming.db", (3, 7), (3, 3)),
    ("blind reader", "blind.db", (12, 16), (12, 20)),
];
/// The three agents' held-out pairs together.
const HELD_OUT_POOLED: (Fraction, Fraction) = ((19, 28), (19, 27));
/// The built-in auditor's precision at rank 1 on the held-out half (real blockers among the
/// 24 labelled rank-1 findings).
const HELD_OUT_AUDITOR_P1: Fraction = (7, 24);
/// The keyword-stuffing agent's Issue SM@10 by the judge on the held-out half, at most.
const HELD_OUT_STUFFING_SM10_CEILING: Fraction = (7, 25);

#[test]
fn the_judge_and_the_auditor_keep_their_held_out_figures() {
    require!(Need::Root, Need::Tool("git"), Need::Tool("python3"));
    let work = Work::new();
    let dir = work.path();
    let held_out = held_out_papers();
    assert!(held_out.len() >= 16, "{held_out:?}");
    build_and_snapshot(dir, &held_out);
    let here = recipe_dir();
    let agents = [
        ("audit.db", None),
        (
            "gaming.db",
            Some((here.join("gaming"), "python3 /opt/agent/stuff.py")),
        ),
        (
            "blind.db",
            Some((here.join("blind"), "python3 /opt/agent/agent.py")),
        ),
    ];
    let mut pooled = [0u64; 3]; // true, false and missed matches
    for ((db, agent), (name, _, p_floor, r_floor)) in agents.into_iter().zip(HELD_OUT_FLOORS) {
        let mut args = vec![
            "audit",
            "run",
            "--corpus",
            "corpus",
            "--db",
            db,
            "--repeats",
            "1",
        ];
        let root;
        match &agent {
            None => args.extend(["--agent", "builtin"]),
            Some((dir, cmd)) => {
                root = dir.to_str().expect("a UTF-8 path").to_string();
                args.extend(["--agent-root", root.as_str(), "--agent-cmd", cmd]);
            }
        }
        run(&mut bin(dir, &args), "audit run");
        run(
            &mut bin(dir, &["audit", "judge", "--db", db]),
            "audit judge",
        );
        let figures = run(
            Command::new("python3")
                .arg(recipe_dir().join("figures.py"))
                .args([db, "corpus", "--json"])
                .current_dir(dir),
            "figures.py",
        );
        let v: serde_json::Value = serde_json::from_str(&figures).expect("figures.py --json");
        let h = &v["held-out"];
        // Every pair is hand-labelled, and each agent has pairs to judge.
        assert_eq!(h["unlabelled_pairs"], 0, "{name}: {figures}");
        assert!(
            h["hand_labelled_pairs"].as_u64() > Some(100),
            "{name}: {figures}"
        );
        let (tp, judged) = at_least(h, "judge_match_precision", p_floor, name);
        let (_, hand) = at_least(h, "judge_match_recall", r_floor, name);
        pooled[0] += tp;
        pooled[1] += judged - tp;
        pooled[2] += hand - tp;
        if db == "gaming.db" {
            // Keyword stuffing gains nothing: its Issue SM@10 by the judge stays at most what
            // was measured.
            let (a, b) = fraction(h["issue_sm10_judge"].as_str().unwrap_or_default())
                .unwrap_or_else(|| panic!("stuffing SM@10 not computed: {figures}"));
            let (c, d) = HELD_OUT_STUFFING_SM10_CEILING;
            assert!(
                a * d <= c * b,
                "the stuffing agent gained: {a}/{b} above {c}/{d}"
            );
        }
        if agent.is_none() {
            assert_eq!(h["unlabelled_rank1"], 0, "{figures}");
            at_least(h, "auditor_precision_at_1", HELD_OUT_AUDITOR_P1, name);
        }
    }
    let [tp, fp, missed] = pooled;
    let (p, r) = HELD_OUT_POOLED;
    assert!(
        tp * p.1 >= p.0 * (tp + fp) && tp * r.1 >= r.0 * (tp + missed),
        "pooled {tp} true, {fp} false, {missed} missed: below {p:?} / {r:?}"
    );
}

/// The built-in judge on the tuning half's blind-reader pairs (issue 46: 56 pairs, 6 hand
/// matches, labelled before the judge ran on them; the judge's rules for version pins,
/// dead checkpoint links, mixed precision and unreached results were made from these), and
/// the keyword-stuffing agent there: the judge keeps what the rules gained, and the stuffing
/// agent gains nothing from them (its Issue SM@10 by the judge stays at 3 of 13 issues).
const TUNING_BLIND_FLOORS: (Fraction, Fraction) = ((5, 5), (5, 6));
const TUNING_STUFFING_SM10_CEILING: Fraction = (3, 13);

#[test]
fn the_judge_keeps_its_tuning_figures_and_the_stuffing_agent_gains_nothing() {
    require!(Need::Root, Need::Tool("git"), Need::Tool("python3"));
    let work = Work::new();
    let dir = work.path();
    let tuning = papers_of("tuning");
    assert!(tuning.len() >= 11, "{tuning:?}");
    build_and_snapshot(dir, &tuning);
    let here = recipe_dir();
    let mut figures = BTreeMap::new();
    for (db, root, cmd) in [
        (
            "blind.db",
            here.join("blind"),
            "python3 /opt/agent/agent.py",
        ),
        (
            "gaming.db",
            here.join("gaming"),
            "python3 /opt/agent/stuff.py",
        ),
    ] {
        let root = root.to_str().expect("a UTF-8 path").to_string();
        let args = [
            "audit",
            "run",
            "--corpus",
            "corpus",
            "--db",
            db,
            "--repeats",
            "1",
            "--agent-root",
        ];
        let mut c = bin(dir, &args);
        c.args([root.as_str(), "--agent-cmd", cmd]);
        run(&mut c, "audit run");
        run(
            &mut bin(dir, &["audit", "judge", "--db", db]),
            "audit judge",
        );
        let out = run(
            Command::new("python3")
                .arg(here.join("figures.py"))
                .args([db, "corpus", "--json"])
                .current_dir(dir),
            "figures.py",
        );
        let v: serde_json::Value = serde_json::from_str(&out).expect("figures.py --json");
        assert_eq!(v["tuning"]["unlabelled_pairs"], 0, "{db}: {out}");
        figures.insert(db, v["tuning"].clone());
    }
    let blind = &figures["blind.db"];
    at_least(
        blind,
        "judge_match_precision",
        TUNING_BLIND_FLOORS.0,
        "blind reader",
    );
    at_least(
        blind,
        "judge_match_recall",
        TUNING_BLIND_FLOORS.1,
        "blind reader",
    );
    let stuffing = &figures["gaming.db"];
    let (a, b) = fraction(stuffing["issue_sm10_judge"].as_str().unwrap_or_default())
        .unwrap_or_else(|| panic!("stuffing SM@10 not computed: {stuffing}"));
    let (c, d) = TUNING_STUFFING_SM10_CEILING;
    assert!(
        a * d <= c * b,
        "the stuffing agent gained: Issue SM@10 {a}/{b} above {c}/{d}: {stuffing}"
    );
}

/// `cmd`'s standard output; it must succeed.
fn run(cmd: &mut Command, what: &str) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(o.status.success(), "{what}: {}\n{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// `reprorun ARGS` in `dir`.
fn bin(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).current_dir(dir);
    c
}

/// The fraction `figure` of `h` ("x% (a/b)"), checked at or above `floor`.
fn at_least(h: &serde_json::Value, figure: &str, floor: (u64, u64), who: &str) -> (u64, u64) {
    let (a, b) = fraction(h[figure].as_str().unwrap_or_default())
        .unwrap_or_else(|| panic!("{who}: {figure} not computed: {h}"));
    assert!(
        a * floor.1 >= floor.0 * b,
        "{who}: {figure} {a}/{b} below the floor {}/{}: {h}",
        floor.0,
        floor.1
    );
    (a, b)
}

/// The paper ids of the held-out half of `split.tsv`.
/// Builds the real corpus of `papers` into `dir/input` and snapshots it.
fn build_and_snapshot(dir: &Path, papers: &[String]) {
    run(
        Command::new(recipe_dir().join("build.sh"))
            .arg(dir.join("input"))
            .env("ONLY", papers.join(",")),
        "build.sh",
    );
    run(&mut bin(dir, &SNAPSHOT_BUILT_INPUT), "audit snapshot");
}

fn held_out_papers() -> Vec<String> {
    papers_of("held-out")
}

/// The paper ids of `half` ("tuning" or "held-out") of `split.tsv`.
fn papers_of(half: &str) -> Vec<String> {
    let split = std::fs::read_to_string(recipe_dir().join("split.tsv")).expect("split.tsv");
    let held: Vec<&str> = split
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t'))
        .filter(|(_, h)| h.trim() == half)
        .map(|(r, _)| r)
        .collect();
    let pairs = std::fs::read_to_string(recipe_dir().join("pairs.jsonl")).expect("pairs.jsonl");
    pairs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a pair"))
        .filter(|p| held.contains(&p["repo"].as_str().unwrap_or_default()))
        .map(|p| p["paper_id"].as_str().expect("paper_id").to_string())
        .collect()
}

/// `a` and `b` of a figure printed as "x% (a/b)".
fn fraction(s: &str) -> Option<(u64, u64)> {
    let inner = s.split_once('(')?.1.strip_suffix(')')?;
    let (a, b) = inner.split_once('/')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}
