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
    assert_eq!(f.reproducibility_assessment.overall, Overall::Unknown);
}

#[test]
fn full_document_is_read_with_normalized_line_refs() {
    let f = check(&doc(vec![finding_json("F1")])).unwrap();
    let x = &f.findings[0];
    assert_eq!(x.severity, Severity::High);
    assert_eq!(x.category, Category::MissingDependency);
    assert_eq!(
        x.evidence[0].line_refs,
        vec![
            LineRange { start: 3, end: 3 },
            LineRange { start: 10, end: 12 },
            LineRange { start: 20, end: 25 }
        ]
    );
    assert!(x.evidence[1].line_refs.is_empty());
    assert_eq!(x.evidence[1].evidence_type, EvidenceType::Absence);
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

#[test]
fn missing_fields_name_the_finding_and_field() {
    let mut f = finding_json("F1");
    f.as_object_mut().unwrap().remove("root_cause");
    let e = check(&doc(vec![finding_json("F0"), f])).unwrap_err();
    assert_eq!(
        e,
        FindingsError::Missing {
            at: "findings[1]".into(),
            field: "root_cause"
        }
    );
    let e = validate(br#"{"findings":[]}"#).unwrap_err();
    assert_eq!(
        e,
        FindingsError::Missing {
            at: "top level".into(),
            field: "reproducibility_assessment"
        }
    );
    let mut d = doc(vec![]);
    d["reproducibility_assessment"]
        .as_object_mut()
        .unwrap()
        .remove("summary");
    assert!(matches!(
        check(&d),
        Err(FindingsError::Missing {
            field: "summary",
            ..
        })
    ));
}

#[test]
fn wrong_types_are_refused() {
    let mut f = finding_json("F1");
    f["reproducibility_blocker"] = json!("yes");
    let e = check(&doc(vec![f])).unwrap_err();
    assert_eq!(
        e,
        FindingsError::Type {
            at: "findings[0].reproducibility_blocker".into(),
            expected: "true or false",
            found: "a string"
        }
    );
    let mut f = finding_json("F1");
    f["evidence"] = json!("train.py");
    assert!(
        matches!(check(&doc(vec![f])), Err(FindingsError::Type { at, .. }) if at == "findings[0].evidence")
    );
    let mut d = doc(vec![]);
    d["findings"] = json!({});
    assert!(matches!(check(&d), Err(FindingsError::Type { at, .. }) if at == "findings"));
}

#[test]
fn bad_enum_values_list_the_allowed_ones() {
    let mut f = finding_json("F1");
    f["severity"] = json!("blocker");
    let e = check(&doc(vec![finding_json("F0"), f])).unwrap_err();
    assert_eq!(
        e,
        FindingsError::Value {
            at: "findings[1].severity".into(),
            value: "\"blocker\"".into(),
            allowed: "critical|high|medium|low".into()
        }
    );
    let mut f = finding_json("F1");
    f["evidence"][0]["evidence_type"] = json!("log");
    let e = check(&doc(vec![f])).unwrap_err();
    assert!(
        e.to_string()
            .contains("findings[0].evidence[0].evidence_type"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("code|config|documentation|paper|absence"),
        "{e}"
    );
}

#[test]
fn enum_case_and_separators_are_folded() {
    let mut f = finding_json("F1");
    f["severity"] = json!("High");
    f["category"] = json!("code-bug");
    f["stage"] = json!("Environment Setup");
    let x = check(&doc(vec![f])).unwrap();
    assert_eq!(x.findings[0].severity, Severity::High);
    assert_eq!(x.findings[0].category, Category::CodeBug);
    assert_eq!(x.findings[0].stage, Stage::EnvironmentSetup);
}

#[test]
fn duplicate_ids_are_refused() {
    let e = check(&doc(vec![
        finding_json("A"),
        finding_json("B"),
        finding_json("A"),
    ]))
    .unwrap_err();
    assert_eq!(
        e,
        FindingsError::DuplicateId {
            id: "\"A\"".into(),
            first: 0,
            second: 2
        }
    );
}

#[test]
fn empty_title_or_id_is_refused() {
    let mut f = finding_json("F1");
    f["issue_title"] = json!("  ");
    assert!(
        matches!(check(&doc(vec![f])), Err(FindingsError::Invalid { at, .. }) if at == "findings[0].issue_title")
    );
    assert!(matches!(
        check(&doc(vec![finding_json("")])),
        Err(FindingsError::Invalid { .. })
    ));
}

#[test]
fn bad_line_refs_are_refused() {
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
        let e = check(&doc(vec![f])).unwrap_err();
        assert!(
            e.to_string().contains("findings[0].evidence[0].line_refs"),
            "{bad}: {e}"
        );
    }
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
    let e = check(&doc(vec![f])).unwrap_err();
    assert!(!e.to_string().contains('\n'), "{e}");
}
