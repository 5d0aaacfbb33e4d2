//! The record of every connection attempt the proxy saw.

use serde::Serialize;

/// What became of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Relayed to the upstream.
    Allowed,
    /// Refused by a rule (403, a SOCKS refusal, or a TLS alert for an SNI mismatch).
    Refused,
    /// Allowed, but the upstream could not be reached (502), or the client broke the protocol.
    Failed,
}

/// One connection attempt (`network` in the run record, a line of `--net-log`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnRecord {
    pub host: String,
    pub port: u16,
    /// The upstream address connected to (or refused); `None` before resolution.
    pub address: Option<String>,
    /// `connect`, `http` (absolute-form) or `socks5` (`http` for a request the proxy could not
    /// parse, `unknown` when the client sent nothing).
    pub protocol: &'static str,
    pub decision: Decision,
    /// The rule that allowed it (`pypi.org:443`), or the reason it was refused or failed.
    pub rule: String,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// When the client connected: RFC 3339, UTC, milliseconds (host time).
    pub start: String,
    pub duration_ms: u64,
}

/// The `--net-log` file: one JSON line a record, written as each connection ends.
pub(crate) struct LogFile(std::sync::Mutex<std::fs::File>);

impl LogFile {
    /// Wraps a file opened for appending.
    pub(crate) fn new(file: std::fs::File) -> LogFile {
        LogFile(std::sync::Mutex::new(file))
    }

    /// Appends `record` as one line and flushes it; a failing log does not stop the proxy
    /// (the records are also returned by `stop`), so errors are dropped here.
    pub(crate) fn write(&self, record: &ConnRecord) {
        use std::io::Write;
        let Ok(mut line) = serde_json::to_vec(record) else {
            return;
        };
        line.push(b'\n');
        let mut file = match self.0.lock() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        };
        let _ = file.write_all(&line).and_then(|()| file.flush());
    }
}
