//! Privilege separation of the proxy, as OpenSSH's: the bytes the sandbox writes (HTTP
//! heads, SOCKS requests, TLS ClientHellos) are parsed in a helper process forked from the
//! supervisor, in the sandbox's cgroup, with the sandbox's unprivileged host ids, no
//! capability and `no_new_privs`. The helper owns the listener and every client socket; for
//! each request it asks the supervisor (which keeps the allowlist, resolves and connects)
//! with one small message, and gets back the connected upstream socket or a refusal. It
//! sends each finished record to the supervisor, which keeps and logs it as before.
//!
//! Messages on the helper's SOCK_SEQPACKET socket, one datagram each:
//! - supervisor → helper: `L` with the listener's descriptor; `S`: stop.
//! - helper → supervisor: `A` port (2 bytes, big-endian) host (1–255 bytes), with the
//!   descriptor of a fresh socket for the answer; `R` id (8 bytes) record (JSON, at most
//!   [`RECORD_MAX`]); `C` three lengths (8 bytes each) with a memfd: an exchange recorded
//!   for `--net-record` (its description and bodies, read bounded); `D`: every connection
//!   ended.
//! - answer: `Y` address NUL rule, with the upstream's descriptor; `N` decision code
//!   address NUL reason.

use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;

use super::upstream::{Decider, Now, Opened, Refusal};
use super::{lock, socks, Config};
use crate::allow::{normalize_name, Target};
use crate::log::{ConnRecord, Decision, Kept, LogFile, Network};
use crate::Egress;

/// The process name of the helper (`comm`, as `ps` shows it).
pub(crate) const HELPER_NAME: &str = "rrnet-proxy";

/// The largest message the supervisor reads (a longer one is dropped).
const MESSAGE_MAX: usize = 64 * 1024;
/// The largest record the helper sends: its strings are cut to fit.
const RECORD_MAX: usize = 48 * 1024;
/// Each string of a record the helper sends is cut to this many bytes.
const FIELD_MAX: usize = 2048;
/// Secret names a record carries (`injected`, `placeholders`), and the length of each.
const NAMES_MAX: usize = 16;
const NAME_MAX: usize = 128;
/// Requests the supervisor decides at once (the helper asks at most `max_conns`).
const DECIDING_MAX: usize = 2 * super::MAX_CONNS;
/// How long `stop` waits for the helper to end its connections before killing it.
const STOP_GRACE: Duration = Duration::from_secs(30);

fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(socket::socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?)
}

/// Sends `bytes` with descriptor `fd` (if any) as one datagram.
fn send(sock: &impl AsRawFd, bytes: &[u8], fd: Option<&OwnedFd>) -> Result<(), Errno> {
    let raw: Vec<RawFd> = fd.iter().map(|f| f.as_raw_fd()).collect();
    let iov = [io::IoSlice::new(bytes)];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &cmsg };
    socket::sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None).map(drop)
}

/// One datagram (blocking): `None` at the peer's end; a truncated one is an error.
fn recv(sock: &impl AsRawFd, max: usize) -> Result<Option<reprorun_base::sys::Packet>, Errno> {
    use nix::sys::socket::ControlMessageOwned;
    let mut buf = vec![0u8; max];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [io::IoSliceMut::new(&mut buf)];
    let msg = loop {
        match socket::recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(Errno::EINTR) => {}
            other => break other?,
        }
    };
    let (n, truncated) = (msg.bytes, msg.flags.contains(MsgFlags::MSG_TRUNC));
    let mut fd = None;
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for raw in fds {
                // SAFETY: the kernel installed this descriptor for us; we take sole ownership
                // (a second one in the same message is closed by its own OwnedFd).
                fd.get_or_insert(unsafe { OwnedFd::from_raw_fd(raw) });
            }
        }
    }
    if truncated {
        return Err(Errno::EMSGSIZE);
    }
    if n == 0 && fd.is_none() {
        return Ok(None);
    }
    buf.truncate(n);
    Ok(Some((buf, fd)))
}

