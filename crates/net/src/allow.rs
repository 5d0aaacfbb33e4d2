//! Allowlist patterns: `PATTERN[:PORT]` as users write them (`--allow-host`,
//! `--allow-file`, `org.reprorun.net.allow`, `allow:` of `reproduce --no-shim-net`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::Egress;

/// The port a pattern without one allows.
pub(crate) const DEFAULT_PORT: u16 = 443;

/// Longest DNS name (without the trailing dot) and label.
const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;

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
        parse_rule(text.trim()).map_err(|why| AllowError::Pattern {
            pattern: text.to_string(),
            why,
        })
    }

    /// Whether this rule's host part matches `target` (whatever the port).
    pub(crate) fn host_matches(&self, target: &Target) -> bool {
        match (&self.host, target) {
            (HostPattern::Exact(e), Target::Name(n)) => e == n,
            (HostPattern::Suffix(s), Target::Name(n)) => n
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(a), Target::Ip(b)) => a == b,
            _ => false,
        }
    }
}

fn parse_rule(text: &str) -> Result<Rule, String> {
    if text.is_empty() {
        return Err("empty pattern".into());
    }
    let (host, port) = split_host_port(text)?;
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => parse_port(p)?,
    };
    let host = match host {
        HostText::Ip(ip) => HostPattern::Ip(ip),
        HostText::Name("*") => {
            return Err(
                "a bare `*` would allow every host; name the hosts (`*.example.com`)".into(),
            )
        }
        HostText::Name(name) => match name.strip_prefix("*.") {
            Some(suffix) if !suffix.contains('*') => HostPattern::Suffix(normalize_name(suffix)?),
            _ if name.contains('*') => {
                return Err("`*` is only allowed as a whole leading label (`*.example.com`)".into())
            }
            _ => HostPattern::Exact(normalize_name(name)?),
        },
    };
    Ok(Rule { host, port })
}

/// The host part of a pattern or request, before normalization.
enum HostText<'a> {
    Name(&'a str),
    Ip(IpAddr),
}

/// Splits `host[:port]`, `[v6][:port]` or a bare v6 address (no port).
fn split_host_port(text: &str) -> Result<(HostText<'_>, Option<&str>), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or("`[` without a closing `]`")?;
        let ip: Ipv6Addr = inside
            .parse()
            .map_err(|_| format!("{inside:?} in brackets is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or("expected `:PORT` after `]`")?,
            ),
        };
        return Ok((HostText::Ip(IpAddr::V6(ip)), port));
    }
    if text.matches(':').count() > 1 {
        let ip: Ipv6Addr = text.parse().map_err(|_| {
            "more than one `:`; write an IPv6 address in brackets: [::1]:8080".to_string()
        })?;
        return Ok((HostText::Ip(IpAddr::V6(ip)), None));
    }
    let (host, port) = match text.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (text, None),
    };
    if host.is_empty() {
        return Err("no host before the port".into());
    }
    Ok(match host.parse::<Ipv4Addr>() {
        Ok(ip) => (HostText::Ip(IpAddr::V4(ip)), port),
        Err(_) => (HostText::Name(host), port),
    })
}

fn parse_port(text: &str) -> Result<u16, String> {
    if text == "*" {
        return Err(
            "`:*` (any port) is not supported; name the ports, one pattern each (host:443, host:80)"
                .into(),
        );
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port {text:?} is not a number"));
    }
    match text.parse::<u32>() {
        Ok(p @ 1..=65535) => Ok(p as u16),
        _ => Err(format!("port {text} is out of range 1-65535")),
    }
}

