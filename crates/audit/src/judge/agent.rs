//! The model judges as data: the judge prompt (reprorun's own text), what each judge is
//! started with inside its sandbox, and how its `result.json` is read back.
//!
//! Inside every judge sandbox: `/work/task.json` and `/work/PROMPT.md` (read-only), and
//! `/out`, the one writable directory besides `/tmp`. No repository, no paper, no corpus.

use std::path::Path;

use crate::run::agent::{
    claude_argv, claude_env, codex_argv, AgentConfig, AgentKind, Invocation, CODEX_HOME,
};
use crate::run::usage::Usage;

pub(crate) const TASK: &str = "/work/task.json";
pub(crate) const PROMPT: &str = "/work/PROMPT.md";
pub(crate) const RESULT: &str = "/out/result.json";
/// Claude Code's --max-turns for a judge (it reads one file).
const MAX_TURNS: u32 = 10;

/// Which judge labels the pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JudgeKind {
    /// reprorun's lexical judge: TF-IDF similarity and shared anchors; no model.
    Builtin,
    /// OpenAI's Codex CLI (`codex exec --json -s read-only`).
    Codex,
    /// Anthropic's Claude Code (`claude -p --output-format json`, read-only tools).
    ClaudeCode,
    /// `--judge-cmd CMD`, run by `/bin/sh -c`.
    Cmd,
}

impl JudgeKind {
    /// The judge's name in the study (`judgments.judge`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            JudgeKind::Builtin => "builtin",
            JudgeKind::Codex => "codex",
            JudgeKind::ClaudeCode => "claude-code",
            JudgeKind::Cmd => "cmd",
        }
    }
}

/// A model judge's configuration (its fingerprint is kept in the study).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct JudgeConfig {
    pub(crate) kind: JudgeKind,
    pub(crate) cmd: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) base_url: Option<String>,
}

/// The judge prompt: the labels, the task file, the answer's schema.
pub(crate) fn prompt(result_file: &str) -> String {
    format!(
        r#"# Judge: match audit findings against hidden GitHub issues

You judge an automated reproducibility audit of a research code release. Read the task
file `{TASK}`. It holds:

- `hidden_issues`: real GitHub issues users filed about this release (title, body, the
  comments made before it was fixed; `target` is open, closed_gold or closed_silver);
- `findings`: the audit's findings, ranked, each with its `finding_index` (0-based) and
  `finding_id`: `issue_title`, `user_symptom`, `trigger_context`, `root_cause`, `evidence`,
  `impact`, ...

A hidden issue marked `post_fix: true` is already fixed in this release: label what the
findings say about it all the same; a match there counts as a false positive.

Label every (hidden issue, finding) pair with one of:

- `exact`: the finding identifies the same reproduction blocker as the issue and locates
  it: the same root cause in the same artifact (file, script, config, dataset or checkpoint),
  so that acting on the finding would fix what the issue reports.
- `semantic`: the finding is semantically related to the issue: it points at the same
  problem area of the reproduction (the same failing stage and the same kind of blocker:
  the environment or a dependency, data or model access, training, evaluation, hardware, a
  paper/repository mismatch) even when its exact cause, file or symptom differs, so that a
  reader of the finding would be led to the issue's problem.
- `none`: unrelated, or too vague to relate to the issue.

Judge the problem, not the wording. A finding that names the same file but a different
problem is `none`. Do not guess beyond what the texts say.

Write one JSON document to `{result_file}` (and nothing else):

```json
{{
  "issue_alignments": [
    {{"hidden_issue_id": "owner/name#N", "target": "open", "issue_number": 12,
      "best_label": "exact|semantic|none", "best_finding_id": "F1 or null",
      "best_finding_index": 0,
      "dimension_labels": {{"user_facing_symptom": "exact|semantic|none",
        "trigger_path_or_workflow": "...", "root_cause": "...", "involved_artifact": "...",
        "impact": "..."}},
      "rationale": "one or two sentences", "matched_evidence": ["what both name"]}}
  ],
  "finding_alignments": [
    {{"finding_id": "F1", "finding_index": 0, "best_label": "exact|semantic|none",
      "matched_hidden_issue_ids": ["owner/name#N"], "matched_targets": ["open"],
      "rationale": "..."}}
  ],
  "pair_labels": [
    {{"hidden_issue_id": "owner/name#N", "finding_index": 0, "label": "exact|semantic|none"}}
  ],
  "notes": ""
}}
```

Rules the answer is checked against (an answer that breaks one is refused):

- `pair_labels` holds every (hidden issue, finding) pair exactly once: hidden issues × findings
  rows.
- Every hidden issue has one `issue_alignments` entry; its `best_label` is the strongest
  label of its pairs (exact > semantic > none) and `best_finding_index` one finding with
  that label (null when none).
- A `finding_alignments` entry's `best_label` is the strongest label of that finding's pairs.
- Only the labels exact, semantic, none; only ids and indices the task holds.
"#
    )
}

