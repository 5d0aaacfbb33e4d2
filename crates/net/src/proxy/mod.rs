//! The proxy: HTTP CONNECT, absolute-form HTTP and SOCKS5 on one listening socket.
//!
//! Connection threads take turns accepting on the listener (`accept`: leader/follower); the
//! thread that accepted a connection serves it (`conn`): reads the request (`http`, `socks`), decides by name, resolves,
//! connects, checks the TLS SNI of tunnels (`sni`) and relays with `splice(2)` (`relay`).
//! Every socket a connection opens is registered in [`Shared::live`], so that `stop` can
//! shut them all down and join every thread.

mod accept;
mod body;
mod conn;
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod inject;
mod mitm;
pub mod privsep;
mod privsep_child;
mod relay;
mod sni;
mod socks;
mod tap;
#[cfg(test)]
mod tests;
mod timing;
mod upstream;
mod workers;

use std::collections::HashMap;
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use nix::fcntl::{fcntl, FcntlArg, OFlag};

use super::log::{ConnRecord, Decision, Kept, LogFile, Network};
use super::Egress;

/// Stack of a connection thread (its buffers live on the heap).
const CONN_STACK: usize = 256 * 1024;

/// Connections served at once (tunnels and requests): each pins up to four socket buffers
/// and two pipes of the supervisor's kernel memory ([`SOCKET_BUF`], `relay::PIPE_SIZE`).
/// As many again are answered 503 (their thread reads the request only); beyond that, at once.
pub(crate) const MAX_CONNS: usize = 64;

/// The send and receive buffer of every socket the proxy holds (the client's, accepted from
/// the sandbox's listener, and the upstream's), as the kernel counts it (it doubles the value
/// set, for its own overhead): no autotuning beyond it, so a peer that never reads pins at
/// most this much per buffer.
pub(crate) const SOCKET_BUF: usize = 256 * 1024;

/// Limits of the proxy.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) head_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_conns: usize,
    pub(crate) head_cap: usize,
    /// `--inject-env`: the hosts the proxy terminates TLS for, and what it puts back.
    pub(crate) intercept: Option<Arc<crate::intercept::Intercept>>,
    /// `--net-record`, `--net-replay`: the run's cassette.
    pub(crate) cassette: Option<crate::cassette::Mode>,
}

impl Config {
    /// The default limits, terminating TLS as `intercept` says.
    pub fn with_intercept(intercept: Option<Arc<crate::intercept::Intercept>>) -> Config {
        Config {
            intercept,
            ..Config::default()
        }
    }

    /// The same, recording or replaying as `cassette` says.
    pub fn with_cassette(self, cassette: Option<crate::cassette::Mode>) -> Config {
        Config { cassette, ..self }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            head_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            max_conns: MAX_CONNS,
            head_cap: 64 * 1024,
            intercept: None,
            cassette: None,
        }
    }
}

/// A running proxy.
pub struct Proxy {
    shared: Arc<Shared>,
    /// Write end of the pipe that stops the accepting threads.
    wake: Option<OwnedFd>,
    pool: Option<Arc<accept::Pool>>,
}

/// What every connection thread shares.
struct Shared {
    broker: Broker,
    config: Config,
    log: Option<LogFile>,
    /// Finished records with their accept index (at most [`KEPT`], the rest counted).
    records: Mutex<Kept<(u64, ConnRecord)>>,
    live: Mutex<Live>,
    /// Connection threads serving normally, and over the cap (answering 503).
    active: AtomicUsize,
    overflow: AtomicUsize,
}

/// Who decides, resolves and connects for a request.
pub(crate) enum Broker {
    /// This process: the allowlist, and the host's own addresses (refused as loopback is).
    Local {
        egress: Egress,
        host_addrs: crate::local::HostAddrs,
    },
    /// The supervisor, asked over the proxy helper's socket (`privsep`); records go there too.
    Remote(privsep::Asker),
}

