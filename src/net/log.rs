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

/// Attempts that never reached the proxy — a direct connection or datagram to an address
/// outside the sandbox, which its network namespace refuses — noted by the supervisor's
/// notification server as the workload makes them (`spec/network.md`).
#[derive(Default)]
pub(crate) struct Journal {
    records: std::sync::Mutex<Vec<ConnRecord>>,
    log: Option<LogFile>,
}

impl Journal {
    /// A journal that also appends each record to `log` (the `--net-log` file).
    pub(crate) fn new(log: Option<std::fs::File>) -> Journal {
        Journal {
            records: Default::default(),
            log: log.map(LogFile::new),
        }
    }

    /// Notes a refused direct attempt to `ip:port` (`what`: `direct-connect` or
    /// `direct-sendto`).
    pub(crate) fn direct(&self, what: &'static str, ip: std::net::IpAddr, port: u16) {
        let record = ConnRecord {
            host: ip.to_string(),
            port,
            address: Some(ip.to_string()),
            protocol: what,
            decision: Decision::Refused,
            rule: format!(
                "{} to {} outside the proxy: the sandbox has no route out (clients reach the allowlist through HTTP_PROXY, HTTPS_PROXY or ALL_PROXY)",
                what.trim_start_matches("direct-"),
                std::net::SocketAddr::new(ip, port)
            ),
            bytes_up: 0,
            bytes_down: 0,
            start: crate::determinism::date::timestamp(std::time::SystemTime::now()),
            duration_ms: 0,
        };
        if let Some(log) = &self.log {
            log.write(&record);
        }
        match self.records.lock() {
            Ok(mut r) => r.push(record),
            Err(poisoned) => poisoned.into_inner().push(record),
        }
    }

    /// The records so far, in order.
    pub(crate) fn take(&self) -> Vec<ConnRecord> {
        match self.records.lock() {
            Ok(mut r) => std::mem::take(&mut *r),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }
}

/// The proxy's records and the direct attempts as one list, in the order they started.
pub(crate) fn merge(mut proxied: Vec<ConnRecord>, direct: Vec<ConnRecord>) -> Vec<ConnRecord> {
    proxied.extend(direct);
    // RFC 3339 UTC timestamps of one format sort as text; the sort is stable.
    proxied.sort_by(|a, b| a.start.cmp(&b.start));
    proxied
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").finish_non_exhaustive()
    }
}