/// The helper's side: asks the supervisor, sends it records.
pub(crate) struct Asker {
    control: OwnedFd,
}

impl Asker {
    pub(super) fn new(control: OwnedFd) -> Asker {
        Asker { control }
    }

    /// Asks the supervisor for an upstream to `target:port`.
    pub(super) fn ask(&self, target: &Target, port: u16) -> Result<Opened, Refusal> {
        let failed = |why: String| Refusal {
            decision: Decision::Failed,
            code: socks::GENERAL_FAILURE,
            address: None,
            why,
        };
        let host = target.to_string();
        if host.is_empty() || host.len() > 255 {
            return Err(failed(format!("host name of {} bytes", host.len())));
        }
        let (mine, theirs) = seqpacket_pair().map_err(|e| failed(format!("socketpair: {e}")))?;
        let mut msg = vec![b'A'];
        msg.extend(port.to_be_bytes());
        msg.extend(host.as_bytes());
        send(&self.control, &msg, Some(&theirs))
            .map_err(|e| failed(format!("cannot ask the supervisor: {e}")))?;
        super::timing::mark("h.asked");
        drop(theirs);
        let answer = recv(&mine, 8192).map_err(|e| failed(format!("supervisor: {e}")))?;
        super::timing::mark("h.answer_read");
        let Some((bytes, fd)) = answer else {
            return Err(failed("the supervisor did not answer".into()));
        };
        parse_answer(&bytes, fd)
            .unwrap_or_else(|| Err(failed("bad answer from the supervisor".into())))
    }

    /// Sends the finished record of connection `id` (strings cut to [`FIELD_MAX`]).
    pub(super) fn record(&self, id: u64, record: &ConnRecord) {
        let mut r = record.clone();
        for s in [&mut r.host, &mut r.rule, &mut r.start] {
            cut(s);
        }
        if let Some(n) = r.note.as_mut() {
            cut(n);
        }
        for names in [&mut r.injected, &mut r.placeholders] {
            names.truncate(NAMES_MAX);
            names.iter_mut().for_each(|n| n.truncate(NAME_MAX));
        }
        let mut msg = vec![b'R'];
        msg.extend(id.to_be_bytes());
        if serde_json::to_writer(&mut msg, &r).is_ok() && msg.len() <= RECORD_MAX {
            let _ = send(&self.control, &msg, None);
        }
    }
}

impl Asker {
    /// Sends a recorded exchange (`--net-record`): `C` and the lengths of its description
    /// and bodies (3 × 8 bytes, big-endian), with a memfd holding the three.
    pub(super) fn exchange(&self, ex: &crate::cassette::Exchange, why: Option<&str>) {
        #[derive(serde::Serialize)]
        struct Wire<'a> {
            #[serde(flatten)]
            ex: &'a crate::cassette::Exchange,
            not_recorded: Option<&'a str>,
        }
        let Ok(meta) = serde_json::to_vec(&Wire {
            ex,
            not_recorded: why,
        }) else {
            return;
        };
        let parts = [&meta[..], &ex.request_body, &ex.response_body];
        let Ok(fd) = nix::sys::memfd::memfd_create(
            c"rrnet-exchange",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
        ) else {
            return;
        };
        let mut file = std::fs::File::from(fd);
        let mut msg = vec![b'C'];
        for p in parts {
            if io::Write::write_all(&mut file, p).is_err() {
                return;
            }
            msg.extend((p.len() as u64).to_be_bytes());
        }
        let _ = send(&self.control, &msg, Some(&OwnedFd::from(file)));
    }
}

