//! The egress allowlist (`--net allow`, `spec/network.md`): the patterns users write
//! ([`allow`]), which addresses the proxy refuses whatever the name ([`addr`]; the host's
//! own: [`local`]), the record of every connection attempt ([`log`]) and the proxy that
//! enforces it all ([`proxy`]).
//!
//! The sandbox keeps its own network namespace with loopback only. Its init listens on
//! `127.0.0.1:3128` there and hands the listening socket to the supervisor (or an OCI
//! container's monitor), which accepts on it from the host side: every connection the
//! workload opens to the proxy port is served by a thread in the caller's network
//! namespace, which decides by name, resolves, connects and relays.

pub(crate) mod addr;
pub mod allow;
pub mod cassette;
pub mod intercept;
pub(crate) mod local;
pub mod log;
pub mod proxy;

use std::net::IpAddr;

pub use allow::{AllowError, Rule};

/// The port the proxy listens on inside the sandbox (on 127.0.0.1).
pub const PROXY_PORT: u16 = 3128;

/// The egress policy of a `--net allow` run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Egress {
    /// The allowlist in the order given (an empty list allows nothing).
    pub rules: Vec<Rule>,
    /// `--add-host NAME:ADDR`: names the proxy resolves to these addresses instead of
    /// asking the host's resolver (names normalized as the allowlist's are).
    pub hosts: Vec<(String, IpAddr)>,
    /// `--inject-env`: the secrets the proxy puts back, by host (no values here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inject: Vec<intercept::Inject>,
    /// `--upstream-ca`: the CA bundle terminated upstreams are verified against (the host's
    /// system bundle without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_ca: Option<std::path::PathBuf>,
    /// `--net-record DIR`: the cassette the run's exchanges are written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<std::path::PathBuf>,
    /// `--net-replay DIR`: the cassette the run's requests are answered from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<std::path::PathBuf>,
}

impl Egress {
    /// Whether the proxy terminates TLS (`--inject-env`, `--net-record`, `--net-replay`): the
    /// sandbox then trusts the run's CA.
    pub fn terminates_tls(&self) -> bool {
        !self.inject.is_empty() || self.record.is_some() || self.replay.is_some()
    }
}
