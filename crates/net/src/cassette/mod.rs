//! `--net-record DIR` and `--net-replay DIR` (issue 47 section 2, `spec/network.md`): the
//! HTTP/1.1 exchanges of a run written as a content-addressed cassette, and a run answered
//! from one with no connection leaving the machine.
//!
//! A cassette is a directory: `index.json` (format [`FORMAT`]: the entries in the order their
//! responses ended) and `bodies/<sha256>` (each body once, by the SHA-256 of its bytes after
//! the transfer coding is taken off). The proxy's helper sees the exchanges ([`Exchange`]);
//! the supervisor writes them ([`store::Writer`]), computing every digest itself. A replay
//! loads and checks the whole cassette before the run starts ([`replay::Cassette`]).

pub mod replay;
pub mod store;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

pub use replay::Cassette;
pub use store::Writer;

/// The `format` of an index this code writes and reads.
pub const FORMAT: &str = "reprorun-cassette/1";
/// The index's name in the cassette directory.
pub const INDEX: &str = "index.json";
/// The directory of bodies in the cassette directory.
pub const BODIES: &str = "bodies";
/// The largest body recorded or replayed (a larger one is not recorded: the index counts it).
pub const BODY_MAX: u64 = 16 << 20;
/// The largest sum of bodies in one cassette.
pub const TOTAL_MAX: u64 = 512 << 20;
/// The most entries in one cassette.
pub const ENTRIES_MAX: usize = 10_000;
/// The largest index read.
pub const INDEX_MAX: u64 = 64 << 20;
/// Header fields kept per message, and the longest value kept.
pub const HEADERS_MAX: usize = 128;
pub const VALUE_MAX: usize = 8192;

/// The request header fields a replayed request must match (besides method, URL and body),
/// lower case: those that change what a server answers for the same URL.
pub const MATCH_HEADERS: &[&str] = &[
    "accept-encoding",
    "content-type",
    "if-modified-since",
    "if-none-match",
    "range",
];

/// Request header fields whose value is never written (credentials; with `--inject-env` the
/// client sends a placeholder, unique per run).
pub const REDACTED: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
];

/// Hop-by-hop fields, not kept in the index (the proxy or replay sets its own).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

#[derive(Debug, Error)]
pub enum CassetteError {
    #[error("--net-record {dir}: {why}; pass a new directory")]
    Create { dir: String, why: String },
    #[error("--net-record {dir}: writing the cassette: {why}")]
    Write { dir: String, why: String },
    #[error("--net-replay {dir}: {why}; record it again with --net-record")]
    Load { dir: String, why: String },
}

/// A body as the index names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Body {
    /// SHA-256 of its bytes, lower-case hex (its file is `bodies/<sha256>`).
    pub sha256: String,
    pub size: u64,
}

impl Body {
    pub fn of(bytes: &[u8]) -> Body {
        Body {
            sha256: sha256_hex(bytes),
            size: bytes.len() as u64,
        }
    }
}

/// One recorded exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Its place among the cassette's entries (0, 1, ...: the order responses ended).
    pub order: u64,
    pub method: String,
    /// `https` (inside a terminated tunnel) or `http`.
    pub scheme: String,
    pub host: String,
    pub port: u16,
    /// The path and query, as the request line had them.
    pub target: String,
    /// The request's header fields (hop-by-hop ones left out, [`REDACTED`] ones' values
    /// replaced).
    pub request_headers: Vec<(String, String)>,
    pub request_body: Body,
    pub status: u16,
    pub reason: String,
    pub response_headers: Vec<(String, String)>,
    pub response_body: Body,
}

impl Entry {
    /// What a replayed request must match.
    pub fn key(&self) -> Key {
        Key::new(
            &self.method,
            (&self.scheme, &self.host, self.port),
            &self.target,
            &self.request_headers,
            &self.request_body.sha256,
        )
    }
}

/// The index of a cassette.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    pub format: String,
    pub entries: Vec<Entry>,
    /// Exchanges seen and not written (a body over [`BODY_MAX`], the cassette full, a
    /// response cut off), each with why: at most 100 kept.
    #[serde(default)]
    pub not_recorded: Vec<String>,
}

