//! `reprorun audit run`: scripted agents in fresh sandboxes over a corpus the test writes
//! (the format of `spec/audit.md`), blind and offline; kill and resume; bad input.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::common::audit::{Corpus, Tree};
use crate::common::*;

/// A valid findings document with one finding (and a field of the agent's own).
const ONE_FINDING: &str = r#"{"reproducibility_assessment": {"overall": "partially_reproducible", "summary": "one blocker"},
 "findings": [{"finding_id": "F1", "rank_reason": "first thing a user hits", "severity": "high",
   "stage": "environment_setup", "category": "missing_dependency", "issue_title": "No module named cv2",
   "user_symptom": "ModuleNotFoundError: No module named 'cv2'", "trigger_context": "python main.py",
   "root_cause": "opencv-python is not in any requirements file",
   "evidence": [{"path": "main.py", "line_refs": [1], "evidence_type": "code", "summary": "import cv2"}],
   "impact": "nothing runs", "affected_claims_or_metrics": [], "reproducibility_blocker": true,
   "confidence": "high", "agent_extra": 1}],
 "missing_or_ambiguous_artifacts": []}"#;

/// The same document on one line (a model's final message).
pub(crate) const ONE_FINDING_LINE: &str = r#"{"reproducibility_assessment": {"overall": "partially_reproducible", "summary": "one blocker"}, "findings": [{"finding_id": "F1", "rank_reason": "first thing a user hits", "severity": "high", "stage": "environment_setup", "category": "missing_dependency", "issue_title": "No module named cv2", "user_symptom": "ModuleNotFoundError: No module named 'cv2'", "trigger_context": "python main.py", "root_cause": "opencv-python is not in any requirements file", "evidence": [{"path": "main.py", "line_refs": [1], "evidence_type": "code", "summary": "import cv2"}], "impact": "nothing runs", "affected_claims_or_metrics": [], "reproducibility_blocker": true, "confidence": "high"}], "missing_or_ambiguous_artifacts": []}"#;

impl Corpus {
    /// A corpus of one pair and two snapshot groups, each with its issue; the manifest lists
    /// only the first group's issue, by title alone.
    pub(crate) fn two_groups() -> Corpus {
        let trees: [Tree; 2] = [
            &[
                ("main.py", "import cv2\nprint(cv2.__version__)\n", 0o644),
                ("README.md", "# Demo\nRun `python main.py`.\n", 0o644),
            ],
            &[
                ("main.py", "print('fixed')\n", 0o644),
                ("requirements.txt", "numpy==1.26.4\n", 0o644),
                ("run.sh", "#!/bin/sh\npython main.py\n", 0o755),
            ],
        ];
        let paper = "# A paper\nWe train for 100 epochs with a learning rate of 0.001.\n";
        Corpus::write(&trees, paper, |digests, paper| {
            let groups: Vec<serde_json::Value> = digests
                .iter()
                .enumerate()
                .map(|(i, digest)| {
                    serde_json::json!({
                        "group_id": format!("p1@{i:012}"), "paper_id": "p1", "repo": "o/demo",
                        "commit": format!("{i:040}"), "tree": digest, "issues": [i + 1],
                    })
                })
                .collect();
            serde_json::json!({
                "version": 1,
                "pairs": [{"paper_id": "p1", "repo": "o/demo", "paper": paper,
                           "paper_kind": "md", "collected_at": "2024-01-01T00:00:00Z"}],
                "groups": groups,
                "issues": [{"issue": {"repo": "o/demo", "number": 1, "title": "HIDDEN-ISSUE-TITLE"},
                            "grounding": {"target": "open", "group_id": "p1@000000000000", "rule": "default_branch_at_collected_at"}}],
                "warnings": [],
            })
        })
    }

    pub(crate) fn run(&self, extra: &[&str]) -> std::process::Output {
        let mut args = vec!["audit", "run", "--corpus", "corpus", "--db", "audit.db"];
        args.extend_from_slice(extra);
        self.work.run(&args)
    }

    fn summary(&self, extra: &[&str]) -> serde_json::Value {
        let mut args = extra.to_vec();
        args.push("--json");
        let o = self.run(&args);
        serde_json::from_str(&expect_code(&o, 0)).unwrap()
    }
}

