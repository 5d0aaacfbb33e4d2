//! One client connection: read the request, decide, resolve, connect, check the SNI of a
//! tunnel, relay; and the one record of it all.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, MsgFlags};

use super::body::Framer;
use super::http::{self, read_some, HeadError};
use super::sni::{self, Hello};
use super::socks::{self, SocksError};
use super::{blank_record, inject, millis, mitm, relay, Shared, Tier};
use crate::allow::{normalize_name, Target};
use crate::intercept::Intercept;
use crate::log::{ConnRecord, Decision};

mod cassette;

/// How long an error answer waits for the client to finish sending before closing (so the
/// close does not reset the connection under the answer).
const LINGER: Duration = Duration::from_millis(500);

/// How the client asked, which decides how answers are written.
enum Kind {
    Connect,
    /// The head to send upstream, and where the request's body ends.
    Http(Vec<u8>, Framer),
    Socks,
}

/// A connection being served.
struct Conn<'a> {
    shared: &'a Shared,
    id: u64,
    client: &'a TcpStream,
    record: ConnRecord,
}

/// Serves connection `id` to its end and keeps its record.
pub(super) fn serve(
    shared: &Shared,
    id: u64,
    client: Arc<TcpStream>,
    tier: Tier,
    started: SystemTime,
    since: Instant,
) {
    super::timing::mark("h.conn_thread");
    let mut conn = Conn {
        shared,
        id,
        client: &client,
        record: blank_record(started),
    };
    conn.run(tier, since);
    let mut record = conn.record;
    shared.unregister(id);
    drop(client);
    record.duration_ms = millis(since);
    shared.finish(id, record);
}

/// Over every budget: answers on the thread that accepted it, without waiting for the request
/// (a SOCKS client gets the method choice and a general failure at once), and closes.
pub(super) fn refuse_busy_now(
    shared: &Shared,
    id: u64,
    client: &TcpStream,
    started: SystemTime,
    since: Instant,
) {
    let mut record = blank_record(started);
    let line = busy_line(shared);
    let fd = client.as_raw_fd();
    let mut first = [0u8; 1];
    let peeked = socket::recv(fd, &mut first, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT);
    let answer = if peeked == Ok(1) && first[0] == 0x05 {
        record.protocol = "socks5";
        let mut a = vec![0x05, 0x00];
        a.extend(socks::reply(socks::GENERAL_FAILURE, None));
        a
    } else {
        record.protocol = "http";
        http::response("503 Service Unavailable", &format!("reprorun: {line}"))
    };
    let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    let _ = socket::send(fd, &answer, flags);
    let mut sink = [0u8; 4096];
    while let Ok(1..) = socket::recv(fd, &mut sink, MsgFlags::MSG_DONTWAIT) {}
    let _ = client.shutdown(Shutdown::Write);
    record.decision = Decision::Refused;
    record.rule = line;
    record.duration_ms = millis(since);
    shared.finish(id, record);
}

fn busy_line(shared: &Shared) -> String {
    format!(
        "proxy busy: {} connections open (max_conns)",
        shared.config.max_conns
    )
}

