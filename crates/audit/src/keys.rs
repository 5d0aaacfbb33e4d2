//! The model key of `codex` and `claude-code` agents and judges (issue 47, `spec/audit.md`):
//! by default it never enters the sandbox. The agent sees a placeholder of the key's shape
//! in `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`, made afresh for every run, and the egress
//! proxy puts the real key into request headers to the model API's host only, over TLS it
//! terminates with the run's CA (`exec --inject-env`, `spec/network.md`). `--key-in-sandbox`
//! opts out: the key then enters only by `--pass-env NAME`, as before.
//!
//! Data first: [`model_key`] says which variable goes to which host (from the agent and
//! `--model-base-url`), [`resolve`] checks the caller's value and widens the network choice
//! once per study, and [`inject`] adds a fresh placeholder to each run's request.

use std::path::PathBuf;

use thiserror::Error;

use reprorun_runtime::net::intercept::{self, Inject, InjectError};
use reprorun_runtime::net::Rule;
use reprorun_runtime::plan::{ExecRequest, NetChoice, NetMode};

/// The opt-out flag, as messages name it.
const OPT_OUT: &str = "--key-in-sandbox";

#[derive(Debug, Error)]
pub enum KeyError {
    #[error("--model-base-url {url}: {why}; use an https:// URL whose host is a name, or pass {OPT_OUT} (with --pass-env {name})")]
    BaseUrl {
        url: String,
        name: &'static str,
        why: String,
    },
    #[error("{name} is not set in reprorun's environment: the {agent} agent needs its model key (it goes to {host} through the proxy, never into the sandbox); set it, or pass {OPT_OUT}")]
    Unset {
        name: &'static str,
        agent: &'static str,
        host: String,
    },
    #[error("--pass-env {name}: the model key goes to {host} through the proxy and never enters the sandbox; drop --pass-env {name}, or pass {OPT_OUT} to put it there")]
    Passed { name: &'static str, host: String },
    #[error("--upstream-ca verifies the model API the key goes to; it has no use with {OPT_OUT} or an agent without a model key")]
    UselessCa,
    #[error(transparent)]
    Inject(#[from] InjectError),
    #[error(transparent)]
    Link(#[from] reprorun_runtime::plan::PlanError),
}

/// How the model key reaches the agent: `audit run` and `audit judge` options.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KeyArgs {
    /// Put the model key into the sandbox (pass it with --pass-env NAME) instead of
    /// keeping it out: by default, with codex and claude-code, OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY stays outside, the agent sees a placeholder and the egress proxy
    /// puts the key into request headers to the model API's host only (spec/network.md,
    /// --inject-env).
    #[arg(long)]
    pub key_in_sandbox: bool,
    /// Verify the model API the key goes to against the CA certificates in FILE (PEM)
    /// instead of the host's system bundle (a private or test model server).
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,
}

impl KeyArgs {
    /// These options again, for a cluster worker's command line (paths absolute).
    pub(crate) fn argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.key_in_sandbox {
            v.push(OPT_OUT.to_string());
        }
        if let Some(p) = &self.upstream_ca {
            let p = std::path::absolute(p).unwrap_or_else(|_| p.clone());
            v.extend(["--upstream-ca".into(), p.to_string_lossy().into_owned()]);
        }
        v
    }
}

/// Which agent's key: its variable and the model API it talks to by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    fn variable(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    fn default_host(self) -> &'static str {
        match self {
            Provider::OpenAi => "api.openai.com",
            Provider::Anthropic => "api.anthropic.com",
        }
    }

    fn agent(self) -> &'static str {
        match self {
            Provider::OpenAi => "codex",
            Provider::Anthropic => "claude-code",
        }
    }
}

/// A model key: the variable, and the host and port its value goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelKey {
    pub(crate) name: &'static str,
    pub(crate) host: Rule,
    agent: &'static str,
}

impl ModelKey {
    /// `NAME:HOST:PORT`, as `--inject-env` writes it (the study's fingerprint).
    pub(crate) fn spec(&self) -> String {
        format!("{}:{}", self.name, self.host)
    }
}

