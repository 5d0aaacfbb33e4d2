use super::agent::*;
use super::usage::*;

fn cfg(kind: AgentKind) -> AgentConfig {
    AgentConfig {
        kind,
        cmd: Some("my-agent --fast".into()),
        model: Some("gpt-test".into()),
        base_url: Some("http://127.0.0.1:9/v1".into()),
        max_turns: 7,
        no_paper: false,
        no_order_instruction: false,
        max_findings: 20,
    }
}

#[test]
fn each_agent_starts_read_only_with_the_prompt() {
    let codex = invocation(&cfg(AgentKind::Codex), Some("/work/paper.md"));
    assert_eq!(
        &codex.argv[..5],
        ["codex", "exec", "--json", "-s", "read-only"]
    );
    assert!(codex.argv.contains(&"--output-last-message".to_string()));
    assert!(codex.argv.windows(2).any(|w| w == ["-m", "gpt-test"]));
    assert_eq!(codex.argv.last(), Some(&codex.prompt));
    let toml = codex.codex_config.unwrap();
    assert!(
        toml.contains("base_url = \"http://127.0.0.1:9/v1\""),
        "{toml}"
    );
    assert!(toml.contains("wire_api = \"responses\""), "{toml}");
    assert!(codex
        .env
        .contains(&("CODEX_HOME".into(), CODEX_HOME.into())));

    let claude = invocation(&cfg(AgentKind::ClaudeCode), None);
    let disallowed = claude
        .argv
        .iter()
        .position(|a| a == "--disallowedTools")
        .unwrap();
    assert!(claude.argv[disallowed + 1].contains("Bash"));
    assert!(claude.argv[disallowed + 1].contains("WebFetch"));
    assert!(claude.argv.windows(2).any(|w| w == ["--max-turns", "7"]));
    assert!(claude
        .env
        .contains(&("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9/v1".into())));

    let cmd = invocation(&cfg(AgentKind::Cmd), Some("/work/paper.pdf"));
    assert_eq!(cmd.argv, ["/bin/sh", "-c", "my-agent --fast"]);
    assert!(cmd
        .env
        .contains(&("REPRORUN_AUDIT_PAPER".into(), "/work/paper.pdf".into())));

    let builtin = invocation(&cfg(AgentKind::Builtin), Some("/work/paper.pdf"));
    assert_eq!(builtin.argv[0], SELF_BIN);
    // A PDF paper is handed over like any other: the built-in auditor extracts its text
    // inside its own sandbox (issue 46 §2).
    assert!(
        builtin
            .argv
            .windows(2)
            .any(|w| w == ["--paper", "/work/paper.pdf"]),
        "{:?}",
        builtin.argv
    );
}

#[test]
fn no_paper_leaves_the_paper_out() {
    let mut c = cfg(AgentKind::Cmd);
    c.no_paper = true;
    let inv = invocation(&c, Some("/work/paper.md"));
    assert!(!inv.env.iter().any(|(k, _)| k == "REPRORUN_AUDIT_PAPER"));
}

#[test]
fn tokens_are_read_from_each_agents_own_report() {
    let codex = b"{\"type\":\"thread.started\"}\nnot json\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1000,\"cached_input_tokens\":400,\"output_tokens\":50}}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"cached_input_tokens\":0,\"output_tokens\":5}}\n";
    let u = from_codex_events(codex);
    assert_eq!((u.input, u.cached_input, u.output), (610, 400, 55));
    assert!(u.reported && u.cost_usd.is_none());
    let claude: serde_json::Value = serde_json::json!({"result": "x", "total_cost_usd": 0.25,
        "usage": {"input_tokens": 7, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 90, "output_tokens": 11}});
    let u = from_claude_result(&claude);
    assert_eq!(
        (u.input, u.cached_input, u.output, u.cost_usd),
        (10, 90, 11, Some(0.25))
    );
    assert_eq!(from_usage_file(b"garbage"), Usage::default());
}

#[test]
fn cost_comes_from_the_agent_else_the_price_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prices.json");
    std::fs::write(
        &path,
        r#"{"gpt-test": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}"#,
    )
    .unwrap();
    let prices = Prices::read(&path).unwrap();
    let u = Usage {
        input: 1_000_000,
        cached_input: 2_000_000,
        output: 500_000,
        cost_usd: None,
        reported: true,
    };
    assert_eq!(
        prices.cost(Some("gpt-test"), &u),
        (Some(2.0 + 1.0 + 4.0), "prices")
    );
    assert_eq!(prices.cost(Some("other"), &u), (None, "none"));
    let own = Usage {
        cost_usd: Some(0.1),
        ..u
    };
    assert_eq!(prices.cost(Some("gpt-test"), &own), (Some(0.1), "agent"));
    std::fs::write(&path, r#"{"m": {"input": -1, "output": 1}}"#).unwrap();
    assert!(Prices::read(&path)
        .unwrap_err()
        .to_string()
        .contains("negative"));
    std::fs::write(&path, r#"{"m": {"inptu": 1, "output": 1}}"#).unwrap();
    assert!(Prices::read(&path).is_err());
}
