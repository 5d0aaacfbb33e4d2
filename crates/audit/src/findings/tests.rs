use serde_json::{json, Value};

use super::*;

fn finding_json(id: &str) -> Value {
    json!({
        "finding_id": id,
        "rank_reason": "every user runs this first",
        "severity": "high",
        "stage": "environment_setup",
        "category": "missing_dependency",
        "issue_title": "ModuleNotFoundError: No module named 'cv2'",
        "user_symptom": "ModuleNotFoundError: No module named 'cv2'",
        "trigger_context": "python train.py after pip install -r requirements.txt",
        "root_cause": "opencv-python is imported but not in requirements.txt",
        "evidence": [
            {"path": "train.py", "line_refs": [3, "10-12", [20, 25]], "evidence_type": "code", "summary": "import cv2"},
            {"path": "requirements.txt", "evidence_type": "absence", "summary": "no opencv"}
        ],
        "impact": "training cannot start",
        "affected_claims_or_metrics": ["Table 1"],
        "reproducibility_blocker": true,
        "confidence": "high"
    })
}

fn doc(findings: Vec<Value>) -> Value {
    json!({
        "reproducibility_assessment": {"overall": "partially_reproducible", "summary": "s"},
        "findings": findings,
        "missing_or_ambiguous_artifacts": ["pretrained weights", {"artifact": "data", "why": "no link"}]
    })
}

fn check(v: &Value) -> Result<Findings, FindingsError> {
    validate(v.to_string().as_bytes())
}

#[test]
fn minimal_document_with_no_findings_is_valid() {
    let f = validate(
        br#"{"reproducibility_assessment":{"overall":"unknown","summary":""},"findings":[]}"#,
    )
    .unwrap();
    assert!(f.findings.is_empty());
    assert!(f.missing_or_ambiguous_artifacts.is_empty());
    assert!(
        matches!(&f.reproducibility_assessment, Assessment::Verdict(v) if v.overall == Overall::Unknown)
    );
}

#[test]
fn full_document_is_read_with_normalized_line_refs() {
    let f = check(&doc(vec![finding_json("F1")])).unwrap();
    let x = &f.findings[0];
    assert_eq!(x.severity, Some(Severity::High));
    assert_eq!(x.category, Some(Category::EnvironmentSetup));
    assert_eq!(
        x.evidence[0].line_refs,
        vec![
            LineRange { start: 3, end: 3 },
            LineRange { start: 10, end: 12 },
            LineRange { start: 20, end: 25 }
        ]
    );
    assert!(x.evidence[1].line_refs.is_empty());
    assert_eq!(
        x.evidence[1].evidence_type,
        Some(EvidenceType::MissingArtifact)
    );
    assert_eq!(
        f.missing_or_ambiguous_artifacts[0],
        Artifact::Text("pretrained weights".into())
    );
    assert!(
        matches!(&f.missing_or_ambiguous_artifacts[1], Artifact::Item(i) if i.why == "no link")
    );
    let out: Value = serde_json::from_str(&f.to_json()).unwrap();
    assert_eq!(
        out["findings"][0]["evidence"][0]["line_refs"],
        json!([[3, 3], [10, 12], [20, 25]])
    );
}

#[test]
fn order_is_kept() {
    let ids = ["z", "a", "m", "b"];
    let f = check(&doc(ids.iter().map(|i| finding_json(i)).collect())).unwrap();
    let got: Vec<&str> = f.findings.iter().map(|x| x.finding_id.as_str()).collect();
    assert_eq!(got, ids);
}