/// Normalizes a DNS name: case-folded, trailing dot stripped, IDNA A-labels; refuses empty
/// or over-long labels and names and anything outside letters, digits and hyphens.
pub(crate) fn normalize_name(name: &str) -> Result<String, String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err("empty name".into());
    }
    if name.contains('*') {
        return Err("`*` is only allowed as a whole leading label (`*.example.com`)".into());
    }
    let ascii = idna::domain_to_ascii_cow(name.as_bytes(), idna::AsciiDenyList::URL)
        .map_err(|_| format!("{name:?} is not a valid (IDNA) host name"))?;
    if ascii.len() > MAX_NAME {
        return Err(format!("name longer than {MAX_NAME} characters"));
    }
    for label in ascii.split('.') {
        if label.is_empty() {
            return Err("empty label (`..`, or a leading or trailing dot)".into());
        }
        if label.len() > MAX_LABEL {
            return Err(format!("label longer than {MAX_LABEL} characters"));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
        {
            return Err(format!("character {c:?} is not a letter, digit or hyphen"));
        }
    }
    Ok(ascii.into_owned())
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Exact(n) => write!(f, "{n}:{}", self.port),
            HostPattern::Suffix(s) => write!(f, "*.{s}:{}", self.port),
            HostPattern::Ip(ip) => write!(f, "{}", std::net::SocketAddr::new(*ip, self.port)),
        }
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
pub fn read_file(path: &Path) -> Result<Vec<Rule>, AllowError> {
    // A regular file of at most 1 MiB (never a FIFO or device an earlier run left).
    let text = reprorun_base::sys::hostpath::read_to_string(path, true, 1 << 20).map_err(|e| {
        AllowError::File {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        }
    })?;
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(Rule::parse)
        .collect()
}

/// Parses `--add-host NAME:ADDRESS` (Docker's form; `[v6]` or bare v6 after the first colon).
pub fn parse_add_host(text: &str) -> Result<(String, IpAddr), AllowError> {
    let err = |why: String| AllowError::AddHost {
        text: text.to_string(),
        why,
    };
    let at = text
        .find([':', '='])
        .ok_or_else(|| err("no `:` between the name and the address".into()))?;
    let (name, addr) = (&text[..at], &text[at + 1..]);
    let addr = addr
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or(addr);
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| err(format!("{addr:?} is not an IP address")))?;
    let name = normalize_name(name).map_err(err)?;
    Ok((name, ip))
}

/// What a client asked to reach: a name, or an IP address literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Name(String),
    Ip(IpAddr),
}

impl Target {
    /// Reads the host of a request (`example.com`, `127.0.0.1`, `[::1]`, `::1`); names are
    /// normalized as the allowlist's are.
    pub(crate) fn parse(host: &str) -> Result<Target, String> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Target::Ip(ip));
        }
        normalize_name(host).map(Target::Name)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(n) => f.write_str(n),
            Target::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Target::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// Why the allowlist refused a request (one line each).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum Refusal {
    #[error("egress to {target}:{port} not in the allowlist")]
    NotListed { target: String, port: u16 },
    #[error(
        "egress to {target}:{port}: port {port} not allowed for {target} (allowed: {allowed})"
    )]
    Port {
        target: String,
        port: u16,
        allowed: String,
    },
    #[error("egress to {target}:{port}: IP literal not in the allowlist")]
    IpLiteral { target: String, port: u16 },
}

impl Egress {
    /// The first rule allowing `target` on `port`, or why none does.
    pub(crate) fn decide(&self, target: &Target, port: u16) -> Result<&Rule, Refusal> {
        let matching: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.host_matches(target))
            .collect();
        if let Some(rule) = matching.iter().find(|r| r.port == port) {
            return Ok(rule);
        }
        let shown = target.to_string();
        if !matching.is_empty() {
            let mut ports: Vec<u16> = matching.iter().map(|r| r.port).collect();
            ports.sort_unstable();
            ports.dedup();
            let allowed = ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(Refusal::Port {
                target: shown,
                port,
                allowed,
            });
        }
        Err(match target {
            Target::Name(_) => Refusal::NotListed {
                target: shown,
                port,
            },
            Target::Ip(_) => Refusal::IpLiteral {
                target: shown,
                port,
            },
        })
    }

    /// Whether `ip` with `port` is itself allowlisted (which lifts the forbidden-address check).
    pub(crate) fn allows_ip(&self, ip: IpAddr, port: u16) -> bool {
        self.rules
            .iter()
            .any(|r| r.port == port && r.host == HostPattern::Ip(ip))
    }

    /// The `--add-host` addresses of `name` (already normalized), in the order given.
    pub(crate) fn host_override(&self, name: &str) -> Vec<IpAddr> {
        self.hosts
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, ip)| *ip)
            .collect()
    }
}

#[cfg(test)]
mod tests;