#[test]
fn scripted_agents_are_recorded_with_what_they_wrote() {
    require!(Need::Root);
    let c = Corpus::two_groups();
    std::fs::write(c.work.path().join("findings.json"), ONE_FINDING).unwrap();
    let agent = format!(
        "cat {dir}/../findings.json > \"$REPRORUN_AUDIT_OUT\" 2>/dev/null || printf '%s' '{doc}' > \"$REPRORUN_AUDIT_OUT\"; \
         ls /work; test -f /work/repo/main.py && echo has-repo; head -c 7 \"$REPRORUN_AUDIT_PAPER\"; echo; \
         grep -c findings.json \"$REPRORUN_AUDIT_PROMPT\" >/dev/null && echo has-prompt; \
         echo '{{\"input_tokens\": 100, \"cached_input_tokens\": 40, \"output_tokens\": 7}}' > /out/usage.json",
        dir = c.dir().display(),
        doc = ONE_FINDING.replace('\'', ""),
    );
    let s = c.summary(&["--agent-cmd", &agent, "--repeats", "2"]);
    assert_eq!(s["runs"], 4, "{s}");
    assert_eq!(s["by_status"]["ok"], 4, "{s}");
    assert_eq!(s["findings"], 4, "{s}");
    assert_eq!(s["input_tokens"], 4 * 60, "{s}");
    assert_eq!(s["cached_input_tokens"], 4 * 40, "{s}");
    let row = &s["rows"][0];
    let out = c.log(row["stdout_sha256"].as_str().unwrap());
    for line in [
        "PROMPT.md",
        "paper.md",
        "repo",
        "has-repo",
        "# A pap",
        "has-prompt",
    ] {
        assert!(out.lines().any(|l| l == line), "{line:?} missing: {out}");
    }
    // The findings are stored as validated, unknown fields kept.
    let stored = c.log(row["findings_sha256"].as_str().unwrap());
    assert!(stored.contains("agent_extra"), "{stored}");
    // Run again: everything is recorded, nothing runs twice.
    let again = c.summary(&["--agent-cmd", &agent, "--repeats", "2"]);
    assert_eq!(again["rows"], s["rows"]);
}

/// A document in the paper's own format (Appendix E.1): a free-text assessment, the paper's
/// value sets, free-form `line_refs`; one finding has a stage outside the set.
const PAPER_FINDINGS: &str = r#"{"reproducibility_assessment": "Not reproducible as released: cv2 is undeclared.", "findings": [{"finding_id": "F1", "rank_reason": "first thing a user hits", "severity": "high", "stage": "install/environment", "category": "environment_setup", "issue_title": "No module named cv2", "user_symptom": "ModuleNotFoundError: No module named cv2", "trigger_context": "python main.py", "root_cause": "opencv-python is not in any requirements file", "evidence": [{"path": "main.py", "line_refs": "N/A", "evidence_type": "file", "summary": "import cv2"}, {"path": "requirements.txt", "line_refs": "", "evidence_type": "missing_artifact", "summary": "absent"}], "impact": "nothing runs", "affected_claims_or_metrics": ["Table 1"], "reproducibility_blocker": true, "confidence": "high"}, {"finding_id": "F2", "rank_reason": "second", "severity": "medium", "stage": "deployment", "category": "paper_repo_mismatch", "issue_title": "Learning rate differs from the paper", "user_symptom": "lower accuracy", "trigger_context": "training", "root_cause": "lr differs", "evidence": [{"path": "paper.md", "line_refs": ["N/A"], "evidence_type": "paper_repo_mismatch", "summary": "lr 1e-3"}], "impact": "numbers differ", "affected_claims_or_metrics": [], "reproducibility_blocker": false, "confidence": "medium"}], "missing_or_ambiguous_artifacts": []}"#;

