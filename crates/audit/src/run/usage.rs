//! Tokens and cost of a run, as the agents report them: Codex's `turn.completed` events,
//! Claude Code's result object, a `usage.json` of any other agent; and `--prices`, for
//! agents that report tokens but no cost.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// Tokens of one run: input not served from a cache, cached input, output.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub(crate) input: u64,
    pub(crate) cached_input: u64,
    pub(crate) output: u64,
    /// The cost the agent reported itself (USD).
    pub(crate) cost_usd: Option<f64>,
    /// Whether the agent reported any usage at all.
    pub(crate) reported: bool,
}

fn num(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Codex `exec --json` prints one event a line; each `turn.completed` carries the turn's
/// `usage` (`input_tokens` including `cached_input_tokens`, and `output_tokens`).
pub(crate) fn from_codex_events(stdout: &[u8]) -> Usage {
    let mut u = Usage::default();
    for line in stdout.split(|b| *b == b'\n') {
        let Ok(event) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if event["type"] != "turn.completed" {
            continue;
        }
        let usage = &event["usage"];
        let input = num(&usage["input_tokens"]);
        let cached = num(&usage["cached_input_tokens"]);
        u.input += input.saturating_sub(cached);
        u.cached_input += cached;
        u.output += num(&usage["output_tokens"]);
        u.reported = true;
    }
    u
}

/// Claude Code's `--output-format json` result: `usage` (`input_tokens` uncached,
/// `cache_creation_input_tokens` counted as input, `cache_read_input_tokens` cached,
/// `output_tokens`) and `total_cost_usd`.
pub(crate) fn from_claude_result(v: &serde_json::Value) -> Usage {
    let usage = &v["usage"];
    Usage {
        input: num(&usage["input_tokens"]) + num(&usage["cache_creation_input_tokens"]),
        cached_input: num(&usage["cache_read_input_tokens"]),
        output: num(&usage["output_tokens"]),
        cost_usd: v["total_cost_usd"].as_f64(),
        reported: usage.is_object(),
    }
}

/// `usage.json` an `--agent-cmd` agent may write into /out: `input_tokens`,
/// `cached_input_tokens`, `output_tokens` (input including cached, as Codex counts) and
/// optionally `cost_usd`.
pub(crate) fn from_usage_file(bytes: &[u8]) -> Usage {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Usage::default();
    };
    let input = num(&v["input_tokens"]);
    let cached = num(&v["cached_input_tokens"]);
    Usage {
        input: input.saturating_sub(cached),
        cached_input: cached,
        output: num(&v["output_tokens"]),
        cost_usd: v["cost_usd"].as_f64(),
        reported: v.is_object(),
    }
}

/// USD per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Price {
    pub(crate) input: f64,
    #[serde(default)]
    pub(crate) cached_input: Option<f64>,
    pub(crate) output: f64,
}

/// `--prices FILE`: `{"MODEL": {"input": USD, "cached_input": USD, "output": USD}}`, per
/// million tokens.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Prices(pub(crate) BTreeMap<String, Price>);

#[derive(Debug, thiserror::Error)]
#[error("--prices {path}: {why}")]
pub struct PricesError {
    path: std::path::PathBuf,
    why: String,
}

impl Prices {
    pub(crate) fn read(path: &Path) -> Result<Prices, PricesError> {
        let fail = |why: String| PricesError {
            path: path.to_path_buf(),
            why,
        };
        let text = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
        let map: BTreeMap<String, Price> = serde_json::from_slice(&text).map_err(|e| {
            fail(format!(
                "{e}; expected {{\"MODEL\": {{\"input\": USD, \"cached_input\": USD, \"output\": USD}}}} per million tokens"
            ))
        })?;
        if let Some((m, _)) = map.iter().find(|(_, p)| {
            p.input < 0.0 || p.output < 0.0 || p.cached_input.is_some_and(|c| c < 0.0)
        }) {
            return Err(fail(format!("{m}: a negative price")));
        }
        Ok(Prices(map))
    }

    /// The cost of `u` and where it came from: the agent's own figure, else the price
    /// table's for `model`, else none.
    pub(crate) fn cost(&self, model: Option<&str>, u: &Usage) -> (Option<f64>, &'static str) {
        if let Some(c) = u.cost_usd {
            return (Some(c), "agent");
        }
        match model.and_then(|m| self.0.get(m)) {
            Some(p) if u.reported => {
                let cached = p.cached_input.unwrap_or(p.input);
                let usd = (u.input as f64 * p.input
                    + u.cached_input as f64 * cached
                    + u.output as f64 * p.output)
                    / 1e6;
                (Some(usd), "prices")
            }
            _ => (None, "none"),
        }
    }
}