#[test]
fn unknown_fields_round_trip() {
    let mut f = finding_json("F1");
    f["agent_note"] = json!({"k": [1, 2]});
    f["evidence"][0]["commit"] = json!("abc");
    let mut d = doc(vec![f]);
    d["model"] = json!("gpt-x");
    d["reproducibility_assessment"]["score"] = json!(0.5);
    let parsed = check(&d).unwrap();
    assert_eq!(parsed.extra["model"], json!("gpt-x"));
    let again = validate(parsed.to_json().as_bytes()).unwrap();
    assert_eq!(again, parsed);
    let out: Value = serde_json::from_str(&parsed.to_json()).unwrap();
    assert_eq!(out["findings"][0]["agent_note"], json!({"k": [1, 2]}));
    assert_eq!(out["findings"][0]["evidence"][0]["commit"], json!("abc"));
    assert_eq!(out["reproducibility_assessment"]["score"], json!(0.5));
}

#[test]
fn to_json_is_deterministic() {
    let f = check(&doc(vec![finding_json("a"), finding_json("b")])).unwrap();
    assert_eq!(f.to_json(), f.clone().to_json());
    assert!(f.to_json().ends_with("}\n"));
}

#[test]
fn too_large_is_refused_before_parsing() {
    let big = vec![b' '; MAX_BYTES + 1];
    assert_eq!(
        validate(&big),
        Err(FindingsError::TooLarge {
            size: MAX_BYTES + 1,
            limit: MAX_BYTES
        })
    );
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let e = validate(b"{\n  \"findings\": [,]\n}").unwrap_err();
    match &e {
        FindingsError::Syntax { line, column, msg } => {
            assert_eq!(*line, 2);
            assert_eq!(*column, 16);
            assert!(!msg.contains("at line"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn top_level_array_is_refused() {
    let e = validate(json!([finding_json("F1")]).to_string().as_bytes()).unwrap_err();
    assert!(
        matches!(
            e,
            FindingsError::Type {
                found: "an array",
                ..
            }
        ),
        "{e}"
    );
}

/// The one problem of a document that should have exactly one.
fn one_problem(v: &Value) -> (Findings, FindingsError) {
    let f = check(v).unwrap();
    assert_eq!(f.problems.len(), 1, "{:?}", f.problems);
    let e = f.problems[0].clone();
    (f, e)
}

#[test]
fn a_missing_field_is_dropped_and_named_not_the_run() {
    let mut f = finding_json("F1");
    f.as_object_mut().unwrap().remove("root_cause");
    let (x, e) = one_problem(&doc(vec![finding_json("F0"), f]));
    assert_eq!(
        e,
        FindingsError::Missing {
            at: "findings[1]".into(),
            field: "root_cause"
        }
    );
    assert_eq!(x.findings.len(), 2);
    assert_eq!(x.findings[1].root_cause, "");
    assert_eq!(
        x.findings[1].issue_title,
        "ModuleNotFoundError: No module named 'cv2'"
    );
    let (x, e) = one_problem(&json!({"findings": []}));
    assert_eq!(
        e,
        FindingsError::Missing {
            at: "top level".into(),
            field: "reproducibility_assessment"
        }
    );
    assert_eq!(
        x.reproducibility_assessment,
        Assessment::Text(String::new())
    );
    // Without a findings array there is no document to keep.
    assert_eq!(
        validate(br#"{"reproducibility_assessment": "fine"}"#),
        Err(FindingsError::Missing {
            at: "top level".into(),
            field: "findings"
        })
    );
}

#[test]
fn wrong_types_drop_the_field() {
    let mut f = finding_json("F1");
    f["reproducibility_blocker"] = json!(3);
    let (x, e) = one_problem(&doc(vec![f]));
    assert_eq!(
        e,
        FindingsError::Type {
            at: "findings[0].reproducibility_blocker".into(),
            expected: "true or false",
            found: "a number"
        }
    );
    assert_eq!(x.findings[0].reproducibility_blocker, None);
    let mut f = finding_json("F1");
    f["reproducibility_blocker"] = json!("Yes");
    assert_eq!(
        check(&doc(vec![f])).unwrap().findings[0].reproducibility_blocker,
        Some(true)
    );
    let mut f = finding_json("F1");
    f["evidence"] = json!("train.py");
    let (x, e) = one_problem(&doc(vec![f]));
    assert!(matches!(e, FindingsError::Type { at, .. } if at == "findings[0].evidence"));
    assert!(x.findings[0].evidence.is_empty());
    let mut d = doc(vec![]);
    d["findings"] = json!({});
    assert!(matches!(check(&d), Err(FindingsError::Type { at, .. }) if at == "findings"));
    // A finding that is not an object is dropped; the others stay, in order.
    let (x, e) = one_problem(&doc(vec![finding_json("A"), json!("B"), finding_json("C")]));
    assert!(matches!(e, FindingsError::Type { at, .. } if at == "findings[1]"));
    let ids: Vec<&str> = x.findings.iter().map(|f| f.finding_id.as_str()).collect();
    assert_eq!(ids, ["A", "C"]);
}

#[test]
fn bad_enum_values_list_the_allowed_ones_and_drop_the_field() {
    let mut f = finding_json("F1");
    f["severity"] = json!("blocker");
    let (x, e) = one_problem(&doc(vec![finding_json("F0"), f]));
    assert_eq!(
        e,
        FindingsError::Value {
            at: "findings[1].severity".into(),
            value: "\"blocker\"".into(),
            allowed: "critical|high|medium|low".into()
        }
    );
    assert_eq!(x.findings[1].severity, None);
    assert!(!x.to_json().contains("\"blocker\""));
    let mut f = finding_json("F1");
    f["evidence"][0]["evidence_type"] = json!("log");
    let (x, e) = one_problem(&doc(vec![f]));
    assert!(
        e.to_string()
            .contains("findings[0].evidence[0].evidence_type"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("file|command|missing_artifact|documentation|config|paper_repo_mismatch"),
        "{e}"
    );
    assert_eq!(x.findings[0].evidence[0].evidence_type, None);
    assert_eq!(x.findings[0].evidence[0].path, "train.py");
}

#[test]
fn every_problem_is_reported_at_once() {
    let mut f = finding_json("F1");
    f["severity"] = json!("blocker");
    f["stage"] = json!("deployment");
    f["evidence"][0]["line_refs"] = json!(["ten", 4]);
    f.as_object_mut().unwrap().remove("impact");
    let x = check(&doc(vec![f])).unwrap();
    assert_eq!(x.problems.len(), 4, "{:?}", x.problems);
    let line = x.problems_line(10_000).unwrap();
    for part in [
        "4 problem(s)",
        "severity",
        "stage",
        "line_refs[0]",
        "`impact`",
    ] {
        assert!(line.contains(part), "{part}: {line}");
    }
    assert_eq!(
        x.findings[0].evidence[0].line_refs,
        vec![LineRange::line(4)]
    );
    assert!(x.problems_line(40).unwrap().chars().count() <= 40);
    assert_eq!(
        check(&doc(vec![finding_json("F1")]))
            .unwrap()
            .problems_line(80),
        None
    );
}

#[test]
fn enum_case_and_separators_are_folded() {
    let mut f = finding_json("F1");
    f["severity"] = json!("High");
    f["category"] = json!("Runtime-Error");
    f["stage"] = json!("Install / Environment");
    let x = check(&doc(vec![f])).unwrap();
    assert_eq!(x.problems, vec![]);
    assert_eq!(x.findings[0].severity, Some(Severity::High));
    assert_eq!(x.findings[0].category, Some(Category::RuntimeError));
    assert_eq!(x.findings[0].stage, Some(Stage::InstallEnvironment));
}

#[test]
fn reprorun_finer_values_are_read_as_the_papers_and_kept() {
    // `finding_json` uses reprorun's own sets, as the prompt before the paper's schema did.
    let x = check(&doc(vec![finding_json("F1")])).unwrap();
    assert_eq!(x.problems, vec![]);
    let f = &x.findings[0];
    assert_eq!(f.stage, Some(Stage::InstallEnvironment));
    assert_eq!(f.category, Some(Category::EnvironmentSetup));
    assert_eq!(f.evidence[0].evidence_type, Some(EvidenceType::File));
    assert_eq!(
        f.evidence[1].evidence_type,
        Some(EvidenceType::MissingArtifact)
    );
    let out: Value = serde_json::from_str(&x.to_json()).unwrap();
    assert_eq!(out["findings"][0]["category"], "environment_setup");
    assert_eq!(
        out["findings"][0]["reprorun_category"],
        "missing_dependency"
    );
    assert_eq!(out["findings"][0]["reprorun_stage"], "environment_setup");
    assert_eq!(
        out["findings"][0]["evidence"][1]["reprorun_evidence_type"],
        "absence"
    );
    // Written back, it reads the same.
    assert_eq!(validate(x.to_json().as_bytes()).unwrap(), x);
}

#[test]
fn duplicate_ids_are_renamed_and_recorded() {
    let (x, e) = one_problem(&doc(vec![
        finding_json("A"),
        finding_json("B"),
        finding_json("A"),
    ]));
    assert_eq!(
        e,
        FindingsError::DuplicateId {
            id: "\"A\"".into(),
            renamed: "A#3".into(),
            second: 2
        }
    );
    let ids: Vec<&str> = x.findings.iter().map(|f| f.finding_id.as_str()).collect();
    assert_eq!(ids, ["A", "B", "A#3"]);
}

#[test]
fn empty_title_or_id_is_recorded() {
    let mut f = finding_json("F1");
    f["issue_title"] = json!("  ");
    let (_, e) = one_problem(&doc(vec![f]));
    assert!(matches!(e, FindingsError::Invalid { at, .. } if at == "findings[0].issue_title"));
    let (x, e) = one_problem(&doc(vec![finding_json("")]));
    assert!(matches!(e, FindingsError::Invalid { .. }));
    assert_eq!(x.findings[0].finding_id, "F1");
}

#[test]
fn bad_line_refs_are_dropped_one_by_one() {
    for bad in [
        json!(["ten"]),
        json!([0]),
        json!(["30-12"]),
        json!([[1, 2, 3]]),
        json!([-4]),
        json!({"a": 1}),
    ] {
        let mut f = finding_json("F1");
        f["evidence"][0]["line_refs"] = bad.clone();
        let (x, e) = one_problem(&doc(vec![f]));
        assert!(
            e.to_string().contains("findings[0].evidence[0].line_refs"),
            "{bad}: {e}"
        );
        assert!(x.findings[0].evidence[0].line_refs.is_empty());
    }
}

#[test]
fn free_text_line_refs_mean_no_line() {
    for none in [
        json!("N/A"),
        json!(""),
        json!(["n/a"]),
        json!(["", 7]),
        json!("none"),
    ] {
        let mut f = finding_json("F1");
        f["evidence"][0]["line_refs"] = none.clone();
        let x = check(&doc(vec![f])).unwrap();
        assert_eq!(x.problems, vec![], "{none}");
    }
}

#[test]
fn the_papers_own_document_is_accepted_unchanged() {
    // The shape of the paper's Appendix E.1: a free-text assessment and its value sets.
    let stages = [
        "install/environment",
        "data/model acquisition",
        "training/fine-tuning",
        "inference/demo",
        "evaluation/metrics",
        "result comparison/provenance",
    ];
    let categories = [
        "environment_setup",
        "dependency_version",
        "data_access",
        "model_weights",
        "training_reproduction",
        "evaluation_reproduction",
        "runtime_error",
        "hardware_backend",
        "api_service",
        "result_mismatch",
        "documentation_gap",
        "paper_repo_mismatch",
    ];
    let evidence = [
        "file",
        "command",
        "missing_artifact",
        "documentation",
        "config",
        "paper_repo_mismatch",
    ];
    let findings: Vec<Value> = categories
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut f = finding_json(&format!("F{}", i + 1));
            f["category"] = json!(c);
            f["stage"] = json!(stages[i % stages.len()]);
            f["evidence"][0]["evidence_type"] = json!(evidence[i % evidence.len()]);
            f["evidence"][1]["evidence_type"] = json!(evidence[(i + 1) % evidence.len()]);
            f["evidence"][1]["line_refs"] = json!(if i % 2 == 0 { "N/A" } else { "" });
            f
        })
        .collect();
    let d = json!({
        "reproducibility_assessment": "Partially reproducible: the training script runs, the evaluation data is not released.",
        "findings": findings,
        "missing_or_ambiguous_artifacts": ["the test split"]
    });
    let x = check(&d).unwrap();
    assert_eq!(x.problems, vec![]);
    assert_eq!(x.findings.len(), 12);
    for (f, c) in x.findings.iter().zip(categories) {
        assert_eq!(f.category.map(Category::as_str), Some(c));
    }
    assert_eq!(Stage::NAMES, stages);
    assert_eq!(Category::NAMES, categories);
    assert_eq!(EvidenceType::NAMES, evidence);
    let out: Value = serde_json::from_str(&x.to_json()).unwrap();
    assert_eq!(
        out["reproducibility_assessment"],
        d["reproducibility_assessment"]
    );
    assert_eq!(out["findings"][1]["stage"], "data/model acquisition");
}

#[test]
fn tolerated_shapes_are_read() {
    let mut f = finding_json(" ");
    f["finding_id"] = json!(7);
    f["affected_claims_or_metrics"] = json!("Table 2 BLEU");
    f["evidence"][0]["line_refs"] = json!("L5-L9");
    let mut d = doc(vec![f]);
    d.as_object_mut()
        .unwrap()
        .remove("missing_or_ambiguous_artifacts");
    let x = check(&d).unwrap();
    assert_eq!(x.findings[0].finding_id, "7");
    assert_eq!(
        x.findings[0].affected_claims_or_metrics,
        vec!["Table 2 BLEU".to_string()]
    );
    assert_eq!(
        x.findings[0].evidence[0].line_refs,
        vec![LineRange { start: 5, end: 9 }]
    );
}

#[test]
fn bom_and_whole_document_fence_are_tolerated() {
    let body = doc(vec![finding_json("F1")]).to_string();
    let fenced = format!("\u{feff}```json\n{body}\n```\n");
    assert_eq!(validate(fenced.as_bytes()).unwrap().findings.len(), 1);
    // Text around the fence is not a document: the caller extracts first.
    let chatty = format!("Here you go:\n```json\n{body}\n```\n");
    assert!(matches!(
        validate(chatty.as_bytes()),
        Err(FindingsError::Syntax { .. })
    ));
}

#[test]
fn extract_json_finds_the_document_in_a_reply() {
    let body = doc(vec![finding_json("F1")]).to_string();
    let reply =
        format!("I audited it.\n```bash\necho {{}}\n```\nResult:\n```json\n{body}\n```\nDone.");
    assert_eq!(extract_json(&reply), Some(body.as_str()));
    let bare = format!("Result: {body} -- bye {{not json}}");
    assert_eq!(extract_json(&bare), Some(body.as_str()));
    let with_brace_in_string = r#"x {"findings": [], "s": "a } b"} y"#;
    assert_eq!(
        extract_json(with_brace_in_string),
        Some(r#"{"findings": [], "s": "a } b"}"#)
    );
    assert_eq!(extract_json("no json here {a} {b"), None);
}

#[test]
fn error_messages_are_one_line() {
    let mut f = finding_json("F1");
    f["severity"] = json!("a\nb");
    let (_, e) = one_problem(&doc(vec![f]));
    assert!(!e.to_string().contains('\n'), "{e}");
}
