//! The host's own addresses: every address on any interface of the network namespace the
//! proxy runs in (the caller's), loopback or not. A name on the allowlist that resolves to
//! one of them (an `eth0` address, a container bridge's) would reach the host's own
//! services bound to all addresses, so the proxy refuses them as it refuses loopback.
//!
//! Read with `getifaddrs` when the proxy starts and again, at most once a second, when a
//! connection is about to be made (interfaces come and go during a run: a container bridge,
//! a VPN). A second wall does not depend on the list being fresh: a connection whose local
//! address equals its peer's was delivered inside the host (the kernel picks the destination
//! itself as the source of a local route), and is dropped before a byte is relayed.

use std::net::{IpAddr, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How old the list may be before a connection reads it again.
const REFRESH: Duration = Duration::from_secs(1);

/// The addresses, and when they were read.
pub(crate) struct HostAddrs {
    snapshot: Mutex<(Instant, Vec<IpAddr>)>,
}

impl HostAddrs {
    /// Reads the host's addresses now.
    pub(crate) fn read() -> HostAddrs {
        HostAddrs {
            snapshot: Mutex::new((Instant::now(), current())),
        }
    }

    /// Whether `ip` is one of the host's own addresses (the list read again if it is over a
    /// second old).
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let mut snap = self
            .snapshot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if snap.0.elapsed() >= REFRESH {
            *snap = (Instant::now(), current());
        }
        snap.1.contains(&ip)
    }
}

/// Whether a connected socket was delivered inside the host: its local address is its peer's.
pub(crate) fn delivered_locally(stream: &TcpStream) -> bool {
    match (stream.local_addr(), stream.peer_addr()) {
        (Ok(local), Ok(peer)) => local.ip().to_canonical() == peer.ip().to_canonical(),
        // Not connected after all: nothing will be relayed on it anyway.
        _ => false,
    }
}

/// Every IPv4 and IPv6 address of every interface (none if the list cannot be read: the
/// second wall still stands).
fn current() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut out: Vec<IpAddr> = Vec::new();
    for a in addrs {
        let Some(storage) = a.address else { continue };
        let ip = if let Some(v4) = storage.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = storage.as_sockaddr_in6() {
            IpAddr::V6(v6.ip()).to_canonical()
        } else {
            continue;
        };
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_among_the_hosts_addresses_and_a_global_one_is_not() {
        let addrs = HostAddrs::read();
        assert!(addrs.contains("127.0.0.1".parse().unwrap()));
        assert!(addrs.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!addrs.contains("192.0.2.77".parse().unwrap()));
    }

    #[test]
    fn a_loopback_connection_is_delivered_locally() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(server.local_addr().unwrap()).unwrap();
        assert!(delivered_locally(&client));
    }
}
