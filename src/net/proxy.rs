//! The proxy: HTTP CONNECT, absolute-form HTTP and SOCKS5 on one listening socket.

use std::os::fd::OwnedFd;
use std::time::Duration;

use super::log::ConnRecord;
use super::Egress;

/// Limits of the proxy.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) head_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_conns: usize,
    pub(crate) head_cap: usize,
}

/// A running proxy.
pub(crate) struct Proxy {}

/// Starts serving `listener` (a listening stream socket).
pub(crate) fn start(
    listener: OwnedFd,
    egress: Egress,
    config: Config,
    log: Option<std::fs::File>,
) -> std::io::Result<Proxy> {
    todo!("{listener:?} {egress:?} {config:?} {log:?}")
}

impl Proxy {
    /// Stops accepting, ends every live connection, joins every thread and returns the
    /// records in the order the connections were accepted.
    pub(crate) fn stop(self) -> Vec<ConnRecord> {
        todo!()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            head_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            max_conns: 256,
            head_cap: 64 * 1024,
        }
    }
}
