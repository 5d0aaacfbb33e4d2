//! The agents `audit run` knows, as data: what each is started with inside the sandbox
//! ([`invocation`]) and how its answer and its token counts are read back ([`answer`]).
//!
//! Inside every sandbox: `/work/repo` (the snapshot, read-only), `/work/paper.<ext>` (unless
//! `--no-paper`), `/work/PROMPT.md`, and `/out`, the one writable directory besides `/tmp`.

use std::path::Path;

use super::usage::Usage;
use crate::prompt::{prompt, PromptOptions};

/// Where things are inside the sandbox.
pub(crate) const REPO: &str = "/work/repo";
pub(crate) const PROMPT: &str = "/work/PROMPT.md";
pub(crate) const OUT: &str = "/out";
pub(crate) const FINDINGS: &str = "/out/findings.json";
/// Codex's and Claude Code's last message, for agents that cannot write files.
pub(crate) const LAST_MESSAGE: &str = "/out/last_message.txt";
/// Where the reprorun binary is bound for the built-in auditor.
pub(crate) const SELF_BIN: &str = "/.reprorun/bin/reprorun";
/// Codex's home: a writable directory per run holding the provider configuration.
pub(crate) const CODEX_HOME: &str = "/codex-home";

/// Which agent audits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    /// reprorun's rule-based static auditor: no model, offline.
    Builtin,
    /// OpenAI's Codex CLI (`codex exec --json -s read-only`).
    Codex,
    /// Anthropic's Claude Code (`claude -p --output-format json`, read-only tools).
    ClaudeCode,
    /// `--agent-cmd CMD`, run by `/bin/sh -c`.
    Cmd,
}

/// How the agent is configured (all of it is in the study's options fingerprint).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct AgentConfig {
    pub(crate) kind: AgentKind,
    pub(crate) cmd: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) base_url: Option<String>,
    pub(crate) max_turns: u32,
    pub(crate) no_paper: bool,
    pub(crate) no_order_instruction: bool,
    pub(crate) max_findings: usize,
}

impl AgentConfig {
    /// How tables name this configuration: the agent, its model, and the ablations
    /// (`codex gpt-5`, `builtin`, `cmd no-paper`).
    pub(crate) fn label(&self) -> String {
        let mut parts = vec![match self.kind {
            AgentKind::Builtin => "builtin",
            AgentKind::Codex => "codex",
            AgentKind::ClaudeCode => "claude-code",
            AgentKind::Cmd => "cmd",
        }
        .to_string()];
        parts.extend(self.model.clone());
        if self.no_paper {
            parts.push("no-paper".into());
        }
        if self.no_order_instruction {
            parts.push("no-order".into());
        }
        parts.join(" ")
    }
}

/// What one run starts: the command, its extra environment, and files written into the
/// run's directories before it starts (paths relative to the scratch directory).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Invocation {
    pub(crate) argv: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    /// The prompt, written at [`PROMPT`].
    pub(crate) prompt: String,
    /// Codex's `config.toml` (written into the run's [`CODEX_HOME`]).
    pub(crate) codex_config: Option<String>,
}

/// The text added for agents that answer in a message instead of a file.
const ANSWER_IN_MESSAGE: &str = "\n\nYou cannot write files in this environment: give the findings JSON document as your final message, and nothing else.\n";

/// The command line and environment of `cfg`'s agent, given the paper's path inside
/// (`None`: no paper, or `--no-paper`).
pub(crate) fn invocation(cfg: &AgentConfig, paper: Option<&str>) -> Invocation {
    let paper = paper.filter(|_| !cfg.no_paper).map(str::to_string);
    let mut text = prompt(&PromptOptions {
        paper_file: paper.clone(),
        repo_dir: REPO.into(),
        out_file: FINDINGS.into(),
        order_instruction: !cfg.no_order_instruction,
        max_findings: cfg.max_findings,
    });
    let mut env = Vec::new();
    let mut codex_config = None;
    let argv = match cfg.kind {
        AgentKind::Builtin => {
            let mut argv: Vec<String> = [SELF_BIN, "audit", "agent-builtin", "--repo", REPO]
                .map(String::from)
                .to_vec();
            argv.extend(["--out".into(), FINDINGS.into()]);
            if let Some(p) = paper {
                argv.extend(["--paper".into(), p.clone()]);
            }
            argv
        }
        AgentKind::Codex => {
            text.push_str(ANSWER_IN_MESSAGE);
            env.push(("CODEX_HOME".into(), CODEX_HOME.into()));
            codex_config = Some(codex_config_toml(cfg));
            codex_argv(cfg.model.as_deref(), &text)
        }
        AgentKind::ClaudeCode => {
            text.push_str(ANSWER_IN_MESSAGE);
            env.extend(claude_env(cfg.base_url.as_deref()));
            claude_argv(&text, cfg.max_turns, cfg.model.as_deref())
        }
        AgentKind::Cmd => {
            env.push(("REPRORUN_AUDIT_PROMPT".into(), PROMPT.into()));
            env.push(("REPRORUN_AUDIT_OUT".into(), FINDINGS.into()));
            env.push(("REPRORUN_AUDIT_REPO".into(), REPO.into()));
            if let Some(p) = &paper {
                env.push(("REPRORUN_AUDIT_PAPER".into(), p.clone()));
            }
            vec![
                "/bin/sh".into(),
                "-c".into(),
                cfg.cmd.clone().unwrap_or_default(),
            ]
        }
    };
    Invocation {
        argv,
        env,
        prompt: text,
        codex_config,
    }
}

