//! The decision for one request: allowlist, resolution, the address checks and the connect.
//! It runs where the allowlist and the host's network are: in the supervisor (asked by the
//! proxy's helper process, `privsep`), or in the proxy's own process (`Broker::Local`).

use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, SockaddrStorage};

use super::socks;
use crate::allow::Target;
use crate::local::HostAddrs;
use crate::log::Decision;
use crate::{addr, local, Egress};

/// The class of an address on one of the host's interfaces.
const HOST_OWN: &str = "the host's own address";

/// A connected upstream, the address it went to and the rule that allowed it.
pub(crate) struct Opened {
    pub(crate) stream: Arc<TcpStream>,
    pub(crate) address: Option<String>,
    pub(crate) rule: String,
}

/// A request not served: refused (403, SOCKS `code`) or failed (502).
pub(crate) struct Refusal {
    pub(crate) decision: Decision,
    pub(crate) code: u8,
    pub(crate) address: Option<String>,
    pub(crate) why: String,
}

/// What decides: the allowlist, the host's own addresses and the connect timeout.
pub(crate) struct Decider<'a> {
    pub(crate) egress: &'a Egress,
    pub(crate) host_addrs: &'a HostAddrs,
    pub(crate) connect_timeout: Duration,
}

impl Decider<'_> {
    /// Decides, resolves and connects; every socket it opens is passed to `register` first
    /// (false: the proxy is stopping, give up).
    pub(crate) fn open(
        &self,
        target: &Target,
        port: u16,
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> Result<Opened, Refusal> {
        let refuse = |address: Option<String>, why: String| Refusal {
            decision: Decision::Refused,
            code: socks::NOT_ALLOWED,
            address,
            why,
        };
        let rule = match self.egress.decide(target, port) {
            Ok(rule) => rule.to_string(),
            Err(refusal) => return Err(refuse(None, refusal.to_string())),
        };
        let addrs = self.resolve(target, port).map_err(|why| Refusal {
            decision: Decision::Failed,
            code: socks::HOST_UNREACHABLE,
            address: None,
            why,
        })?;
        let egress = self.egress;
        let (allowed, barred): (Vec<IpAddr>, Vec<IpAddr>) = addrs
            .into_iter()
            .partition(|ip| self.class(*ip).is_none() || egress.allows_ip(*ip, port));
        if allowed.is_empty() {
            let ip = barred[0];
            let class = self.class(ip).unwrap_or("forbidden");
            let why = format!("egress to {target}:{port} resolves to {ip} ({class})");
            return Err(refuse(Some(ip.to_string()), why));
        }
        let (upstream, address) = self.connect_any(&allowed, target, port, register)?;
        // The second wall: delivered inside the host after all (an address added since the
        // list was read), and not an address the allowlist names itself.
        let ip = upstream.peer_addr().map(|a| a.ip());
        if local::delivered_locally(&upstream)
            && !ip.as_ref().is_ok_and(|ip| egress.allows_ip(*ip, port))
        {
            let _ = upstream.shutdown(Shutdown::Both);
            let shown = ip.map_or_else(|_| "?".into(), |ip| ip.to_string());
            let why = format!("egress to {target}:{port} resolves to {shown} ({HOST_OWN})");
            return Err(refuse(address, why));
        }
        Ok(Opened {
            stream: upstream,
            address,
            rule,
        })
    }

    /// The class of `ip` if the proxy refuses it by name: one of [`addr::forbidden`]'s, or
    /// one of the host's own addresses.
    fn class(&self, ip: IpAddr) -> Option<&'static str> {
        addr::forbidden(ip).or_else(|| self.host_addrs.contains(ip).then_some(HOST_OWN))
    }

    /// The addresses of `target`: `--add-host` first, then the host's resolver.
    fn resolve(&self, target: &Target, port: u16) -> Result<Vec<IpAddr>, String> {
        let name = match target {
            Target::Ip(ip) => return Ok(vec![*ip]),
            Target::Name(n) => n,
        };
        let mine = self.egress.host_override(name);
        if !mine.is_empty() {
            return Ok(mine);
        }
        let found = (name.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {name}: {e}"))?;
        let mut ips: Vec<IpAddr> = Vec::new();
        for a in found {
            if !ips.contains(&a.ip()) {
                ips.push(a.ip());
            }
        }
        if ips.is_empty() {
            return Err(format!("cannot resolve {name}: no addresses"));
        }
        Ok(ips)
    }

    /// Connects to the first address that answers; the reason and SOCKS code if none does.
    fn connect_any(
        &self,
        ips: &[IpAddr],
        target: &Target,
        port: u16,
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> Result<(Arc<TcpStream>, Option<String>), Refusal> {
        let mut last = io::Error::other("no address");
        let mut address = None;
        for ip in ips {
            address = Some(ip.to_string());
            match self.connect(SocketAddr::new(*ip, port), register) {
                Ok(s) => return Ok((s, address)),
                Err(e) => last = e,
            }
        }
        let code = match last.kind() {
            io::ErrorKind::ConnectionRefused => socks::CONNECTION_REFUSED,
            _ => socks::HOST_UNREACHABLE,
        };
        let ip = address.clone().unwrap_or_default();
        Err(Refusal {
            decision: Decision::Failed,
            code,
            address,
            why: format!("cannot connect to {target}:{port} ({ip}): {last}"),
        })
    }

    /// Connects within the connect timeout; the socket is registered first, so that `stop`
    /// can break off the attempt.
    fn connect(
        &self,
        to: SocketAddr,
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> io::Result<Arc<TcpStream>> {
        let family = match to {
            SocketAddr::V4(_) => AddressFamily::Inet,
            SocketAddr::V6(_) => AddressFamily::Inet6,
        };
        let flags = SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK;
        let fd = socket::socket(family, SockType::Stream, flags, None)?;
        super::cap_buffers(&fd)?;
        let stream = Arc::new(TcpStream::from(fd));
        if !register(&stream) {
            return Err(io::Error::other("proxy stopped"));
        }
        match socket::connect(stream.as_raw_fd(), &SockaddrStorage::from(to)) {
            Ok(()) | Err(Errno::EINPROGRESS) => {}
            Err(e) => return Err(e.into()),
        }
        let timeout = self.connect_timeout;
        let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLOUT)];
        let poll_timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
        if poll(&mut fds, poll_timeout)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {timeout:?}"),
            ));
        }
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
        stream.peer_addr()?;
        stream.set_nonblocking(false)?;
        // A relay forwards what it has at once: no small write waits for an ACK.
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}
