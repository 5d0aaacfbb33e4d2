//! The model key of `audit run` and `audit judge` agents (issue 47, `spec/audit.md`): by
//! default it never enters the sandbox. The real Codex and Claude Code CLIs against scripted
//! model servers on loopback over TLS (a test CA, `--upstream-ca`), reached through an
//! allowlisted name: the server receives the real key, the agent's environment holds a
//! placeholder of its own per run, the run's network record names the secret and its host,
//! and no file of the study holds the value.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::audit_run::{scripted_claude, scripted_model, ONE_FINDING_LINE};
use crate::common::audit::Corpus;
use crate::common::tls::TestCa;
use crate::common::*;

/// An agent root (`--agent-root`) whose `bin/NAME` prints the key's variable and the CA
/// variables the CLIs read to stderr (the run's stderr log), then runs the real CLI.
fn printing_root(work: &Path, name: &str, var: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let root = work.join("agent");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    let script = format!(
        "#!/bin/sh\nenv | grep -E '^({var}|SSL_CERT_FILE|NODE_EXTRA_CA_CERTS)=' >&2\nexec /usr/bin/{name} \"$@\"\n"
    );
    let bin = root.join("bin").join(name);
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    root
}

/// A log of the study (`audit.db.logs/DIGEST`).
fn log(c: &Corpus, digest: &serde_json::Value) -> String {
    let digest = digest
        .as_str()
        .unwrap_or_else(|| panic!("no digest: {digest}"));
    std::fs::read_to_string(c.work.path().join("audit.db.logs").join(digest)).unwrap()
}

/// Runs `agent` over the two-group corpus with the key `var`=`real` kept out of the
/// sandbox, the model at `https://api.test:PORT{path}` under `ca`; checks what every agent
/// CLI must show and returns the study's summary.
fn keyed_study(
    c: &Corpus,
    agent: &str,
    model: &str,
    url: &str,
    port: u16,
    ca: &TestCa,
    (var, real): (&str, &str),
) -> serde_json::Value {
    std::fs::write(c.work.path().join("test-ca.pem"), &ca.pem).unwrap();
    let root = printing_root(
        c.work.path(),
        if agent == "codex" { "codex" } else { "claude" },
        var,
    );
    let mut cmd = c.work.cmd(&[
        "audit",
        "run",
        "--corpus",
        "corpus",
        "--db",
        "audit.db",
        "--json",
        "--agent",
        agent,
        "--model",
        model,
        "--timeout",
        "120s",
        "--model-base-url",
        url,
        "--upstream-ca",
        "test-ca.pem",
        // The upstream is on the host's loopback: that address is allowed by itself.
        "--allow-host",
        &format!("127.0.0.1:{port}"),
        "--add-host",
        "api.test:127.0.0.1",
        "--agent-root",
        root.to_str().unwrap(),
    ]);
    cmd.env(var, real).stdin(Stdio::null());
    let o = cmd.output().unwrap();
    let mut s: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    assert_eq!(s["findings"], 2, "{s}");
    let mut placeholders = Vec::new();
    for row in s["rows"].as_array().unwrap() {
        // The agent's environment: a placeholder of the key's shape, the run's CA bundle.
        let err = log(c, &row["stderr_sha256"]);
        let seen = err
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{var}=")))
            .unwrap_or_else(|| panic!("{var} not in the agent's environment: {err}"));
        assert_ne!(seen, real);
        assert_eq!(seen.len(), real.len(), "{seen}");
        assert!(err.contains("SSL_CERT_FILE=/run/reprorun-ca.pem"), "{err}");
        assert!(
            err.contains("NODE_EXTRA_CA_CERTS=/run/reprorun-ca.pem"),
            "{err}"
        );
        placeholders.push(seen.to_string());
        // The run's network record: the secret's name and host, never the value.
        let net: serde_json::Value = serde_json::from_str(&log(c, &row["network_sha256"])).unwrap();
        let to_api: Vec<&serde_json::Value> = net["network"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["host"] == "api.test" && r["port"] == port)
            .collect();
        assert!(!to_api.is_empty(), "{net}");
        for r in &to_api {
            assert_eq!(r["decision"], "allowed", "{net}");
            assert_eq!(r["injected"], serde_json::json!([var]), "{net}");
        }
        assert!(!net.to_string().contains(real), "{net}");
    }
    assert_ne!(placeholders[0], placeholders[1], "one placeholder per run");
    // The key is in no file of the study, its logs and records included.
    for entry in walk(c.work.path()) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(real),
            "{} holds the key",
            entry.display()
        );
    }
    s["placeholders"] = placeholders.into();
    s
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

