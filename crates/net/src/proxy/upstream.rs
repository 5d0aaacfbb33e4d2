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

/// A request allowed, whose upstream's connect was begun and has not completed yet
/// ([`Decider::open_now`]): [`Decider::resume`] waits for it on another thread.
pub(crate) struct Connecting {
    rule: String,
    /// Every address allowed; the first is being connected.
    ips: Vec<IpAddr>,
    stream: Arc<TcpStream>,
}

/// What [`Decider::open_now`] got to without waiting.
pub(crate) enum Now {
    /// Decided: refused, failed, or connected at once.
    Done(Result<Opened, Refusal>),
    /// The connect is under way.
    Connecting(Connecting),
    /// The name needs the resolver (which may block), or has more than one address (the
    /// next is tried when one fails, which waits): nothing was begun.
    Later,
}

impl Decider<'_> {
    /// What [`open`](Self::open) does, without blocking: for a target the resolver is not
    /// asked for (an address, or a name `--add-host` gives one address), the decision and
    /// a non-blocking connect (issue 50: the supervisor's broker decides on its own thread,
    /// and hands a request to another only when it would wait).
    pub(crate) fn open_now(
        &self,
        target: &Target,
        port: u16,
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> Now {
        if let Target::Name(n) = target {
            // A name refused is refused here; one allowed waits for a worker.
            if self.egress.decide(target, port).is_ok() && self.egress.host_override(n).len() != 1 {
                return Now::Later;
            }
        }
        let (rule, ips) = match self.allowed(target, port) {
            Ok(allowed) => allowed,
            Err(r) => return Now::Done(Err(r)),
        };
        let to = SocketAddr::new(ips[0], port);
        let stream = match self.begin(to, register) {
            Ok(s) => s,
            Err(e) => return Now::Done(self.next(&ips, e, target, port, rule, register)),
        };
        let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLOUT)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => Now::Connecting(Connecting { rule, ips, stream }),
            _ => Now::Done(self.landed(&stream, target, port, rule, &ips, register)),
        }
    }

    /// Waits for a connect [`open_now`](Self::open_now) began, then goes on as `open`.
    pub(crate) fn resume(
        &self,
        c: Connecting,
        target: &Target,
        port: u16,
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> Result<Opened, Refusal> {
        self.landed(&c.stream, target, port, c.rule, &c.ips, register)
    }

    /// A connect to `ips[0]` begun: waits for it (within the connect timeout); on failure
    /// tries the other addresses; then the second wall.
    fn landed(
        &self,
        stream: &Arc<TcpStream>,
        target: &Target,
        port: u16,
        rule: String,
        ips: &[IpAddr],
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> Result<Opened, Refusal> {
        match self.wait(stream) {
            Ok(()) => self.checked(
                Arc::clone(stream),
                Some(ips[0].to_string()),
                target,
                port,
                rule,
            ),
            Err(e) => self.next(ips, e, target, port, rule, register),
        }
    }

    /// The first address failed with `e`: the others, as `open` would.
    fn next(
        &self,
        ips: &[IpAddr],
        e: io::Error,
        target: &Target,
        port: u16,
        rule: String,
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> Result<Opened, Refusal> {
        let (upstream, address) = self.connect_any(&ips[1..], e, target, port, register)?;
        self.checked(upstream, address, target, port, rule)
    }

    /// Decides, resolves and connects; every socket it opens is passed to `register` first
    /// (false: the proxy is stopping, give up).
    pub(crate) fn open(
        &self,
        target: &Target,
        port: u16,
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> Result<Opened, Refusal> {
        let (rule, allowed) = self.allowed(target, port)?;
        let first = io::Error::other("no address");
        let (upstream, address) = self.connect_any(&allowed, first, target, port, register)?;
        self.checked(upstream, address, target, port, rule)
    }

    /// The rule that allows `target:port` and the addresses it may go to.
    fn allowed(&self, target: &Target, port: u16) -> Result<(String, Vec<IpAddr>), Refusal> {
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
        Ok((rule, allowed))
    }

    /// A connected upstream, through the second wall.
    fn checked(
        &self,
        upstream: Arc<TcpStream>,
        address: Option<String>,
        target: &Target,
        port: u16,
        rule: String,
    ) -> Result<Opened, Refusal> {
        let egress = self.egress;
        let refuse = |address: Option<String>, why: String| Refusal {
            decision: Decision::Refused,
            code: socks::NOT_ALLOWED,
            address,
            why,
        };
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

    /// Connects to the first address that answers; the reason and SOCKS code if none does
    /// (`last`: the error of an address tried before these, if any).
    fn connect_any(
        &self,
        ips: &[IpAddr],
        mut last: io::Error,
        target: &Target,
        port: u16,
        register: &dyn Fn(&Arc<TcpStream>) -> bool,
    ) -> Result<(Arc<TcpStream>, Option<String>), Refusal> {
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
        let stream = self.begin(to, register)?;
        self.wait(&stream)?;
        Ok(stream)
    }

    /// A registered socket whose non-blocking connect to `to` is under way.
    fn begin(
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
        Ok(stream)
    }

    /// Waits for `stream`'s connect (within the connect timeout) and readies it for a relay.
    fn wait(&self, stream: &TcpStream) -> io::Result<()> {
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allow::{parse_add_host, Rule};
    use std::net::TcpListener;

    fn egress(rules: &[String], hosts: &[&str]) -> Egress {
        Egress {
            rules: rules.iter().map(|r| Rule::parse(r).unwrap()).collect(),
            hosts: hosts.iter().map(|h| parse_add_host(h).unwrap()).collect(),
            ..Egress::default()
        }
    }

    /// `open_now`, then `resume` when the connect was still under way.
    fn now_then_resume(d: &Decider, target: &Target, port: u16) -> Result<Opened, Refusal> {
        let register = |_: &Arc<TcpStream>| true;
        match d.open_now(target, port, &register) {
            Now::Done(r) => r,
            Now::Connecting(c) => d.resume(c, target, port, &register),
            Now::Later => panic!("{target}:{port}: handed to a worker"),
        }
    }

    #[test]
    fn open_now_connects_without_the_resolver_and_refuses_as_open_does() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let closed = TcpListener::bind("127.0.0.1:0").unwrap();
        let closed_port = closed.local_addr().unwrap().port();
        drop(closed);
        let e = egress(
            &[
                format!("up.test:{port}"),
                format!("127.0.0.1:{port}"),
                format!("127.0.0.1:{closed_port}"),
                "far.test:80".into(),
            ],
            &["up.test:127.0.0.1"],
        );
        let host_addrs = HostAddrs::read();
        let d = Decider {
            egress: &e,
            host_addrs: &host_addrs,
            connect_timeout: Duration::from_secs(5),
        };
        let name = |n: &str| Target::Name(n.into());
        // A name --add-host gives, and an address: decided and connected, the rule named.
        for target in [name("up.test"), Target::Ip("127.0.0.1".parse().unwrap())] {
            let opened = now_then_resume(&d, &target, port).unwrap_or_else(|r| panic!("{}", r.why));
            assert_eq!(opened.stream.peer_addr().unwrap().port(), port);
            assert_eq!(opened.address.as_deref(), Some("127.0.0.1"));
            assert!(opened.rule.contains(&port.to_string()), "{}", opened.rule);
        }
        // Refused by the allowlist: at once, nothing connected.
        let r = now_then_resume(&d, &name("nope.test"), port).err().unwrap();
        assert_eq!(
            (r.decision, r.code),
            (Decision::Refused, socks::NOT_ALLOWED)
        );
        // Loopback not named by the allowlist for this port: refused by its address.
        let r = now_then_resume(&d, &Target::Ip("127.0.0.1".parse().unwrap()), 9)
            .err()
            .unwrap();
        assert_eq!(r.decision, Decision::Refused, "{}", r.why);
        // Nobody listening: failed, connection refused.
        let r = now_then_resume(&d, &name("up.test"), closed_port).err();
        assert!(r.is_some_and(|r| r.decision == Decision::Refused));
        let ip = Target::Ip("127.0.0.1".parse().unwrap());
        let r = now_then_resume(&d, &ip, closed_port).err().unwrap();
        assert_eq!(
            (r.decision, r.code),
            (Decision::Failed, socks::CONNECTION_REFUSED)
        );
        // An allowed name the resolver must answer: left to a worker, nothing begun.
        let register = |_: &Arc<TcpStream>| panic!("nothing is opened");
        assert!(matches!(
            d.open_now(&name("far.test"), 80, &register),
            Now::Later
        ));
    }
}