#[test]
fn the_papers_findings_format_is_accepted_and_a_bad_field_only_dropped() {
    require!(Need::Root);
    let c = Corpus::two_groups();
    let agent = format!("printf '%s' '{PAPER_FINDINGS}' > \"$REPRORUN_AUDIT_OUT\"");
    let s = c.summary(&["--agent-cmd", &agent]);
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    assert_eq!(s["findings"], 4, "{s}");
    let row = &s["rows"][0];
    let reason = row["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("1 problem(s)") && reason.contains("findings[1].stage"),
        "{s}"
    );
    let stored: serde_json::Value =
        serde_json::from_str(&c.log(row["findings_sha256"].as_str().unwrap())).unwrap();
    assert_eq!(
        stored["reproducibility_assessment"],
        "Not reproducible as released: cv2 is undeclared."
    );
    assert_eq!(stored["findings"][0]["stage"], "install/environment");
    assert!(stored["findings"][1].get("stage").is_none(), "{stored}");
    assert_eq!(
        stored["findings"][0]["evidence"][0]["line_refs"],
        serde_json::json!([])
    );
}

#[test]
fn malformed_missing_and_failing_agents_are_recorded_as_such() {
    require!(Need::Root);
    for (agent, status) in [
        (
            "printf '{not json' > \"$REPRORUN_AUDIT_OUT\"",
            "invalid_output",
        ),
        (
            "printf '{\"findings\": 3}' > \"$REPRORUN_AUDIT_OUT\"",
            "invalid_output",
        ),
        ("echo nothing written", "no_output"),
        ("sleep 30", "timeout"),
    ] {
        let c = Corpus::two_groups();
        let s = c.summary(&["--agent-cmd", agent, "--timeout", "3s"]);
        assert_eq!(s["by_status"][status], 2, "{agent}: {s}");
        if status == "invalid_output" {
            assert!(
                s["rows"][0]["reason"]
                    .as_str()
                    .is_some_and(|r| !r.is_empty()),
                "{s}"
            );
            assert!(s["rows"][0]["raw_sha256"].is_string(), "{s}");
        }
    }
}

#[test]
fn an_agent_cannot_reach_the_answers_the_host_or_the_network() {
    require!(Need::Root);
    // A loopback "model API" the agent may reach, and a host service it may not.
    let api = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api_port = api.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in api.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nmodel");
        }
    });
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    other.set_nonblocking(true).unwrap();
    let c = Corpus::two_groups();
    let corpus = c.dir();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let probes = [
        ("git", "ls -a /work/repo | grep -qx .git".to_string()),
        ("issues", format!("cat {}/corpus.json", corpus.display())),
        (
            "issues-via-proc",
            format!("cat /proc/1/root{}/corpus.json", corpus.display()),
        ),
        ("db", format!("ls {}/audit.db", c.work.path().display())),
        ("home", format!("ls -A {home} | grep -q .")),
        ("write-work", "touch /work/x".into()),
        ("write-repo", "touch /work/repo/x".into()),
        ("write-usr", "touch /usr/x".into()),
        ("shadow", "grep -q root /etc/shadow".into()),
        (
            "other-host",
            format!("curl -sf -m 5 http://other.test:{other_port}/"),
        ),
        (
            "host-loopback",
            format!("curl -sf -m 5 --noproxy '*' http://127.0.0.1:{other_port}/"),
        ),
    ];
    let mut script = String::new();
    for (name, cmd) in &probes {
        script.push_str(&format!(
            "if {cmd} >/dev/null 2>&1; then echo LEAK-{name}; else echo blocked-{name}; fi; "
        ));
    }
    script.push_str(&format!(
        "curl -sf -m 5 http://api.test:{api_port}/v1 && echo; printf '%s' '{}' > \"$REPRORUN_AUDIT_OUT\"",
        ONE_FINDING.replace('\'', "")
    ));
    let s = c.summary(&[
        "--agent-cmd",
        &script,
        "--allow-host",
        &format!("api.test:{api_port}"),
        "--allow-host",
        &format!("127.0.0.1:{api_port}"),
        "--add-host",
        "api.test:127.0.0.1",
    ]);
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    let out = c.log(s["rows"][0]["stdout_sha256"].as_str().unwrap());
    for (name, _) in &probes {
        assert!(
            out.lines().any(|l| l == format!("blocked-{name}")),
            "{name}: {out}"
        );
    }
    assert!(out.lines().any(|l| l == "model"), "the allowed API: {out}");
    assert!(other.accept().is_err(), "the host service was reached");
}