fn cut(s: &mut String) {
    if s.len() > FIELD_MAX {
        let mut end = FIELD_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

fn parse_answer(bytes: &[u8], fd: Option<OwnedFd>) -> Option<Result<Opened, Refusal>> {
    let (&tag, rest) = bytes.split_first()?;
    match (tag, fd) {
        (b'Y', Some(fd)) => {
            let (address, rule) = split_nul(rest)?;
            Some(Ok(Opened {
                stream: Arc::new(TcpStream::from(fd)),
                address,
                rule,
            }))
        }
        (b'N', None) if rest.len() >= 2 => {
            let decision = match rest[0] {
                0 => Decision::Refused,
                _ => Decision::Failed,
            };
            let (address, why) = split_nul(&rest[2..])?;
            Some(Err(Refusal {
                decision,
                code: rest[1],
                address,
                why,
            }))
        }
        _ => None,
    }
}

fn split_nul(bytes: &[u8]) -> Option<(Option<String>, String)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (a, b) = text.split_once('\0')?;
    Some(((!a.is_empty()).then(|| a.to_string()), b.to_string()))
}

/// The supervisor's side: the helper process and the thread that answers it.
pub struct Helper {
    pid: Pid,
    control: Arc<OwnedFd>,
    broker: Option<JoinHandle<Network>>,
    state: Arc<State>,
}

/// What the supervisor's broker thread and its deciding threads share with `stop`.
#[derive(Default)]
struct State {
    /// Set by `stop`: the broker gives up at this instant.
    stop_by: Mutex<Option<Instant>>,
    /// Upstream sockets being connected (shut down by `stop`), and whether it was called.
    live: Mutex<(bool, Vec<Arc<TcpStream>>)>,
    deciding: AtomicUsize,
}

impl Helper {
    /// Forks the helper (the caller is single-threaded): into the sandbox's cgroup
    /// (`join_cgroup`, run in the helper), then the ids
    /// `uid`/`gid` (for a root caller; 65534 where they are 0), no capability, no_new_privs.
    pub fn fork(
        join_cgroup: &dyn Fn() -> bool,
        uid: u32,
        gid: u32,
        config: Config,
    ) -> io::Result<Helper> {
        let (ours, theirs) = seqpacket_pair()?;
        let parent = nix::unistd::getpid();
        // SAFETY: the caller is single-threaded (the supervisor before its notification
        // thread starts), so the child's copy of the heap and of every lock is consistent.
        match unsafe { nix::unistd::fork() }? {
            nix::unistd::ForkResult::Child => {
                drop(ours);
                let code = super::helper_main(theirs, parent, join_cgroup, (uid, gid), config);
                // SAFETY: _exit takes a plain argument; nothing of the supervisor's is flushed.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => Ok(Helper {
                pid: child,
                control: Arc::new(ours),
                broker: None,
                state: Arc::default(),
            }),
        }
    }

    /// Hands the helper `listener` and answers it with `egress`.
    pub fn serve(
        &mut self,
        listener: OwnedFd,
        egress: Egress,
        config: Config,
        log: Option<std::fs::File>,
    ) -> io::Result<()> {
        send(&*self.control, b"L", Some(&listener))?;
        let (control, state) = (Arc::clone(&self.control), Arc::clone(&self.state));
        let log = log.map(LogFile::new);
        let broker = std::thread::Builder::new()
            .name("rrnet-broker".into())
            .spawn(move || broker(&control, &state, &egress, &config, log.as_ref()))?;
        self.broker = Some(broker);
        Ok(())
    }

    /// Stops the helper (every connection ends), reaps it and returns its records.
    pub fn stop(mut self) -> Network {
        *lock(&self.state.stop_by) = Some(Instant::now() + STOP_GRACE);
        {
            let mut live = lock(&self.state.live);
            live.0 = true;
            for s in &live.1 {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
        let _ = send(&*self.control, b"S", None);
        let network = self
            .broker
            .take()
            .and_then(|b| b.join().ok())
            .unwrap_or_default();
        self.reap();
        network
    }

    fn reap(&mut self) {
        use nix::sys::wait::{waitpid, WaitPidFlag};
        let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
        let _ = waitpid(self.pid, Some(WaitPidFlag::__WALL));
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if self.broker.is_none() {
            self.reap();
        }
    }
}

/// Reads the helper's messages until it is done (or gone, or `stop`'s grace ran out).
fn broker(
    control: &OwnedFd,
    state: &Arc<State>,
    egress: &Egress,
    config: &Config,
    log: Option<&LogFile>,
) -> Network {
    let host_addrs = Arc::new(crate::local::HostAddrs::read());
    // Shared by every decision (it was copied for each).
    let egress = Arc::new(egress.clone());
    let mut kept: Kept<(u64, ConnRecord)> = Kept::default();
    let workers = super::workers::Workers::new("rrnet-decide", 256 * 1024);
    loop {
        if lock(&state.stop_by).is_some_and(|t| Instant::now() >= t) {
            break;
        }
        let mut fds = [PollFd::new(control.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(200u8)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => break,
        }
        let (bytes, fd) = match recv(control, MESSAGE_MAX) {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(Errno::EMSGSIZE | Errno::EINTR) => continue,
            Err(_) => break,
        };
        match (bytes.first(), fd) {
            (Some(b'D'), _) => break,
            (Some(b'R'), None) if bytes.len() > 9 => {
                super::timing::mark("s.record_read");
                let id = u64::from_be_bytes(bytes[1..9].try_into().unwrap_or_default());
                if let Some(record) = parse_record(&bytes[9..]) {
                    if let Some(log) = log {
                        log.write(&record);
                    }
                    kept.push((id, record));
                }
            }
            (Some(b'C'), Some(fd)) if bytes.len() == 25 => {
                let len =
                    |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
                let writer = match &config.cassette {
                    Some(crate::cassette::Mode::Record(w)) => w,
                    _ => continue,
                };
                if let Some((ex, why)) =
                    crate::cassette::store::read_wire(fd, [len(1), len(9), len(17)])
                {
                    writer.add(ex, why);
                }
            }
            (Some(b'A'), Some(answer)) => {
                super::timing::mark("s.ask_read");
                let job = Job {
                    state: Arc::clone(state),
                    egress: Arc::clone(&egress),
                    host_addrs: Arc::clone(&host_addrs),
                    connect_timeout: config.connect_timeout,
                };
                job.start(bytes, answer, &workers);
            }
            _ => {}
        }
    }
    workers.join();
    super::timing::flush();
    let (mut records, dropped) = kept.into_parts();
    records.sort_by_key(|(id, _)| *id);
    Network {
        records: records.into_iter().map(|(_, r)| r).collect(),
        dropped,
    }
}

/// The record the helper sent, checked field by field.
fn parse_record(json: &[u8]) -> Option<ConnRecord> {
    #[derive(serde::Deserialize)]
    struct Wire {
        host: String,
        port: u16,
        address: Option<String>,
        protocol: String,
        decision: Decision,
        rule: String,
        bytes_up: u64,
        bytes_down: u64,
        start: String,
        duration_ms: u64,
        note: Option<String>,
        #[serde(default)]
        injected: Vec<String>,
        #[serde(default)]
        placeholders: Vec<String>,
    }
    let w: Wire = serde_json::from_slice(json).ok()?;
    let protocol = ["connect", "http", "socks5", "unknown"]
        .into_iter()
        .find(|p| *p == w.protocol)?;
    Some(ConnRecord {
        host: w.host,
        port: w.port,
        address: w.address,
        protocol,
        decision: w.decision,
        rule: w.rule,
        bytes_up: w.bytes_up,
        bytes_down: w.bytes_down,
        start: w.start,
        duration_ms: w.duration_ms,
        note: w.note,
        // Names only, as many as a run can have (the helper cuts each to FIELD_MAX).
        injected: w.injected.into_iter().take(NAMES_MAX).collect(),
        placeholders: w.placeholders.into_iter().take(NAMES_MAX).collect(),
    })
}

/// One request of the helper's, decided on a thread of its own (a kept one, `workers`).
struct Job {
    state: Arc<State>,
    egress: Arc<Egress>,
    host_addrs: Arc<crate::local::HostAddrs>,
    connect_timeout: Duration,
}

impl Job {
    fn start(self, ask: Vec<u8>, answer: OwnedFd, workers: &super::workers::Workers) {
        let Some((target, port)) = parse_ask(&ask) else {
            refuse(
                &answer,
                Decision::Failed,
                socks::GENERAL_FAILURE,
                None,
                "bad request",
            );
            return;
        };
        if self.state.deciding.fetch_add(1, Ordering::SeqCst) >= DECIDING_MAX {
            self.state.deciding.fetch_sub(1, Ordering::SeqCst);
            refuse(
                &answer,
                Decision::Refused,
                socks::GENERAL_FAILURE,
                None,
                "proxy busy",
            );
            return;
        }
        // On this thread while nothing waits (issue 50: a thread's wake-up less per request).
        let begun = match self.with_decider(|d, register| d.open_now(&target, port, register)) {
            Now::Done(opened) => {
                answer_with(&answer, opened);
                self.state.deciding.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            Now::Connecting(c) => Some(c),
            Now::Later => None,
        };
        let state = Arc::clone(&self.state);
        let ran = workers.run(move || {
            super::timing::mark("s.decide_thread");
            let opened = self.with_decider(|d, register| match begun {
                Some(c) => d.resume(c, &target, port, register),
                None => d.open(&target, port, register),
            });
            answer_with(&answer, opened);
            self.state.deciding.fetch_sub(1, Ordering::SeqCst);
        });
        if ran.is_err() {
            // No thread: the answer socket is closed unanswered, which the helper reports.
            state.deciding.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Runs `f` with this job's decider and the registry of its sockets.
    fn with_decider<T>(
        &self,
        f: impl FnOnce(&Decider, &dyn Fn(&Arc<TcpStream>) -> bool) -> T,
    ) -> T {
        let decider = Decider {
            egress: &self.egress,
            host_addrs: &self.host_addrs,
            connect_timeout: self.connect_timeout,
        };
        let register = |s: &Arc<TcpStream>| {
            let mut live = lock(&self.state.live);
            if live.0 {
                return false;
            }
            live.1.retain(|s| Arc::strong_count(s) > 1);
            live.1.push(Arc::clone(s));
            true
        };
        f(&decider, &register)
    }
}

/// Answers the helper: the upstream's descriptor, or the refusal.
fn answer_with(answer: &OwnedFd, opened: Result<Opened, Refusal>) {
    super::timing::mark("s.connected");
    match opened {
        Ok(opened) => {
            let mut msg = b"Y".to_vec();
            msg.extend(opened.address.unwrap_or_default().as_bytes());
            msg.push(0);
            msg.extend(opened.rule.as_bytes());
            let fd = opened.stream.as_fd().try_clone_to_owned();
            if let Ok(fd) = fd {
                let _ = send(answer, &msg, Some(&fd));
                super::timing::mark("s.answer_sent");
            }
        }
        Err(r) => refuse(answer, r.decision, r.code, r.address, &r.why),
    }
}

fn refuse(answer: &OwnedFd, decision: Decision, code: u8, address: Option<String>, why: &str) {
    let mut msg = vec![b'N', u8::from(decision != Decision::Refused), code];
    msg.extend(address.unwrap_or_default().as_bytes());
    msg.push(0);
    msg.extend(why.as_bytes());
    let _ = send(answer, &msg, None);
}

/// `A` port host: the host a name (checked as the proxy checks names) or an address.
fn parse_ask(bytes: &[u8]) -> Option<(Target, u16)> {
    if bytes.len() < 4 || bytes.len() > 3 + 255 || bytes[0] != b'A' {
        return None;
    }
    let port = u16::from_be_bytes([bytes[1], bytes[2]]);
    let host = std::str::from_utf8(&bytes[3..]).ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let target = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => Target::Ip(ip),
        Err(_) => Target::Name(normalize_name(host).ok()?),
    };
    Some((target, port))
}