impl Conn<'_> {
    fn run(&mut self, tier: Tier, since: Instant) {
        let cfg = &self.shared.config;
        let _ = self.client.set_write_timeout(Some(cfg.head_timeout));
        let deadline = since + cfg.head_timeout;
        let mut buf = Vec::with_capacity(4096);
        if let Err(e) = read_some(self.client, &mut buf, 4096, deadline) {
            return self.head_failed(e, false);
        }
        if buf.first() == Some(&0x05) {
            self.record.protocol = "socks5";
            match socks::handshake(self.client, &mut buf, deadline) {
                Ok(r) => self.proceed(tier, Kind::Socks, &r.target, r.port, buf),
                Err(SocksError::Head(e)) => self.head_failed(e, true),
                Err(SocksError::Bad(why, code)) => {
                    if let Some(code) = code {
                        self.say(&socks::reply(code, None));
                    }
                    self.record.rule = why;
                }
            }
            return;
        }
        self.record.protocol = "http";
        let end = match http::read_head(self.client, &mut buf, cfg.head_cap, deadline) {
            Ok(end) => end,
            Err(e) => return self.head_failed(e, false),
        };
        let rest = buf.split_off(end);
        match http::parse(&buf) {
            Ok(r) => {
                let kind = match r.upstream_head {
                    Some((head, framer)) => Kind::Http(head, framer),
                    None => {
                        self.record.protocol = "connect";
                        Kind::Connect
                    }
                };
                self.proceed(tier, kind, &r.target, r.port, rest);
            }
            Err(why) => self.http_error("400 Bad Request", why),
        }
    }

    /// The head did not arrive whole: answer what fits and record why.
    fn head_failed(&mut self, e: HeadError, socks: bool) {
        let cfg = &self.shared.config;
        match e {
            HeadError::Timeout if socks => {
                self.say(&socks::reply(socks::GENERAL_FAILURE, None));
                self.record.rule =
                    format!("SOCKS5 request not complete within {:?}", cfg.head_timeout);
            }
            HeadError::Timeout => self.http_error(
                "408 Request Timeout",
                format!("request head not complete within {:?}", cfg.head_timeout),
            ),
            HeadError::TooLarge => self.http_error(
                "431 Request Header Fields Too Large",
                format!("request head over {} bytes", cfg.head_cap),
            ),
            HeadError::Closed(why) => self.record.rule = format!("no complete request: {why}"),
        }
    }

    /// Answers with an HTTP error, records it as failed, and closes gently.
    fn http_error(&mut self, status: &str, why: String) {
        self.say(&http::response(status, &format!("reprorun: {why}")));
        self.linger();
        self.record.decision = Decision::Failed;
        self.record.rule = why;
    }

    /// Writes to the client; a client gone away is not an error of the proxy.
    fn say(&self, bytes: &[u8]) {
        let _ = (&*self.client).write_all(bytes);
    }

    /// Half-closes and reads what the client still sends for a moment, so that closing
    /// does not reset the connection before the client has read the answer.
    fn linger(&self) {
        let _ = self.client.shutdown(Shutdown::Write);
        let until = Instant::now() + LINGER;
        let mut sink = [0u8; 4096];
        let mut total = 0usize;
        while total < 1 << 20 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.client.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match (&*self.client).read(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    }

    /// Answers a refusal or failure in the client's protocol and records it.
    fn answer(&mut self, kind: &Kind, decision: Decision, status: &str, code: u8, why: String) {
        match kind {
            Kind::Socks => self.say(&socks::reply(code, None)),
            Kind::Connect | Kind::Http(..) => {
                self.say(&http::response(status, &format!("reprorun: {why}")));
                self.linger();
            }
        }
        self.record.decision = decision;
        self.record.rule = why;
    }

    /// From a parsed request to a relayed (or refused) connection.
    fn proceed(&mut self, tier: Tier, kind: Kind, target: &Target, port: u16, rest: Vec<u8>) {
        self.record.host = match target {
            Target::Name(n) => n.clone(),
            Target::Ip(ip) => ip.to_string(),
        };
        self.record.port = port;
        if tier == Tier::Busy {
            let line = busy_line(self.shared);
            let code = socks::GENERAL_FAILURE;
            return self.answer(
                &kind,
                Decision::Refused,
                "503 Service Unavailable",
                code,
                line,
            );
        }
        if let Some(crate::cassette::Mode::Replay(c)) = &self.shared.config.cassette {
            let c = Arc::clone(c);
            return self.replay(&c, kind, (target, port), rest);
        }
        super::timing::mark("h.head_read");
        match self.shared.open(self.id, target, port) {
            Ok(opened) => {
                self.record.address = opened.address;
                self.record.decision = Decision::Allowed;
                self.record.rule = opened.rule;
                self.tunnel(kind, (target, port), &opened.stream, rest);
            }
            Err(r) => {
                self.record.address = r.address;
                let status = match r.decision {
                    Decision::Refused => "403 Forbidden",
                    _ => "502 Bad Gateway",
                };
                self.answer(&kind, r.decision, status, r.code, r.why);
            }
        }
    }

    /// Tells the client the connection is up, checks a tunnel's SNI, and relays.
    fn tunnel(
        &mut self,
        kind: Kind,
        (target, port): (&Target, u16),
        upstream: &TcpStream,
        rest: Vec<u8>,
    ) {
        let mut framer = None;
        let first = match kind {
            Kind::Http(head, mut body) => {
                self.note_placeholders(&head);
                // One request per connection: what follows the request is not forwarded.
                let mine = body.take(&rest);
                if mine < rest.len() {
                    self.record.note = Some(after_request(rest.len() - mine));
                }
                let mut first = head;
                first.extend_from_slice(&rest[..mine]);
                framer = Some(body);
                first
            }
            Kind::Connect | Kind::Socks => {
                let proto = if matches!(kind, Kind::Socks) {
                    self.say(&socks::reply(0x00, upstream.local_addr().ok()));
                    "SOCKS5"
                } else {
                    self.say(b"HTTP/1.1 200 Connection established\r\n\r\n");
                    "CONNECT"
                };
                let first = match self.check_sni(target, upstream, rest, proto) {
                    Some(first) => first,
                    None => return,
                };
                // `--net-record` terminates every name's tunnel, when it carries TLS.
                let tls = first.first() == Some(&0x16);
                let icpt = self.terminating(target, port);
                if let Some(icpt) = icpt.filter(|_| tls || !self.recording()) {
                    return self.terminate(&icpt, target, port, upstream, &first);
                }
                first
            }
        };
        if let (true, Some(f)) = (self.recording(), framer.take()) {
            return self.record_http((upstream, port), &first, f);
        }
        let _ = upstream.set_write_timeout(Some(self.shared.config.head_timeout));
        if (&*upstream).write_all(&first).is_err() {
            return;
        }
        self.record.bytes_up += first.len() as u64;
        super::timing::mark("h.head_sent_up");
        let idle = self.shared.config.idle_timeout;
        let relayed = relay::relay(self.client, upstream, idle, framer);
        super::timing::mark("h.relayed");
        match relayed {
            Ok(moved) => {
                self.record.bytes_up += moved.up;
                self.record.bytes_down += moved.down;
                self.note_after(moved.framer.as_ref());
            }
            Err(e) => {
                self.record.decision = Decision::Failed;
                self.record.rule = format!("relay failed: {e}");
            }
        }
    }

    /// Whether the run records a cassette (`--net-record`).
    fn recording(&self) -> bool {
        matches!(
            self.shared.config.cassette,
            Some(crate::cassette::Mode::Record(_))
        )
    }

    /// The run's intercept when it terminates TLS for `target:port`.
    fn terminating(&self, target: &Target, port: u16) -> Option<Arc<Intercept>> {
        let icpt = self.shared.config.intercept.as_ref()?;
        icpt.terminates(target, port).then(|| Arc::clone(icpt))
    }

    /// Serves a connection the proxy terminates (`--inject-env`) and records what it put
    /// back and what it saw.
    fn terminate(
        &mut self,
        icpt: &Intercept,
        target: &Target,
        port: u16,
        upstream: &TcpStream,
        hello: &[u8],
    ) {
        let cfg = &self.shared.config;
        let limits = mitm::Limits {
            handshake: cfg.head_timeout,
            idle: cfg.idle_timeout,
            head_cap: cfg.head_cap,
        };
        let shared = self.shared;
        let sink = move |ex, why| shared.cassette_add(ex, why);
        let host = self.record.host.clone();
        let mut tap = self
            .recording()
            .then(|| super::tap::Tap::new("https", (&host, port), &sink));
        let done = mitm::serve(
            icpt,
            (self.client, upstream),
            (target, port),
            hello,
            &limits,
            tap.as_mut(),
        );
        if let Some(mut tap) = tap {
            tap.upstream_ended();
            self.note_tap(tap.stopped.take());
        }
        self.record.protocol = "connect";
        self.record.bytes_up += done.up;
        self.record.bytes_down += done.down;
        self.record.injected = done.injected;
        if let Some(why) = done.failed {
            self.record.decision = Decision::Failed;
            self.record.rule = why;
        }
        self.placeholders(done.seen);
    }

    /// Notes the placeholders of an absolute-form (plain HTTP) request head: never replaced.
    fn note_placeholders(&mut self, head: &[u8]) {
        let Some(icpt) = &self.shared.config.intercept else {
            return;
        };
        let names = inject::placeholders_in(&icpt.secrets, head);
        let seen = names
            .into_iter()
            .map(|n| (n, "a plain-HTTP request head"))
            .collect();
        self.placeholders(seen);
    }

    /// Records placeholders passed unchanged, by name and place.
    fn placeholders(&mut self, seen: Vec<(String, &'static str)>) {
        if seen.is_empty() {
            return;
        }
        let said: Vec<String> = seen
            .iter()
            .map(|(name, place)| format!("{name} in {place}"))
            .collect();
        let mut names: Vec<String> = seen.into_iter().map(|(n, _)| n).collect();
        names.dedup();
        self.record.placeholders = names;
        let line = format!(
            "placeholder passed unchanged (not replaced): {}",
            said.join(", ")
        );
        self.record.note = Some(match self.record.note.take() {
            Some(n) => format!("{n}; {line}"),
            None => line,
        });
    }

    /// Notes what the client sent beyond its request (a pipelined request, bytes after a
    /// body), or a chunked body whose framing broke; none of it went upstream.
    fn note_after(&mut self, framer: Option<&Framer>) {
        match framer {
            Some(Framer::Bad(why)) => {
                self.record.note = Some(format!(
                    "request body framing broke ({why}): the rest was not forwarded"
                ));
            }
            Some(Framer::Done) if self.record.note.is_none() => {
                let mut byte = [0u8; 1];
                let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
                if socket::recv(self.client.as_raw_fd(), &mut byte, flags) == Ok(1) {
                    self.record.note = Some(after_request(0));
                }
            }
            _ => {}
        }
    }

    /// Reads the client's first bytes; refuses a TLS ClientHello naming another server.
    /// Returns the bytes to forward, or `None` when the connection ends here.
    fn check_sni(
        &mut self,
        target: &Target,
        upstream: &TcpStream,
        mut buf: Vec<u8>,
        proto: &str,
    ) -> Option<Vec<u8>> {
        let deadline = Instant::now() + self.shared.config.head_timeout;
        let hello = loop {
            match sni::parse(&buf) {
                Hello::Incomplete if buf.len() >= sni::CAP => {
                    break Hello::Malformed("ClientHello longer than 16 KiB")
                }
                Hello::Incomplete => {}
                done => break done,
            }
            match self.wait_client(upstream, buf.is_empty(), deadline) {
                Wait::Client => {}
                // The server speaks first, or the client is silent: not a TLS client.
                Wait::Upstream | Wait::Timeout if buf.is_empty() => break Hello::NotTls,
                Wait::Upstream | Wait::Timeout => {
                    break Hello::Malformed("ClientHello not complete within the head timeout")
                }
            }
            let room = sni::CAP - buf.len();
            match read_some(self.client, &mut buf, room, deadline) {
                Ok(_) => {}
                Err(_) if buf.is_empty() => break Hello::NotTls,
                Err(_) => break Hello::Malformed("client closed within the ClientHello"),
            }
        };
        let (decision, why) = match hello {
            Hello::NotTls | Hello::NoSni | Hello::Incomplete => return Some(buf),
            Hello::Sni(name) => match (normalize_name(&name), target) {
                (Ok(n), Target::Name(t)) if n == *t => return Some(buf),
                _ => (
                    Decision::Refused,
                    format!("SNI {name} does not match {proto} host {target}"),
                ),
            },
            Hello::Malformed(why) => (Decision::Failed, format!("TLS: {why}")),
        };
        self.say(&sni::ACCESS_DENIED);
        let _ = self.client.shutdown(Shutdown::Write);
        self.record.decision = decision;
        self.record.rule = why;
        None
    }

    /// Waits for bytes from the client (or, while none came yet, from the upstream).
    fn wait_client(&self, upstream: &TcpStream, also_upstream: bool, deadline: Instant) -> Wait {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Wait::Timeout;
        }
        let mut fds = vec![PollFd::new(self.client.as_fd(), PollFlags::POLLIN)];
        if also_upstream {
            fds.push(PollFd::new(upstream.as_fd(), PollFlags::POLLIN));
        }
        let timeout =
            PollTimeout::try_from(left.max(Duration::from_millis(1))).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(0) => Wait::Timeout,
            Ok(_) if fds[0].revents().is_some_and(|r| !r.is_empty()) => Wait::Client,
            Ok(_) => Wait::Upstream,
            Err(_) => Wait::Client,
        }
    }
}

/// The note of a connection whose client sent more after its request (`bytes` of it seen
/// with the head; 0 when it came later).
fn after_request(bytes: usize) -> String {
    let seen = match bytes {
        0 => String::new(),
        n => format!(" ({n} bytes with the request head)"),
    };
    format!(
        "the client sent more after its request{seen}: not forwarded (one request per connection; a pipelined request is neither decided nor relayed)"
    )
}

/// What `wait_client` saw first.
enum Wait {
    Client,
    Upstream,
    Timeout,
}