#[test]
fn the_builtin_auditor_runs_offline_in_the_sandbox() {
    require!(Need::Root);
    let c = Corpus::two_groups();
    let s = c.summary(&[]);
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    // The snapshot with `import cv2` and no requirements file gets findings.
    let row = s["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group_id"] == "p1@000000000000")
        .unwrap();
    let findings = c.log(row["findings_sha256"].as_str().unwrap());
    assert!(findings.contains("main.py"), "{findings}");
}

/// A one-page PDF whose text is `line` (Helvetica, as pdftotext reads it).
fn pdf_of(line: &str) -> Vec<u8> {
    let stream = format!("BT /F1 12 Tf 72 720 Td ({line}) Tj ET");
    let objs = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_string(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_string(),
    ];
    let mut out = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (i, o) in objs.iter().enumerate() {
        offsets.push(out.len());
        out.push_str(&format!("{} 0 obj\n{o}\nendobj\n", i + 1));
    }
    let xref = out.len();
    out.push_str(&format!(
        "xref\n0 {}\n0000000000 65535 f \n",
        objs.len() + 1
    ));
    for o in offsets {
        out.push_str(&format!("{o:010} 00000 n \n"));
    }
    out.push_str(&format!(
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objs.len() + 1
    ));
    out.into_bytes()
}

