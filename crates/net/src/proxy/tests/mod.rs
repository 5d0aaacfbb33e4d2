//! The proxy end to end on loopback: an upstream server and a proxy on 127.0.0.1:0, driven
//! by raw `TcpStream` clients.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::sni::{client_hello_bytes, ACCESS_DENIED};
use super::{start, Config, Proxy};
use crate::allow::{parse_add_host, Rule};
use crate::log::{ConnRecord, Decision};
use crate::Egress;

/// The descriptor and thread census of `no_leaks` needs the other proxy tests out of the way.
static CENSUS: RwLock<()> = RwLock::new(());

fn shared_lock() -> std::sync::RwLockReadGuard<'static, ()> {
    CENSUS.read().unwrap_or_else(|p| p.into_inner())
}

/// How the test upstream behaves.
#[derive(Clone, Copy)]
enum Mode {
    /// Sends back what it reads; half-closes on EOF.
    Echo,
    /// Reads a request head, keeps it, answers this and closes.
    Http(&'static str),
    /// Reads everything, answers nothing.
    Silent,
}

/// An upstream server on 127.0.0.1:0.
struct Server {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, s) = (Arc::clone(&got), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((sock, _)) => {
                        sock.set_nonblocking(false).unwrap();
                        let g = Arc::clone(&g);
                        std::thread::spawn(move || serve_upstream(sock, mode, &g));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Server {
            addr,
            got,
            stop,
            thread: Some(thread),
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn received(&self) -> Vec<u8> {
        self.got.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn serve_upstream(mut sock: TcpStream, mode: Mode, got: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 4096];
    loop {
        let n = match sock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        got.lock().unwrap().extend_from_slice(&buf[..n]);
        match mode {
            Mode::Echo => {
                if sock.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Mode::Http(reply) => {
                if got.lock().unwrap().windows(4).any(|w| w == b"\r\n\r\n") {
                    let _ = sock.write_all(reply.as_bytes());
                    return;
                }
            }
            Mode::Silent => {}
        }
    }
    let _ = sock.shutdown(Shutdown::Write);
}

fn config() -> Config {
    Config {
        head_timeout: Duration::from_secs(3),
        connect_timeout: Duration::from_secs(3),
        idle_timeout: Duration::from_secs(10),
        max_conns: 64,
        head_cap: 64 * 1024,
        intercept: None,
        cassette: None,
    }
}

fn egress(rules: &[String], hosts: &[&str]) -> Egress {
    Egress {
        rules: rules.iter().map(|r| Rule::parse(r).unwrap()).collect(),
        hosts: hosts.iter().map(|h| parse_add_host(h).unwrap()).collect(),
        ..Egress::default()
    }
}

/// The usual policy: `up.test` → 127.0.0.1, allowed with its loopback address.
fn up_egress(port: u16) -> Egress {
    egress(
        &[format!("up.test:{port}"), format!("127.0.0.1:{port}")],
        &["up.test:127.0.0.1"],
    )
}

fn proxy_with(egress: Egress, config: Config, log: Option<std::fs::File>) -> (Proxy, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = start(OwnedFd::from(listener), egress, config, log).unwrap();
    (proxy, addr)
}

fn client(proxy: SocketAddr, first: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(first).unwrap();
    s
}

/// Reads a response head (through the blank line).
fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!(
                "head cut short ({other:?}): {:?}",
                String::from_utf8_lossy(&head)
            ),
        }
    }
    String::from_utf8(head).unwrap()
}

fn read_to_end(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

fn only(records: Vec<ConnRecord>) -> ConnRecord {
    assert_eq!(records.len(), 1, "{records:#?}");
    records.into_iter().next().unwrap()
}

const ESTABLISHED: &str = "HTTP/1.1 200 Connection established\r\n\r\n";

#[test]
fn connect_relays_both_ways() {
    let _l = shared_lock();
    let up = Server::start(Mode::Echo);
    let (proxy, addr) = proxy_with(up_egress(up.port()), config(), None);
    let mut c = client(
        addr,
        format!("CONNECT Up.Test:{} HTTP/1.1\r\n\r\n", up.port()).as_bytes(),
    );
    assert_eq!(read_head(&mut c), ESTABLISHED);
    c.write_all(b"ping").unwrap();
    let mut four = [0u8; 4];
    c.read_exact(&mut four).unwrap();
    assert_eq!(&four, b"ping");
    c.write_all(b"again").unwrap();
    // Half-close: the EOF reaches the upstream, whose EOF comes back (no timeout involved).
    let t0 = Instant::now();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), b"again");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let r = only(proxy.stop().records);
    assert_eq!(r.host, "up.test");
    assert_eq!(r.port, up.port());
    assert_eq!(r.address.as_deref(), Some("127.0.0.1"));
    assert_eq!(r.protocol, "connect");
    assert_eq!(r.decision, Decision::Allowed);
    assert_eq!(r.rule, format!("up.test:{}", up.port()));
    assert_eq!((r.bytes_up, r.bytes_down), (9, 9));
    assert!(r.start.ends_with('Z') && r.start.len() == 24, "{}", r.start);
    assert_eq!(up.received(), b"pingagain");
}

#[test]
fn absolute_form_get_is_rewritten() {
    let _l = shared_lock();
    const REPLY: &str = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
    let up = Server::start(Mode::Http(REPLY));
    let (proxy, addr) = proxy_with(up_egress(up.port()), config(), None);
    let p = up.port();
    let request = format!(
        "GET http://up.test:{p}/path?q=1 HTTP/1.1\r\nHost: other.test\r\n\
         Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n\
         Connection: keep-alive\r\nUser-Agent: t\r\n\r\n"
    );
    let mut c = client(addr, request.as_bytes());
    assert_eq!(read_to_end(&mut c), REPLY.as_bytes());
    let sent = format!(
        "GET /path?q=1 HTTP/1.1\r\nHost: up.test:{p}\r\nUser-Agent: t\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(String::from_utf8(up.received()).unwrap(), sent);
    let r = only(proxy.stop().records);
    assert_eq!((r.protocol, r.decision), ("http", Decision::Allowed));
    assert_eq!(r.bytes_up, sent.len() as u64);
    assert_eq!(r.bytes_down, REPLY.len() as u64);
}

/// SOCKS5 greeting and a CONNECT request for a domain name.
fn socks_request(cmd: u8, host: &str, port: u16) -> Vec<u8> {
    let mut req = vec![0x05, 0x01, 0x00, 0x05, cmd, 0x00, 0x03, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    req
}

#[test]
fn socks5_domain_connect() {
    let _l = shared_lock();
    let up = Server::start(Mode::Echo);
    let (proxy, addr) = proxy_with(up_egress(up.port()), config(), None);
    let mut c = client(addr, &socks_request(0x01, "up.test", up.port()));
    let mut reply = [0u8; 12];
    c.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..6], &[0x05, 0x00, 0x05, 0x00, 0x00, 0x01]);
    c.write_all(b"hello").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), b"hello");
    // Refused by the allowlist, and an unsupported command.
    let mut c = client(addr, &socks_request(0x01, "evil.test", 443));
    assert_eq!(read_to_end(&mut c), [5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    let mut c = client(addr, &socks_request(0x02, "up.test", up.port()));
    assert_eq!(read_to_end(&mut c), [5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
    let records = proxy.stop().records;
    assert_eq!(records.len(), 3);
    let r = &records[0];
    assert_eq!((r.protocol, r.decision), ("socks5", Decision::Allowed));
    assert_eq!((r.bytes_up, r.bytes_down), (5, 5));
    assert_eq!(records[1].decision, Decision::Refused);
    assert_eq!(
        records[1].rule,
        "egress to evil.test:443 not in the allowlist"
    );
    assert_eq!(records[2].decision, Decision::Failed);
    assert_eq!(
        records[2].rule,
        "SOCKS5 command 2 not supported (CONNECT only)"
    );
}

#[test]
fn refusals_name_the_rule() {
    let _l = shared_lock();
    let up = Server::start(Mode::Echo);
    let p = up.port();
    let e = egress(
        &[
            format!("up.test:{p}"),
            format!("127.0.0.1:{p}"),
            format!("loop.test:{p}"),
            "priv.test".into(),
            "meta.test:80".into(),
        ],
        &[
            "up.test:127.0.0.1",
            "loop.test:127.0.0.2",
            "priv.test=10.1.2.3",
            "meta.test:169.254.169.254",
        ],
    );
    let (proxy, addr) = proxy_with(e, config(), None);
    let cases = [
        (
            "evil.test:443".to_string(),
            "egress to evil.test:443 not in the allowlist".to_string(),
        ),
        (
            "up.test:80".into(),
            format!("egress to up.test:80: port 80 not allowed for up.test (allowed: {p})"),
        ),
        (
            "10.0.0.1:443".into(),
            "egress to 10.0.0.1:443: IP literal not in the allowlist".into(),
        ),
        (
            format!("loop.test:{p}"),
            format!("egress to loop.test:{p} resolves to 127.0.0.2 (loopback)"),
        ),
        (
            "priv.test:443".into(),
            "egress to priv.test:443 resolves to 10.1.2.3 (private)".into(),
        ),
        (
            "meta.test:80".into(),
            "egress to meta.test:80 resolves to 169.254.169.254 (cloud metadata)".into(),
        ),
    ];
    for (target, why) in &cases {
        let mut c = client(
            addr,
            format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        let text = String::from_utf8(read_to_end(&mut c)).unwrap();
        let expected = format!(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\nX-Reprorun-Refusal: reprorun: {why}\r\n\r\n\
             reprorun: {why}\n",
            why.len() + 11
        );
        assert_eq!(text, expected);
    }
    let records = proxy.stop().records;
    assert_eq!(records.len(), cases.len());
    for (r, (_, why)) in records.iter().zip(&cases) {
        assert_eq!(
            (r.decision, r.rule.as_str()),
            (Decision::Refused, why.as_str())
        );
        assert_eq!((r.bytes_up, r.bytes_down), (0, 0));
    }
    assert_eq!(records[3].address.as_deref(), Some("127.0.0.2"));
    assert_eq!(records[0].address, None);
}

#[test]
fn sni_must_match_the_connect_host() {
    let _l = shared_lock();
    let up = Server::start(Mode::Echo);
    let (proxy, addr) = proxy_with(up_egress(up.port()), config(), None);
    let connect = format!("CONNECT up.test:{} HTTP/1.1\r\n\r\n", up.port());
    let mut c = client(addr, connect.as_bytes());
    assert_eq!(read_head(&mut c), ESTABLISHED);
    c.write_all(&client_hello_bytes(Some("evil.test"), 1 << 14))
        .unwrap();
    assert_eq!(read_to_end(&mut c), ACCESS_DENIED);
    // The same name (case and trailing dot aside), sent in pieces and split in records.
    let hello = client_hello_bytes(Some("UP.test."), 20);
    let mut c = client(addr, connect.as_bytes());
    assert_eq!(read_head(&mut c), ESTABLISHED);
    for piece in hello.chunks(9) {
        c.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), hello);
    let records = proxy.stop().records;
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].decision, Decision::Refused);
    assert_eq!(
        records[0].rule,
        "SNI evil.test does not match CONNECT host up.test"
    );
    assert_eq!(records[0].bytes_up, 0);
    assert_eq!(records[1].decision, Decision::Allowed);
    assert_eq!(records[1].bytes_up, hello.len() as u64);
    assert!(!up.received().windows(9).any(|w| w == b"evil.test"));
}

#[test]
fn ip_literal_connect_checks_sni_only_when_sent() {
    let _l = shared_lock();
    let up = Server::start(Mode::Echo);
    let (proxy, addr) = proxy_with(up_egress(up.port()), config(), None);
    let connect = format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", up.port());
    let no_sni = client_hello_bytes(None, 1 << 14);
    let mut c = client(addr, connect.as_bytes());
    assert_eq!(read_head(&mut c), ESTABLISHED);
    c.write_all(&no_sni).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), no_sni);
    let mut c = client(addr, connect.as_bytes());
    assert_eq!(read_head(&mut c), ESTABLISHED);
    c.write_all(&client_hello_bytes(Some("up.test"), 1 << 14))
        .unwrap();
    assert_eq!(read_to_end(&mut c), ACCESS_DENIED);
    let records = proxy.stop().records;
    assert_eq!(records.len(), 2);
    assert_eq!(
        (records[0].decision, records[0].host.as_str()),
        (Decision::Allowed, "127.0.0.1")
    );
    assert_eq!(records[0].rule, format!("127.0.0.1:{}", up.port()));
    assert_eq!(records[1].decision, Decision::Refused);
    assert_eq!(
        records[1].rule,
        "SNI up.test does not match CONNECT host 127.0.0.1"
    );
}