/// The text added for judges that answer in a message instead of a file.
const ANSWER_IN_MESSAGE: &str = "\n\nYou cannot write files in this environment: give the result JSON document as your final message, and nothing else.\n";

/// The command line and environment of a model judge.
pub(crate) fn invocation(cfg: &JudgeConfig) -> Invocation {
    let mut text = prompt(RESULT);
    let mut env = Vec::new();
    let mut codex_config = None;
    let argv = match cfg.kind {
        JudgeKind::Codex => {
            text.push_str(ANSWER_IN_MESSAGE);
            env.push(("CODEX_HOME".into(), CODEX_HOME.into()));
            codex_config = Some(crate::run::agent::codex_config_toml(&AgentConfig {
                kind: AgentKind::Codex,
                cmd: None,
                model: cfg.model.clone(),
                base_url: cfg.base_url.clone(),
                max_turns: MAX_TURNS,
                no_paper: true,
                no_order_instruction: false,
                max_findings: 0,
            }));
            codex_argv(cfg.model.as_deref(), &text)
        }
        JudgeKind::ClaudeCode => {
            text.push_str(ANSWER_IN_MESSAGE);
            env.extend(claude_env(cfg.base_url.as_deref()));
            claude_argv(&text, MAX_TURNS, cfg.model.as_deref())
        }
        JudgeKind::Cmd | JudgeKind::Builtin => {
            env.push(("REPRORUN_JUDGE_TASK".into(), TASK.into()));
            env.push(("REPRORUN_JUDGE_OUT".into(), RESULT.into()));
            env.push(("REPRORUN_JUDGE_PROMPT".into(), PROMPT.into()));
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

/// What a judge answered: `result.json`'s bytes (or why there are none), and its tokens.
#[derive(Debug, Default)]
pub(crate) struct Answer {
    pub(crate) document: Option<Vec<u8>>,
    pub(crate) missing: Option<String>,
    pub(crate) usage: Usage,
}

/// Reads a judge's answer from its output directory and standard output.
pub(crate) fn answer(kind: JudgeKind, out: &Path, stdout: &[u8]) -> Answer {
    use crate::run::usage;
    let read = |name: &str| reprorun_pipeline::unit::read_untrusted(out, name);
    let (message, usage) = match kind {
        JudgeKind::Builtin | JudgeKind::Cmd => {
            let usage = read("usage.json")
                .map(|b| usage::from_usage_file(&b))
                .unwrap_or_default();
            (None, usage)
        }
        JudgeKind::Codex => (read("last_message.txt"), usage::from_codex_events(stdout)),
        JudgeKind::ClaudeCode => {
            let parsed: Option<serde_json::Value> = serde_json::from_slice(stdout).ok();
            let usage = parsed
                .as_ref()
                .map(usage::from_claude_result)
                .unwrap_or_default();
            let message = parsed
                .as_ref()
                .and_then(|v| v["result"].as_str())
                .map(|s| s.as_bytes().to_vec());
            (message, usage)
        }
    };
    if let Some(doc) = read("result.json") {
        return Answer {
            document: Some(doc),
            missing: None,
            usage,
        };
    }
    let (document, missing) = match (kind, message) {
        (JudgeKind::Builtin | JudgeKind::Cmd, _) => {
            (None, Some("no result.json was written".to_string()))
        }
        (_, None) => (None, Some("the judge gave no final message".to_string())),
        (_, Some(m)) => match extract(&String::from_utf8_lossy(&m)) {
            Some(doc) => (Some(doc.as_bytes().to_vec()), None),
            None => (
                None,
                Some("the final message holds no JSON document".into()),
            ),
        },
    };
    Answer {
        document,
        missing,
        usage,
    }
}

/// The result document in a final message: the last fenced block that is an object
/// mentioning `"pair_labels"` or `"issue_alignments"` (the paper's form has only the
/// latter), else the text from its first `{` to its last `}`.
pub(crate) fn extract(text: &str) -> Option<&str> {
    let mut found = None;
    let mut parts = text.split("```");
    parts.next();
    // Odd pieces are inside fences.
    while let Some(inside) = parts.next() {
        let body = inside
            .strip_prefix("json")
            .or_else(|| inside.strip_prefix("JSON"))
            .unwrap_or(inside)
            .trim();
        if body.starts_with('{')
            && (body.contains("\"pair_labels\"") || body.contains("\"issue_alignments\""))
        {
            found = Some(body);
        }
        parts.next();
    }
    found.or_else(|| {
        let (start, end) = (text.find('{')?, text.rfind('}')?);
        (start < end).then(|| &text[start..=end])
    })
}