/// [`Corpus::two_groups`] with its paper replaced by `pdf` (stored and named as a PDF).
fn with_pdf_paper(pdf: &[u8]) -> Corpus {
    let c = Corpus::two_groups();
    let name = format!("{}.pdf", crate::common::sha256_hex(pdf));
    std::fs::write(c.dir().join("papers").join(&name), pdf).unwrap();
    let path = c.dir().join("corpus.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    m["pairs"][0]["paper"] = name.into();
    m["pairs"][0]["paper_kind"] = "pdf".into();
    std::fs::write(&path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    c
}

#[test]
fn the_builtin_auditor_reads_a_pdf_papers_text_in_the_sandbox() {
    require!(Need::Root);
    require!(Need::Tool("pdftotext"));
    let c = with_pdf_paper(&pdf_of(
        "We train for 100 epochs with a learning rate of 0.001 and report Table 1.",
    ));
    let s = c.summary(&[]);
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    let all: String = s["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| c.log(r["findings_sha256"].as_str().unwrap()))
        .collect();
    assert!(all.contains("paper text compared"), "{all}");
    assert!(
        !all.contains("no paper text"),
        "the PDF's text was not read: {all}"
    );
    // An unreadable PDF: the audit goes on without the paper, and says so.
    let c = with_pdf_paper(b"%PDF-1.4\nnot a pdf");
    let s = c.summary(&[]);
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    let row = &s["rows"][0];
    let err = c.log(row["stderr_sha256"].as_str().unwrap());
    assert!(err.contains("audited without the paper's text"), "{err}");
}

#[test]
fn a_killed_study_resumes_and_a_changed_one_is_refused() {
    require!(Need::Root);
    let c = Corpus::two_groups();
    let agent = format!(
        "sleep 1; printf '%s' '{}' > \"$REPRORUN_AUDIT_OUT\"",
        ONE_FINDING.replace('\'', "")
    );
    let mut child = c
        .work
        .cmd(&[
            "audit",
            "run",
            "--corpus",
            "corpus",
            "--db",
            "audit.db",
            "--agent-cmd",
            &agent,
            "--repeats",
            "3",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once at least one run is recorded and others are in flight.
    let db = c.work.path().join("audit.db");
    let recorded = || {
        rusqlite::Connection::open(&db)
            .and_then(|c| c.query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, u32>(0)))
            .unwrap_or(0)
    };
    assert!(wait_until(Duration::from_secs(60), || recorded() >= 1));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = child.wait();
    let s = c.summary(&["--agent-cmd", &agent, "--repeats", "3"]);
    assert_eq!(s["runs"], 6, "{s}");
    let mut keys: Vec<String> = s["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}#{}", r["group_id"], r["repeat"]))
        .collect();
    keys.dedup();
    assert_eq!(keys.len(), 6, "every run exactly once: {keys:?}");
    // Another agent on the same database is refused.
    let o = c.run(&["--agent-cmd", "true"]);
    expect_error(&o, "other options");
}

#[test]
fn bad_input_is_one_line_before_anything_runs() {
    let c = Corpus::two_groups();
    for (args, needle) in [
        (vec!["--repeats", "0"], "--repeats"),
        (vec!["--agent", "cmd"], "--agent-cmd"),
        (vec!["--agent", "codex", "--agent-cmd", "x"], "--agent-cmd"),
        (
            vec!["--pass-env", "REPRORUN_TEST_SURELY_UNSET"],
            "REPRORUN_TEST_SURELY_UNSET",
        ),
        (vec!["--allow-host", "*"], "\"*\""),
    ] {
        let o = c.run(&args);
        expect_bad_input(&o, needle);
    }
    let o = c
        .work
        .run(&["audit", "run", "--corpus", "missing", "--db", "a.db"]);
    expect_error(&o, "missing");
    // A database under /usr would be visible to agents.
    let o = c.work.run(&[
        "audit",
        "run",
        "--corpus",
        "corpus",
        "--db",
        "/usr/local/audit.db",
    ]);
    expect_error(&o, "/usr");
    assert!(!Path::new("/usr/local/audit.db").exists());
}

/// A scripted Responses-API server on loopback (inside TLS under `tls` when given): every
/// `POST .../responses` is answered with one assistant message holding `text`, and a usage
/// of 1000 input tokens (200 cached) and 50 output tokens. Returns the port and the request
/// heads and bodies it saw.
pub(crate) fn scripted_model(
    text: &'static str,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    crate::common::tls::serve_each(listener, tls, move |stream| {
        let Some(req) = read_request(stream) else {
            return;
        };
        s.lock().unwrap().push(req);
        let event = |t: &str, mut d: serde_json::Value| {
            d["type"] = t.into();
            format!("event: {t}\ndata: {d}\n\n")
        };
        let body = [
            event(
                "response.created",
                serde_json::json!({"response": {"id": "resp_1"}}),
            ),
            event(
                "response.output_item.done",
                serde_json::json!({"output_index": 0,
                "item": {"type": "message", "role": "assistant", "id": "msg_1",
                         "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
            ),
            event(
                "response.completed",
                serde_json::json!({"response": {"id": "resp_1",
                "usage": {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 200},
                          "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 1050}}}),
            ),
        ]
        .concat();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{body}"
        );
    });
    (port, seen)
}

/// The real Codex CLI, pointed at a scripted model through the allowlist over plain HTTP:
/// its final message becomes the run's findings, its token counts the run's; with
/// `--key-in-sandbox` the key passed by name reaches the model and nothing of it is stored.
/// (Over TLS with the key kept out, the default: `audit_keys.rs`.)
#[test]
fn codex_audits_through_the_allowlist_with_a_scripted_model() {
    require!(Need::Root, Need::Tool("codex"));
    let (port, seen) = scripted_model(ONE_FINDING_LINE, None);
    let c = Corpus::two_groups();
    let mut cmd = c.work.cmd(&[
        "audit",
        "run",
        "--corpus",
        "corpus",
        "--db",
        "audit.db",
        "--json",
        "--agent",
        "codex",
        "--model",
        "gpt-test",
        "--timeout",
        "120s",
        "--model-base-url",
        &format!("http://api.test:{port}/v1"),
        "--allow-host",
        &format!("api.test:{port}"),
        "--allow-host",
        &format!("127.0.0.1:{port}"),
        "--add-host",
        "api.test:127.0.0.1",
        "--key-in-sandbox",
        "--pass-env",
        "OPENAI_API_KEY",
    ]);
    cmd.env("OPENAI_API_KEY", "sk-reprorun-test-secret")
        .stdin(Stdio::null());
    let o = cmd.output().unwrap();
    let s: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    assert_eq!(s["findings"], 2, "{s}");
    assert_eq!(s["input_tokens"], 2 * 800, "{s}");
    assert_eq!(s["cached_input_tokens"], 2 * 200, "{s}");
    assert_eq!(s["output_tokens"], 2 * 50, "{s}");
    let seen = seen.lock().unwrap().clone();
    let request = seen
        .iter()
        .find(|r| r.contains("/responses"))
        .unwrap_or_else(|| panic!("no Responses request: {seen:?}"));
    assert!(
        request.contains("sk-reprorun-test-secret"),
        "the key reached the model"
    );
    assert!(
        request.contains("/work/repo"),
        "the prompt names the snapshot"
    );
    // The key is in no file of the study.
    for entry in walk(c.work.path()) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("sk-reprorun-test-secret"),
            "{} holds the key",
            entry.display()
        );
    }
}

/// Every regular file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            out.extend(walk(&e.path()));
        } else if ft.is_file() {
            out.push(e.path());
        }
    }
    out
}

/// A scripted Anthropic Messages API on loopback (inside TLS under `tls` when given): every
/// streamed `POST /v1/messages` is answered with one text block holding `text` and a usage
/// of 900 input tokens, 100 read from the cache, 40 output tokens.
pub(crate) fn scripted_claude(
    text: &'static str,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    crate::common::tls::serve_each(listener, tls, move |stream| {
        let Some(req) = read_request(stream) else {
            return;
        };
        s.lock().unwrap().push(req.clone());
        let event = |t: &str, mut d: serde_json::Value| {
            d["type"] = t.into();
            format!("event: {t}\ndata: {d}\n\n")
        };
        let body = [
            event("message_start", serde_json::json!({"message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 900, "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 0, "output_tokens": 1}}})),
            event("content_block_start", serde_json::json!({"index": 0, "content_block": {"type": "text", "text": ""}})),
            event("content_block_delta", serde_json::json!({"index": 0, "delta": {"type": "text_delta", "text": text}})),
            event("content_block_stop", serde_json::json!({"index": 0})),
            event("message_delta", serde_json::json!({"delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 40}})),
            event("message_stop", serde_json::json!({})),
        ]
        .concat();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{body}"
        );
    });
    (port, seen)
}