/// Codex, read-only, its final message into [`LAST_MESSAGE`] (for agents and judges).
pub(crate) fn codex_argv(model: Option<&str>, prompt: &str) -> Vec<String> {
    let mut argv: Vec<String> = [
        "codex",
        "exec",
        "--json",
        "-s",
        "read-only",
        "--skip-git-repo-check",
        "-C",
        "/work",
        "--output-last-message",
        LAST_MESSAGE,
    ]
    .map(String::from)
    .to_vec();
    if let Some(m) = model {
        argv.extend(["-m".into(), m.into()]);
    }
    argv.push(prompt.into());
    argv
}

/// Claude Code, print mode, with the read-only tools only (for agents and judges).
pub(crate) fn claude_argv(prompt: &str, max_turns: u32, model: Option<&str>) -> Vec<String> {
    let mut argv: Vec<String> = ["claude", "-p", prompt, "--output-format", "json"]
        .map(String::from)
        .to_vec();
    argv.extend([
        "--max-turns".into(),
        max_turns.to_string(),
        "--allowedTools".into(),
        "Read,Grep,Glob,LS".into(),
        "--disallowedTools".into(),
        "Bash,WebFetch,WebSearch,Write,Edit,MultiEdit,NotebookEdit".into(),
    ]);
    if let Some(m) = model {
        argv.extend(["--model".into(), m.into()]);
    }
    argv
}

/// Claude Code's environment: the model API's base URL, and no telemetry, update checks or
/// error reports (the model API is the one host it may reach).
pub(crate) fn claude_env(base_url: Option<&str>) -> Vec<(String, String)> {
    let mut env = vec![(
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_string(),
        "1".to_string(),
    )];
    if let Some(url) = base_url {
        env.push(("ANTHROPIC_BASE_URL".into(), url.into()));
    }
    env
}

/// A TOML string (basic string, escaped).
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Codex's configuration: the model, and with `--model-base-url` a provider of reprorun's
/// that speaks the Responses API there with the key from `OPENAI_API_KEY`.
pub(crate) fn codex_config_toml(cfg: &AgentConfig) -> String {
    let mut t = String::new();
    if let Some(m) = &cfg.model {
        t.push_str(&format!("model = {}\n", toml_string(m)));
    }
    if let Some(url) = &cfg.base_url {
        t.push_str("model_provider = \"reprorun\"\n\n[model_providers.reprorun]\n");
        t.push_str("name = \"reprorun\"\n");
        t.push_str(&format!("base_url = {}\n", toml_string(url)));
        t.push_str("env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n");
    }
    t
}

/// What an agent answered: the findings document's bytes (if it gave one) and the tokens
/// it reports.
#[derive(Debug, Default)]
pub(crate) struct Answer {
    /// The findings JSON as the agent gave it; `None`: nothing to read.
    pub(crate) document: Option<Vec<u8>>,
    /// Why there is no document, when that is known.
    pub(crate) missing: Option<String>,
    pub(crate) usage: Usage,
}

/// Reads an agent's answer from its output directory and standard output.
pub(crate) fn answer(kind: AgentKind, out: &Path, stdout: &[u8]) -> Answer {
    let read = |name: &str| reprorun_pipeline::unit::read_untrusted(out, name);
    match kind {
        AgentKind::Builtin | AgentKind::Cmd => Answer {
            document: read("findings.json"),
            missing: None,
            usage: read("usage.json")
                .map(|b| super::usage::from_usage_file(&b))
                .unwrap_or_default(),
        },
        AgentKind::Codex => {
            let usage = super::usage::from_codex_events(stdout);
            let (document, missing) = from_message(read("last_message.txt"));
            Answer {
                document: read("findings.json").or(document),
                missing,
                usage,
            }
        }
        AgentKind::ClaudeCode => {
            let parsed: Option<serde_json::Value> = serde_json::from_slice(stdout).ok();
            let usage = parsed
                .as_ref()
                .map(super::usage::from_claude_result)
                .unwrap_or_default();
            let message = parsed
                .as_ref()
                .and_then(|v| v["result"].as_str())
                .map(|s| s.as_bytes().to_vec());
            let (document, missing) = from_message(message);
            Answer {
                document,
                missing,
                usage,
            }
        }
    }
}

/// The JSON document in a final message (the whole text, or a fenced block in it).
fn from_message(message: Option<Vec<u8>>) -> (Option<Vec<u8>>, Option<String>) {
    let Some(bytes) = message else {
        return (None, Some("the agent gave no final message".into()));
    };
    let text = String::from_utf8_lossy(&bytes);
    match crate::findings::extract_json(&text) {
        Some(json) => (Some(json.as_bytes().to_vec()), None),
        None => (
            None,
            Some("the final message holds no JSON document".into()),
        ),
    }
}