#[test]
fn default_limits() {
    let c = Config::default();
    assert_eq!(c.head_timeout, Duration::from_secs(10));
    assert_eq!(c.connect_timeout, Duration::from_secs(10));
    assert_eq!(c.idle_timeout, Duration::from_secs(300));
    assert_eq!((c.max_conns, c.head_cap), (64, 64 * 1024));
}

/// Sends `request`, returns the status line of the answer and the record.
fn answer_to(config: Config, request: &[u8]) -> (String, ConnRecord) {
    let (proxy, addr) = proxy_with(egress(&[], &[]), config, None);
    let mut c = client(addr, request);
    let text = String::from_utf8_lossy(&read_to_end(&mut c)).into_owned();
    let status = text.lines().next().unwrap_or_default().to_string();
    (status, only(proxy.stop().records))
}

#[test]
fn bad_requests_get_400() {
    let _l = shared_lock();
    for (request, why) in [
        ("hello world\r\n\r\n", "malformed request line"),
        (
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "not a proxy request: use CONNECT or an absolute http:// URL",
        ),
        (
            "GET https://a.test/ HTTP/1.1\r\n\r\n",
            "https:// URLs go through CONNECT, not a plain proxy request",
        ),
        (
            "CONNECT a.test HTTP/1.1\r\n\r\n",
            "CONNECT \"a.test\" names no port",
        ),
    ] {
        let (status, r) = answer_to(config(), request.as_bytes());
        assert_eq!(status, "HTTP/1.1 400 Bad Request", "{request:?}");
        assert_eq!((r.host.as_str(), r.decision), ("", Decision::Failed));
        assert_eq!(r.rule, why);
    }
}