/// One HTTP request (head and Content-Length body) as text.
fn read_request(stream: &mut dyn crate::common::tls::Stream) -> Option<String> {
    let mut req = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
        req.extend_from_slice(&buf[..n]);
        if let Some(end) = req.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&req[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while req.len() < end + 4 + len {
                let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
                req.extend_from_slice(&buf[..n]);
            }
            return Some(String::from_utf8_lossy(&req).into_owned());
        }
    }
}

/// The real Claude Code CLI against a scripted Messages API through the allowlist over plain
/// HTTP, the key in the sandbox (`--key-in-sandbox`): read-only tools, its result text
/// becomes the findings, its usage and cost the run's.
#[test]
fn claude_code_audits_through_the_allowlist_with_a_scripted_model() {
    require!(Need::Root, Need::Tool("claude"));
    let (port, seen) = scripted_claude(ONE_FINDING_LINE, None);
    let c = Corpus::two_groups();
    let mut cmd = c.work.cmd(&[
        "audit",
        "run",
        "--corpus",
        "corpus",
        "--db",
        "audit.db",
        "--json",
        "--agent",
        "claude-code",
        "--model",
        "claude-test",
        "--timeout",
        "120s",
        "--model-base-url",
        &format!("http://api.test:{port}"),
        "--allow-host",
        &format!("api.test:{port}"),
        "--allow-host",
        &format!("127.0.0.1:{port}"),
        "--add-host",
        "api.test:127.0.0.1",
        "--key-in-sandbox",
        "--pass-env",
        "ANTHROPIC_API_KEY",
    ]);
    cmd.env("ANTHROPIC_API_KEY", "sk-ant-reprorun-test")
        .stdin(Stdio::null());
    let o = cmd.output().unwrap();
    let s: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    assert_eq!(s["findings"], 2, "{s}");
    assert_eq!(s["cached_input_tokens"], 2 * 100, "{s}");
    assert_eq!(s["output_tokens"], 2 * 40, "{s}");
    assert_eq!(s["rows"][0]["cost_source"], "agent", "{s}");
    let seen = seen.lock().unwrap().clone();
    let request = seen
        .iter()
        .find(|r| r.contains("/v1/messages"))
        .unwrap_or_else(|| panic!("no Messages request: {seen:?}"));
    assert!(
        request.contains("sk-ant-reprorun-test"),
        "the key reached the model"
    );
    assert!(!request.contains("\"Bash\""), "Bash offered to the model");
}