/// The sockets of the connections in progress, so that `stop` can shut them down.
#[derive(Default)]
struct Live {
    stopping: bool,
    sockets: HashMap<u64, Vec<Arc<TcpStream>>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// Registers a socket of connection `id`; false once the proxy is stopping (the caller
    /// gives up on the connection).
    fn register(&self, id: u64, socket: &Arc<TcpStream>) -> bool {
        let mut live = lock(&self.live);
        if live.stopping {
            let _ = socket.shutdown(std::net::Shutdown::Both);
            return false;
        }
        live.sockets.entry(id).or_default().push(Arc::clone(socket));
        true
    }

    fn unregister(&self, id: u64) {
        lock(&self.live).sockets.remove(&id);
    }

    /// Decides, resolves and connects for connection `id` (here or in the supervisor).
    fn open(
        &self,
        id: u64,
        target: &crate::allow::Target,
        port: u16,
    ) -> Result<upstream::Opened, upstream::Refusal> {
        match &self.broker {
            Broker::Local { egress, host_addrs } => upstream::Decider {
                egress,
                host_addrs,
                connect_timeout: self.config.connect_timeout,
            }
            .open(target, port, &|s| self.register(id, s)),
            Broker::Remote(asker) => {
                let opened = asker.ask(target, port)?;
                if !self.register(id, &opened.stream) {
                    return Err(upstream::Refusal {
                        decision: Decision::Failed,
                        code: socks::GENERAL_FAILURE,
                        address: opened.address,
                        why: "proxy stopped".into(),
                    });
                }
                Ok(opened)
            }
        }
    }

    /// Hands a recorded exchange to the cassette's writer (here, or in the supervisor).
    fn cassette_add(&self, ex: crate::cassette::Exchange, why: Option<String>) {
        match (&self.broker, &self.config.cassette) {
            (Broker::Remote(asker), _) => asker.exchange(&ex, why.as_deref()),
            (Broker::Local { .. }, Some(crate::cassette::Mode::Record(w))) => w.add(ex, why),
            _ => {}
        }
    }

    /// Keeps the record of connection `id` and appends it to the log (or sends it to the
    /// supervisor, which does both).
    fn finish(&self, id: u64, record: ConnRecord) {
        if let Broker::Remote(asker) = &self.broker {
            asker.record(id, &record);
            timing::mark("h.recorded");
            return;
        }
        if let Some(log) = &self.log {
            log.write(&record);
        }
        lock(&self.records).push((id, record));
    }
}

/// A record of connection `id` before anything is known of its request.
fn blank_record(started: SystemTime) -> ConnRecord {
    ConnRecord {
        host: String::new(),
        port: 0,
        address: None,
        protocol: "unknown",
        decision: Decision::Failed,
        rule: String::new(),
        bytes_up: 0,
        bytes_down: 0,
        start: reprorun_base::determinism::date::timestamp(started),
        duration_ms: 0,
        note: None,
        injected: Vec::new(),
        placeholders: Vec::new(),
    }
}

/// Caps the send and receive buffers of `socket` at [`SOCKET_BUF`] (set before it connects,
/// or on the listener its connections are accepted from).
fn cap_buffers(socket: &impl AsFd) -> nix::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    // The kernel doubles the value set.
    setsockopt(socket, sockopt::SndBuf, &(SOCKET_BUF / 2))?;
    setsockopt(socket, sockopt::RcvBuf, &(SOCKET_BUF / 2))
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The proxy's helper process after `privsep::Helper::fork` (see `privsep_child::run`).
fn helper_main(
    control: OwnedFd,
    parent: nix::unistd::Pid,
    join_cgroup: &dyn Fn() -> bool,
    (uid, gid): (u32, u32),
    config: Config,
) -> i32 {
    privsep_child::run(control, parent, join_cgroup, uid, gid, config)
}

/// Starts serving `listener` (a listening stream socket), deciding in this process.
pub fn start(
    listener: OwnedFd,
    egress: Egress,
    config: Config,
    log: Option<std::fs::File>,
) -> std::io::Result<Proxy> {
    let broker = Broker::Local {
        egress,
        host_addrs: crate::local::HostAddrs::read(),
    };
    start_with(listener, broker, config, log)
}