#[test]
fn head_over_the_cap_gets_431() {
    let _l = shared_lock();
    let cfg = Config {
        head_cap: 1024,
        ..config()
    };
    let mut request = b"CONNECT a.test:443 HTTP/1.1\r\n".to_vec();
    request.extend(b"X-Pad: 0123456789abcdef\r\n".repeat(100));
    let (status, r) = answer_to(cfg, &request);
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
    assert_eq!(
        (r.decision, r.rule.as_str()),
        (Decision::Failed, "request head over 1024 bytes")
    );
}

#[test]
fn slowloris_gets_408() {
    let _l = shared_lock();
    let cfg = Config {
        head_timeout: Duration::from_millis(200),
        ..config()
    };
    let (proxy, addr) = proxy_with(egress(&[], &[]), cfg, None);
    let mut c = client(addr, b"CONNECT a.test:443 HTTP/1.1\r\n");
    let mut drip = c.try_clone().unwrap();
    let t0 = Instant::now();
    let dripper = std::thread::spawn(move || {
        for _ in 0..40 {
            if drip.write_all(b"X").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let text = String::from_utf8_lossy(&read_to_end(&mut c)).into_owned();
    let waited = t0.elapsed();
    assert!(
        text.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{text}"
    );
    assert!(waited < Duration::from_millis(1500), "{waited:?}");
    drop(c);
    dripper.join().unwrap();
    let r = only(proxy.stop().records);
    assert_eq!(r.rule, "request head not complete within 200ms");
    assert_eq!(r.decision, Decision::Failed);
}

#[test]
fn idle_timeout_needs_both_directions_idle() {
    let _l = shared_lock();
    let up = Server::start(Mode::Silent);
    let cfg = Config {
        idle_timeout: Duration::from_millis(300),
        ..config()
    };
    let (proxy, addr) = proxy_with(up_egress(up.port()), cfg, None);
    let mut c = client(
        addr,
        format!("CONNECT up.test:{} HTTP/1.1\r\n\r\n", up.port()).as_bytes(),
    );
    assert_eq!(read_head(&mut c), ESTABLISHED);
    // One direction busy for a second: no timeout.
    for _ in 0..10 {
        c.write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let t0 = Instant::now();
    assert_eq!(read_to_end(&mut c), b"");
    let waited = t0.elapsed();
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    let r = only(proxy.stop().records);
    assert_eq!(r.decision, Decision::Allowed);
    assert_eq!((r.bytes_up, r.bytes_down), (10, 0));
    assert_eq!(up.received(), b"x".repeat(10));
}

#[test]
fn closed_port_gets_502() {
    let _l = shared_lock();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = egress(
        &[format!("closed.test:{port}"), format!("127.0.0.1:{port}")],
        &["closed.test:127.0.0.1"],
    );
    let (proxy, addr) = proxy_with(e, config(), None);
    let mut c = client(
        addr,
        format!("CONNECT closed.test:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    );
    let text = String::from_utf8_lossy(&read_to_end(&mut c)).into_owned();
    assert!(text.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{text}");
    let r = only(proxy.stop().records);
    assert_eq!(r.decision, Decision::Failed);
    assert_eq!(r.address.as_deref(), Some("127.0.0.1"));
    let prefix = format!("cannot connect to closed.test:{port} (127.0.0.1): ");
    assert!(r.rule.starts_with(&prefix), "{}", r.rule);
    assert!(
        text.contains(&format!("\r\n\r\nreprorun: {}\n", r.rule)),
        "{text}"
    );
}

mod load;
mod tls;
