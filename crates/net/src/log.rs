//! The record of every connection attempt the proxy saw.

use serde::Serialize;

/// What became of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
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
    /// What else the proxy did not forward (bytes the client sent after its one request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `--inject-env`: the names of the secrets the proxy put into this connection's request
    /// heads (never their values).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub injected: Vec<String>,
    /// The names of the secrets whose placeholder the client sent where it is not replaced
    /// (another host, a body, a request line): passed unchanged (`note` says where).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub placeholders: Vec<String>,
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

/// How many records of each source (the proxy's connections, the direct attempts) a run
/// keeps in memory; the rest are counted (`network_dropped` in the run record) and still
/// written to `--net-log` as they happen. A workload that makes 200,000 attempts must not
/// grow the supervisor (a host process, outside `--memory`) by a record each.
pub(crate) const KEPT: usize = 1000;

/// Records up to [`KEPT`], and a count of the rest.
#[derive(Debug)]
pub(crate) struct Kept<T> {
    items: Vec<T>,
    dropped: u64,
}

impl<T> Default for Kept<T> {
    fn default() -> Kept<T> {
        Kept {
            items: Vec::new(),
            dropped: 0,
        }
    }
}

impl<T> Kept<T> {
    /// Keeps `item` if there is room, else counts it.
    pub(crate) fn push(&mut self, item: T) {
        if self.items.len() < KEPT {
            self.items.push(item);
        } else {
            self.dropped += 1;
        }
    }

    /// The kept records and the count of the others.
    pub(crate) fn into_parts(self) -> (Vec<T>, u64) {
        (self.items, self.dropped)
    }
}

/// What a run's network record holds: the kept attempts, in order, and how many were not
/// kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Network {
    pub records: Vec<ConnRecord>,
    pub dropped: u64,
}

/// Attempts that never reached the proxy — a direct connection or datagram to an address
/// outside the sandbox, which its network namespace refuses — noted by the supervisor's
/// notification server as the workload makes them (`spec/network.md`).
#[derive(Default)]
pub struct Journal {
    records: std::sync::Mutex<Kept<ConnRecord>>,
    log: Option<LogFile>,
}

impl Journal {
    /// A journal that also appends each record to `log` (the `--net-log` file).
    pub fn new(log: Option<std::fs::File>) -> Journal {
        Journal {
            records: Default::default(),
            log: log.map(LogFile::new),
        }
    }

    /// Notes a refused direct attempt to `ip:port` (`what`: `direct-connect` or
    /// `direct-sendto`).
    pub fn direct(&self, what: &'static str, ip: std::net::IpAddr, port: u16) {
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
            start: reprorun_base::determinism::date::timestamp(std::time::SystemTime::now()),
            duration_ms: 0,
            note: None,
            injected: Vec::new(),
            placeholders: Vec::new(),
        };
        if let Some(log) = &self.log {
            log.write(&record);
        }
        match self.records.lock() {
            Ok(mut r) => r.push(record),
            Err(poisoned) => poisoned.into_inner().push(record),
        }
    }

    /// The records kept so far, in order, and the count of the others.
    pub fn take(&self) -> Network {
        let kept = match self.records.lock() {
            Ok(mut r) => std::mem::take(&mut *r),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        let (records, dropped) = kept.into_parts();
        Network { records, dropped }
    }
}

/// The proxy's records and the direct attempts as one list, in the order they started.
pub fn merge(proxied: Network, direct: Network) -> Network {
    let mut records = proxied.records;
    records.extend(direct.records);
    // RFC 3339 UTC timestamps of one format sort as text; the sort is stable.
    records.sort_by(|a, b| a.start.cmp(&b.start));
    Network {
        records,
        dropped: proxied.dropped + direct.dropped,
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_keeps_a_bounded_number_of_records_and_counts_the_rest() {
        let j = Journal::new(None);
        let ip: std::net::IpAddr = "192.0.2.1".parse().unwrap();
        for port in 0..(KEPT as u16 + 250) {
            j.direct("direct-connect", ip, port);
        }
        let net = j.take();
        assert_eq!((net.records.len(), net.dropped), (KEPT, 250));
        assert_eq!(net.records[KEPT - 1].port, KEPT as u16 - 1);
        let merged = merge(
            Network {
                records: Vec::new(),
                dropped: 3,
            },
            net,
        );
        assert_eq!((merged.records.len(), merged.dropped), (KEPT, 253));
    }
}
