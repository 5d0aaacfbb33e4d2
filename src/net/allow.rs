//! Allowlist patterns: `PATTERN[:PORT]` as users write them (`--allow-host`,
//! `--allow-file`, `org.reprorun.net.allow`, `allow:` of `reproduce --no-shim-net`).

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The port a pattern without one allows.
pub(crate) const DEFAULT_PORT: u16 = 443;

#[derive(Debug, Error)]
pub enum AllowError {
    #[error("allow pattern {pattern:?}: {why}")]
    Pattern { pattern: String, why: String },
    #[error("--allow-file {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--add-host {text:?}: {why}; write NAME:ADDRESS")]
    AddHost { text: String, why: String },
}

/// What a rule's host part matches.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum HostPattern {
    /// One name, normalized (lower case, no trailing dot, IDNA A-labels).
    Exact(String),
    /// `*.suffix`: any name with one or more labels before `suffix` (not `suffix` itself).
    Suffix(String),
    /// An IP address literal.
    Ip(IpAddr),
}

/// One allowlist entry: a host pattern and one port. Serialized in its canonical text form.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Rule {
    pub host: HostPattern,
    pub port: u16,
}

impl Rule {
    /// Parses `PATTERN[:PORT]` (`[v6]:PORT` for IPv6); the port defaults to 443.
    pub fn parse(text: &str) -> Result<Rule, AllowError> {
        todo!("{text}")
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _ = f;
        todo!()
    }
}

impl From<Rule> for String {
    fn from(r: Rule) -> String {
        r.to_string()
    }
}

impl TryFrom<String> for Rule {
    type Error = AllowError;
    fn try_from(s: String) -> Result<Rule, AllowError> {
        Rule::parse(&s)
    }
}

/// Reads `--allow-file`: one pattern a line; blank lines and `#` comments skipped.
pub(crate) fn read_file(path: &Path) -> Result<Vec<Rule>, AllowError> {
    todo!("{path:?}")
}

/// Parses `--add-host NAME:ADDRESS` (Docker's form; `[v6]` or bare v6 after the first colon).
pub(crate) fn parse_add_host(text: &str) -> Result<(String, IpAddr), AllowError> {
    todo!("{text}")
}
