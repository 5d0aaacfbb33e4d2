//! The report on a hand-built study whose corpus and agent texts try to inject markup.

use std::path::PathBuf;

use super::render;
use crate::judgment::Label;
use crate::metrics::compute::*;
use crate::metrics::{Config, Metrics};

const EVIL: &str = "<script>alert(1)</script>";

fn config(agent: &str) -> Config {
    let data = Dataset {
        issues: vec![IssueInfo {
            id: "o/r#1".into(),
            paper_id: "P1".into(),
            title: EVIL.into(),
            target: "open".into(),
            group_id: "P1@aaaa".into(),
            post_fix_group_id: None,
            category: None,
            rule: "before_created_at".into(),
            commit: "aaaa".into(),
        }],
        papers: vec![PaperInfo {
            paper_id: "P1".into(),
            title: Some("<img src=x onerror=alert(2)>".into()),
            venue: Some("NeurIPS".into()),
            year: Some("2024".into()),
        }],
        groups: vec![GroupInfo {
            group_id: "P1@aaaa".into(),
            paper_id: "P1".into(),
            commit: "aaaa".into(),
            post_fix_for: vec![],
        }],
        runs: vec![RunData {
            group_id: "P1@aaaa".into(),
            repeat: 0,
            status: "ok".into(),
            judgment: Some("ok".into()),
            labels: vec![("o/r#1".into(), 0, Label::Exact)],
            rationales: [(
                ("o/r#1".to_string(), 0),
                "</td><script>x()</script>".to_string(),
            )]
            .into_iter()
            .collect(),
            findings: vec![FindingBrief {
                title: "<SCRIPT src=//evil></SCRIPT> | pipe".into(),
                category: "missing_dependency".into(),
                taxonomy: Some(crate::input::Category::CrashImmediate),
            }],
            cost_usd: Some(0.5),
            ..RunData::default()
        }],
    };
    Config {
        db: PathBuf::from("a.db"),
        agent: agent.into(),
        judge: "builtin".into(),
        corpus: "x".into(),
        data,
    }
}

fn report() -> [String; 3] {
    let configs = vec![config("codex <b>gpt</b>"), config("builtin")];
    let o = Options {
        k: 10,
        bootstrap: 50,
        seed: 1,
    };
    let m = Metrics {
        configs: configs
            .iter()
            .map(|c| compute(&c.data, &c.agent, &c.judge, o))
            .collect(),
        papers: 1,
        issues: 1,
    };
    render(&configs, &m).unwrap()
}

#[test]
fn untrusted_text_is_escaped_in_html_and_markdown() {
    let [md, html, json] = report();
    assert!(
        !html.to_ascii_lowercase().contains("<script"),
        "a script tag got through"
    );
    assert!(!html.contains("<img") && !html.contains("<b>"), "{html}");
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    assert!(
        html.contains("&lt;/td&gt;&lt;script&gt;x()"),
        "the rationale: {html}"
    );
    assert!(html.contains("codex &lt;b&gt;gpt&lt;/b&gt;"), "{html}");
    assert!(!md.contains("<script") && !md.contains("<img"), "{md}");
    assert!(
        md.contains("&lt;script&gt;alert\\(1\\)&lt;/script&gt;"),
        "{md}"
    );
    // A pipe in a finding title cannot break the Markdown table.
    assert!(md.contains("\\| pipe"), "{md}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["configs"][0]["agent"], "codex <b>gpt</b>");
}

#[test]
fn the_page_is_self_contained_with_curves_and_is_deterministic() {
    let [md, html, _] = report();
    assert!(html.starts_with("<!DOCTYPE html>"));
    let lower = html.to_ascii_lowercase();
    for banned in ["<script", "<link", "<img", "<iframe", "http://", "https://"] {
        assert!(!lower.contains(banned), "{banned} in the page");
    }
    assert!(html.contains("<svg class=\"curves\""), "{html}");
    // One SM and one EM line per configuration.
    assert_eq!(html.matches("<polyline class=\"series\"").count(), 4);
    assert!(html.contains("<td class=\"exact\">o/r#1: exact"), "{html}");
    assert!(
        md.contains("| config | Issue EM@10 | Issue SM@10 |"),
        "{md}"
    );
    assert!(md.contains("| builtin | 100.0% | 100.0% |"), "{md}");
    assert!(md.contains("NeurIPS 2024"), "{md}");
    assert_eq!(report(), [md, html, report()[2].clone()]);
}

#[test]
fn the_four_way_split_is_charted_and_tabled_for_issues_and_predictions() {
    let [md, html, json] = report();
    assert!(
        md.contains("## Taxonomy: human issues and predictions"),
        "{md}"
    );
    // Human issues (one, without a category), then each configuration's predictions (one
    // crash_immediate finding) with its recall per class; every class a row.
    assert!(md.contains("| crash\\_immediate | 0 | 0.0% |"), "{md}");
    assert!(md.contains("| unlabelled | 1 | 100.0% |"), "{md}");
    assert!(
        md.contains("| builtin | crash\\_immediate | 1 | 100.0% | n/a |"),
        "{md}"
    );
    assert!(
        md.contains("| builtin | silent\\_wrong\\_setup | 0 | 0.0% | n/a |"),
        "{md}"
    );
    assert!(!md.contains("| builtin | unclassified"), "{md}");
    assert!(html.contains("<svg class=\"bars\""), "{html}");
    // Four classes × (human issues + two configurations).
    assert_eq!(html.matches("<rect class=\"bar\"").count(), 12, "{html}");
    assert!(
        html.contains("builtin predictions, crash_immediate: 100.0%"),
        "{html}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let t = &v["configs"][0]["taxonomy"];
    assert_eq!(t["findings"]["crash_immediate"]["n"], 1, "{t}");
    assert_eq!(t["issues"]["unlabelled"]["n"], 1, "{t}");
}