/// The key `provider`'s agent needs, going to the host of `base_url` (https only; its
/// port, 443 unless given), or to the provider's own API without one.
pub(crate) fn model_key(provider: Provider, base_url: Option<&str>) -> Result<ModelKey, KeyError> {
    let name = provider.variable();
    let authority = match base_url {
        None => provider.default_host().to_string(),
        Some(url) => authority(url).map_err(|why| KeyError::BaseUrl {
            url: url.to_string(),
            name,
            why,
        })?,
    };
    let (_, host) =
        intercept::parse_spec(&format!("{name}:{authority}")).map_err(|e| KeyError::BaseUrl {
            url: base_url.unwrap_or_default().to_string(),
            name,
            why: match e {
                InjectError::Spec { why, .. } => why,
                other => other.to_string(),
            },
        })?;
    Ok(ModelKey {
        name,
        host,
        agent: provider.agent(),
    })
}

/// The `host[:port]` of an https URL.
fn authority(url: &str) -> Result<String, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "not a URL".to_string())?;
    if !scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "the key is put into requests inside TLS the proxy terminates; a {scheme}:// model API gets none"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("a user or password in the URL".into());
    }
    if authority.is_empty() {
        return Err("no host".into());
    }
    if authority.contains('*') {
        return Err("a pattern is not a host".into());
    }
    Ok(authority.to_string())
}

/// The sandbox's network for an agent or judge of `provider` (`None`: no model key): what
/// `--allow-host` and `--add-host` name, then, unless `--key-in-sandbox`, the model API's host
/// with the key injected ([`resolve`]). Returns the network and the key, once per study.
pub(crate) fn network(
    allow_host: &[Rule],
    add_host: &[(String, std::net::IpAddr)],
    provider: Option<Provider>,
    args: &KeyArgs,
    base_url: Option<&str>,
    pass_env: &[(String, String)],
) -> Result<(NetChoice, Option<ModelKey>), KeyError> {
    let mut net = if allow_host.is_empty() && add_host.is_empty() {
        NetChoice::NONE
    } else {
        NetChoice {
            mode: NetMode::Allow,
            egress: reprorun_runtime::net::Egress {
                rules: allow_host.to_vec(),
                hosts: add_host.to_vec(),
                ..Default::default()
            },
        }
    };
    let key = provider
        .filter(|_| !args.key_in_sandbox)
        .map(|p| model_key(p, base_url))
        .transpose()?;
    resolve(key.as_ref(), args, pass_env, &mut net)?;
    Ok((net, key))
}

/// Checks the caller's side of `key` once per study (its value is set and can have a
/// placeholder; `--pass-env` does not name it) and widens `net` to let the agent reach its
/// host through the proxy, verified against `--upstream-ca` when given.
/// `key`: `None` with `--key-in-sandbox` or for agents without a model key.
pub(crate) fn resolve(
    key: Option<&ModelKey>,
    args: &KeyArgs,
    pass_env: &[(String, String)],
    net: &mut NetChoice,
) -> Result<(), KeyError> {
    let Some(key) = key else {
        return match args.upstream_ca {
            Some(_) => Err(KeyError::UselessCa),
            None => Ok(()),
        };
    };
    let host = key.host.to_string();
    if pass_env.iter().any(|(n, _)| n == key.name) {
        return Err(KeyError::Passed {
            name: key.name,
            host,
        });
    }
    let value = std::env::var(key.name).map_err(|_| KeyError::Unset {
        name: key.name,
        agent: key.agent,
        host,
    })?;
    // The placeholder's rules (printable ASCII, enough letters and digits), checked now.
    intercept::placeholder(key.name, &value)?;
    if let Some(ca) = &args.upstream_ca {
        reprorun_runtime::plan::refuse_link(ca, false, "--upstream-ca")?;
    }
    net.mode = NetMode::Allow;
    if !net.egress.rules.contains(&key.host) {
        net.egress.rules.push(key.host.clone());
    }
    net.egress.upstream_ca = args
        .upstream_ca
        .as_ref()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
    Ok(())
}

/// Gives one run's request a fresh placeholder for `key` (the value stays in reprorun's
/// environment; the executor reads it again when the sandbox starts).
pub(crate) fn inject(req: &mut ExecRequest, key: &ModelKey) -> Result<(), KeyError> {
    let value = std::env::var(key.name).map_err(|_| KeyError::Unset {
        name: key.name,
        agent: key.agent,
        host: key.host.to_string(),
    })?;
    req.egress.inject.push(Inject {
        name: key.name.to_string(),
        host: key.host.clone(),
        placeholder: intercept::placeholder(key.name, &value)?,
    });
    Ok(())
}

#[cfg(test)]
mod tests;