/// An exchange as the proxy saw it, before digests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    pub method: String,
    pub scheme: String,
    pub host: String,
    pub port: u16,
    pub target: String,
    pub request_headers: Vec<(String, String)>,
    #[serde(skip)]
    pub request_body: Vec<u8>,
    pub status: u16,
    pub reason: String,
    pub response_headers: Vec<(String, String)>,
    #[serde(skip)]
    pub response_body: Vec<u8>,
}

/// What a replayed request is matched on: method, scheme, host (lower case), port, path and
/// query, the values of the [`MATCH_HEADERS`] present, and the SHA-256 of the body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub method: String,
    pub scheme: String,
    pub host: String,
    pub port: u16,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Key {
    pub fn new(
        method: &str,
        (scheme, host, port): (&str, &str, u16),
        target: &str,
        headers: &[(String, String)],
        body_sha256: &str,
    ) -> Key {
        let headers = MATCH_HEADERS
            .iter()
            .filter_map(|name| {
                let values: Vec<&str> = headers
                    .iter()
                    .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.trim())
                    .collect();
                (!values.is_empty()).then(|| ((*name).to_string(), values.join(", ")))
            })
            .collect();
        Key {
            method: method.to_string(),
            scheme: scheme.to_string(),
            host: host.to_ascii_lowercase(),
            port,
            target: target.to_string(),
            headers,
            body: body_sha256.to_string(),
        }
    }

    /// One line naming the request (for a replay miss).
    pub fn describe(&self) -> String {
        let default = matches!(
            (self.scheme.as_str(), self.port),
            ("https", 443) | ("http", 80)
        );
        let port = if default {
            String::new()
        } else {
            format!(":{}", self.port)
        };
        let mut s = format!(
            "{} {}://{}{port}{}",
            self.method, self.scheme, self.host, self.target
        );
        for (n, v) in &self.headers {
            s.push_str(&format!(" [{n}: {v}]"));
        }
        if self.body != sha256_hex(b"") {
            s.push_str(&format!(
                " [body sha256 {}]",
                &self.body[..12.min(self.body.len())]
            ));
        }
        s
    }
}

/// The header fields kept in the index: at most [`HEADERS_MAX`], hop-by-hop ones left out,
/// credentials' values replaced, each value cut to [`VALUE_MAX`].
pub fn kept_headers<'a>(
    fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    request: bool,
) -> Vec<(String, String)> {
    fields
        .into_iter()
        .filter(|(n, _)| !request || !HOP_BY_HOP.iter().any(|h| n.eq_ignore_ascii_case(h)))
        .take(HEADERS_MAX)
        .map(|(n, v)| {
            let redact = request && REDACTED.iter().any(|r| n.eq_ignore_ascii_case(r));
            let mut v = if redact {
                "(redacted by reprorun)".to_string()
            } else {
                v.to_string()
            };
            if v.len() > VALUE_MAX {
                let mut cut = VALUE_MAX;
                while !v.is_char_boundary(cut) {
                    cut -= 1;
                }
                v.truncate(cut);
            }
            (n.to_ascii_lowercase(), v)
        })
        .collect()
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `s` is a SHA-256 in lower-case hex (a body's file name).
pub(crate) fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What the proxy does with the cassette of a run.
#[derive(Clone)]
pub enum Mode {
    /// `--net-record`: exchanges go to the writer (in the supervisor).
    Record(std::sync::Arc<Writer>),
    /// `--net-replay`: requests are answered from the cassette.
    Replay(std::sync::Arc<Cassette>),
}

impl Mode {
    /// Writes a recorded cassette's index (a replay has nothing to write).
    pub fn finish(&self) -> Result<(), CassetteError> {
        match self {
            Mode::Record(w) => w.finish().map(drop),
            Mode::Replay(_) => Ok(()),
        }
    }
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Record(_) => f.write_str("Record"),
            Mode::Replay(_) => f.write_str("Replay"),
        }
    }
}

#[cfg(test)]
mod tests;