/// Codex (`SSL_CERT_FILE` names its CA bundle; the key in `Authorization: Bearer`).
#[test]
fn codex_gets_a_placeholder_and_the_model_api_the_key_over_tls() {
    require!(Need::Root, Need::Tool("codex"));
    const REAL: &str = "sk-proj-reprorunTLS7q2W9xKEY";
    let ca = TestCa::new(&["api.test"]);
    let (port, seen) = scripted_model(ONE_FINDING_LINE, Some(ca.config.clone()));
    let c = Corpus::two_groups();
    let url = format!("https://api.test:{port}/v1");
    let s = keyed_study(
        &c,
        "codex",
        "gpt-test",
        &url,
        port,
        &ca,
        ("OPENAI_API_KEY", REAL),
    );
    assert_eq!(s["output_tokens"], 2 * 50, "{s}");
    let seen = seen.lock().unwrap().clone();
    let requests: Vec<&String> = seen.iter().filter(|r| r.contains("/responses")).collect();
    assert!(!requests.is_empty(), "no Responses request: {seen:?}");
    for r in &requests {
        assert!(
            r.to_ascii_lowercase().contains(&format!(
                "authorization: bearer {}",
                REAL.to_ascii_lowercase()
            )),
            "the key reached the model: {r}"
        );
    }
    for p in s["placeholders"].as_array().unwrap() {
        assert!(
            !seen.iter().any(|r| r.contains(p.as_str().unwrap())),
            "a placeholder reached the model"
        );
    }
}

/// Claude Code (`NODE_EXTRA_CA_CERTS`; the key in `x-api-key`).
#[test]
fn claude_code_gets_a_placeholder_and_the_model_api_the_key_over_tls() {
    require!(Need::Root, Need::Tool("claude"));
    const REAL: &str = "sk-ant-api03-reprorunTLS5k8ZKEY";
    let ca = TestCa::new(&["api.test"]);
    let (port, seen) = scripted_claude(ONE_FINDING_LINE, Some(ca.config.clone()));
    let c = Corpus::two_groups();
    let url = format!("https://api.test:{port}");
    let s = keyed_study(
        &c,
        "claude-code",
        "claude-test",
        &url,
        port,
        &ca,
        ("ANTHROPIC_API_KEY", REAL),
    );
    assert_eq!(s["output_tokens"], 2 * 40, "{s}");
    let seen = seen.lock().unwrap().clone();
    let requests: Vec<&String> = seen.iter().filter(|r| r.contains("/v1/messages")).collect();
    assert!(!requests.is_empty(), "no Messages request: {seen:?}");
    for r in &requests {
        assert!(
            r.to_ascii_lowercase()
                .contains(&format!("x-api-key: {}", REAL.to_ascii_lowercase())),
            "the key reached the model: {r}"
        );
    }
    for p in s["placeholders"].as_array().unwrap() {
        assert!(
            !seen.iter().any(|r| r.contains(p.as_str().unwrap())),
            "a placeholder reached the model"
        );
    }
}

/// What the default refuses, before anything runs, each with the way out named.
#[test]
fn a_key_the_proxy_cannot_carry_is_one_line_before_anything_runs() {
    let c = Corpus::two_groups();
    let run = |args: &[&str], key: Option<&str>| {
        let mut all = vec!["audit", "run", "--corpus", "corpus", "--db", "audit.db"];
        all.extend_from_slice(args);
        let mut cmd = c.work.cmd(&all);
        match key {
            Some(k) => cmd.env("OPENAI_API_KEY", k),
            None => cmd.env_remove("OPENAI_API_KEY"),
        };
        cmd.stdin(Stdio::null()).output().unwrap()
    };
    const KEY: &str = "sk-proj-reprorun0123456789";
    let key = Some(KEY);
    let o = run(&["--agent", "codex"], None);
    expect_error(&o, "OPENAI_API_KEY is not set");
    assert!(stderr(&o).contains("--key-in-sandbox"), "{}", stderr(&o));
    let o = run(
        &[
            "--agent",
            "codex",
            "--model-base-url",
            "http://api.test:8080/v1",
        ],
        key,
    );
    expect_error(&o, "--model-base-url http://api.test:8080/v1");
    assert!(stderr(&o).contains("--key-in-sandbox"), "{}", stderr(&o));
    let o = run(&["--agent", "codex", "--pass-env", "OPENAI_API_KEY"], key);
    expect_error(&o, "--pass-env OPENAI_API_KEY");
    let o = run(&["--agent", "codex"], Some("sk-short"));
    expect_error(&o, "letters and digits");
    let o = run(&["--upstream-ca", "ca.pem"], key);
    expect_error(&o, "--upstream-ca");
    assert!(!c.work.path().join("audit.db").exists(), "nothing ran");
    // The judge takes the same options and refuses the same way (on a study of the
    // built-in auditor, made offline).
    c.run(&["--json"]);
    let judge = |args: &[&str], key: &str| {
        let mut all = vec!["audit", "judge", "--db", "audit.db"];
        all.extend_from_slice(args);
        c.work
            .cmd(&all)
            .env("OPENAI_API_KEY", key)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = judge(
        &["--judge", "codex", "--model-base-url", "http://api.test:1"],
        KEY,
    );
    expect_error(&o, "--key-in-sandbox");
    let o = judge(&["--judge", "codex", "--pass-env", "OPENAI_API_KEY"], KEY);
    expect_error(&o, "--pass-env OPENAI_API_KEY");
}