/// Starts serving `listener`, asking `broker` for every upstream.
pub(crate) fn start_with(
    listener: OwnedFd,
    broker: Broker,
    config: Config,
    log: Option<std::fs::File>,
) -> std::io::Result<Proxy> {
    // Accept without blocking once poll has said so (another holder of the socket may have
    // taken the connection in between).
    let flags = OFlag::from_bits_truncate(fcntl(listener.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(
        listener.as_raw_fd(),
        FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK),
    )?;
    // Connections accepted from it inherit the cap (and so advertise a window within it).
    cap_buffers(&listener)?;
    let (wake_r, wake_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let shared = Arc::new(Shared {
        broker,
        config,
        log: log.map(LogFile::new),
        records: Mutex::new(Kept::default()),
        live: Mutex::new(Live::default()),
        active: AtomicUsize::new(0),
        overflow: AtomicUsize::new(0),
    });
    let pool = accept::Pool::start(
        Arc::clone(&shared),
        listener,
        wake_r,
        ("rrnet-conn", CONN_STACK),
    )?;
    Ok(Proxy {
        shared,
        wake: Some(wake_w),
        pool: Some(pool),
    })
}

impl Proxy {
    /// Stops accepting, ends every live connection, joins every thread and returns the
    /// records kept, in the order the connections were accepted (and the count of the rest).
    pub fn stop(mut self) -> Network {
        self.halt();
        let kept = std::mem::take(&mut *lock(&self.shared.records));
        let (mut records, dropped) = kept.into_parts();
        records.sort_by_key(|(id, _)| *id);
        Network {
            records: records.into_iter().map(|(_, r)| r).collect(),
            dropped,
        }
    }

    fn halt(&mut self) {
        {
            let mut live = lock(&self.shared.live);
            live.stopping = true;
            for socket in live.sockets.values().flatten() {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
        }
        if let Some(wake) = self.wake.take() {
            let _ = nix::unistd::write(&wake, &[1]);
        }
        if let Some(pool) = self.pool.take() {
            pool.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Which budget a connection is served from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tier {
    /// Under `max_conns`: served.
    Normal,
    /// Over the cap: a thread reads the request and answers 503 (SOCKS: 0x01).
    Busy,
}

/// Serves a freshly accepted connection on this thread, within the connection caps.
fn admit(shared: &Shared, id: u64, client: TcpStream) {
    let started = SystemTime::now();
    let since = Instant::now();
    let _ = client.set_nodelay(true);
    let _ = cap_buffers(&client);
    let client = Arc::new(client);
    if !shared.register(id, &client) {
        let mut record = blank_record(started);
        record.rule = "proxy stopping".into();
        shared.finish(id, record);
        return;
    }
    let max = shared.config.max_conns;
    let tier = if shared.active.fetch_add(1, Ordering::SeqCst) < max {
        Tier::Normal
    } else {
        shared.active.fetch_sub(1, Ordering::SeqCst);
        if shared.overflow.fetch_add(1, Ordering::SeqCst) < max {
            Tier::Busy
        } else {
            shared.overflow.fetch_sub(1, Ordering::SeqCst);
            conn::refuse_busy_now(shared, id, &client, started, since);
            shared.unregister(id);
            return;
        }
    };
    conn::serve(shared, id, client, tier, started, since);
    let counter = match tier {
        Tier::Normal => &shared.active,
        Tier::Busy => &shared.overflow,
    };
    counter.fetch_sub(1, Ordering::SeqCst);
}

/// A connection no thread could be found for: closed, and recorded with why.
fn refuse_unserved(shared: &Shared, id: u64, client: TcpStream, error: &std::io::Error) {
    let mut record = blank_record(SystemTime::now());
    record.rule = format!("cannot start a connection thread: {error}");
    drop(client);
    shared.finish(id, record);
}
