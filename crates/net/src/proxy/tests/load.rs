//! The proxy under load and at its end: the connection cap, a thousand parallel clients,
//! the `--net-log` file, and `stop` leaving nothing behind.

use std::collections::BTreeMap;
use std::fs::OpenOptions;

use super::*;

#[test]
fn over_max_conns_gets_503() {
    let _l = shared_lock();
    let up = Server::start(Mode::Echo);
    let cfg = Config {
        max_conns: 2,
        ..config()
    };
    let (proxy, addr) = proxy_with(up_egress(up.port()), cfg, None);
    let connect = format!("CONNECT up.test:{} HTTP/1.1\r\n\r\n", up.port());
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = client(addr, connect.as_bytes());
        assert_eq!(read_head(&mut c), ESTABLISHED);
        held.push(c);
    }
    let mut c = client(addr, connect.as_bytes());
    let text = String::from_utf8(read_to_end(&mut c)).unwrap();
    let line = "proxy busy: 2 connections open (max_conns)";
    assert!(
        text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("\r\n\r\nreprorun: {line}\n")),
        "{text}"
    );
    let mut c = client(addr, &socks_request(0x01, "up.test", up.port()));
    assert_eq!(read_to_end(&mut c), [5, 0, 5, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
    drop(held);
    // Once the tunnels are gone the proxy serves again.
    let t0 = Instant::now();
    loop {
        let mut c = client(addr, connect.as_bytes());
        if read_head(&mut c) == ESTABLISHED {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "still busy");
        std::thread::sleep(Duration::from_millis(20));
    }
    let records = proxy.stop().records;
    assert!(records.len() >= 5, "{records:#?}");
    assert_eq!(records[0].decision, Decision::Allowed);
    assert_eq!(records[1].decision, Decision::Allowed);
    for (r, protocol) in records[2..4].iter().zip(["connect", "socks5"]) {
        assert_eq!((r.decision, r.rule.as_str()), (Decision::Refused, line));
        assert_eq!((r.protocol, r.host.as_str()), (protocol, "up.test"));
    }
    assert_eq!(records.last().unwrap().decision, Decision::Allowed);
}

/// Reads a status line (through its CRLF).
fn status_line(s: &mut TcpStream) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        if s.read(&mut byte)? == 0 {
            break;
        }
        line.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_string())
}

#[test]
fn a_thousand_parallel_connects_are_all_answered() {
    let _l = shared_lock();
    let up = Server::start(Mode::Echo);
    let (proxy, addr) = proxy_with(up_egress(up.port()), Config::default(), None);
    let connect = format!("CONNECT up.test:{} HTTP/1.1\r\n\r\n", up.port());
    let t0 = Instant::now();
    let mut clients: Vec<TcpStream> = (0..1000)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    for c in &mut clients {
        // A connection answered at once (over every budget) may be closed already.
        let _ = c.write_all(connect.as_bytes());
    }
    let (mut ok, mut busy) = (0, 0);
    for c in &mut clients {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        match status_line(c).as_deref() {
            Ok("HTTP/1.1 200 Connection established") => ok += 1,
            Ok("HTTP/1.1 503 Service Unavailable") => busy += 1,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!((ok, busy), (64, 936));
    drop(clients);
    let records = proxy.stop().records;
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    assert_eq!(records.len(), 1000);
    let allowed = records
        .iter()
        .filter(|r| r.decision == Decision::Allowed)
        .count();
    let refused = records
        .iter()
        .filter(|r| r.decision == Decision::Refused && r.rule.starts_with("proxy busy"))
        .count();
    assert_eq!((allowed, refused), (64, 936));
}

#[test]
fn net_log_gets_one_line_per_record() {
    let _l = shared_lock();
    let up = Server::start(Mode::Echo);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("net.log");
    std::fs::write(&path, "").unwrap();
    let file = OpenOptions::new().append(true).open(&path).unwrap();
    let (proxy, addr) = proxy_with(up_egress(up.port()), config(), Some(file));
    let mut c = client(
        addr,
        format!("CONNECT up.test:{} HTTP/1.1\r\n\r\n", up.port()).as_bytes(),
    );
    assert_eq!(read_head(&mut c), ESTABLISHED);
    c.write_all(b"abc").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), b"abc");
    let mut c = client(addr, b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n");
    read_to_end(&mut c);
    // Each line is written when its connection ends, before `stop`.
    let t0 = Instant::now();
    while std::fs::read_to_string(&path).unwrap().lines().count() < 2 {
        assert!(t0.elapsed() < Duration::from_secs(5), "log lines missing");
        std::thread::sleep(Duration::from_millis(10));
    }
    let records = proxy.stop().records;
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected: Vec<serde_json::Value> = records
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    assert_eq!(lines, expected);
    assert_eq!(lines[0]["decision"], "allowed");
    assert_eq!(lines[1]["decision"], "refused");
    assert_eq!(lines[0]["bytes_up"], 3);
}

/// Open descriptors and where they point (the listing's own directory left out).
fn fds() -> BTreeMap<String, String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let to = std::fs::read_link(e.path()).ok()?;
            let to = to.to_string_lossy().into_owned();
            (!to.starts_with("/proc/")).then(|| (e.file_name().to_string_lossy().into_owned(), to))
        })
        .collect()
}

/// Threads of the proxy (named `rrnet-…`).
fn proxy_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("rrnet"))
        .count()
}

fn cloexec(fd: &str) -> bool {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| flags & 0o2_000_000 != 0)
}

/// Waits for `done` for up to three seconds.
fn eventually(done: impl Fn() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

#[test]
fn stop_leaves_no_fds_or_threads() {
    let _w = CENSUS.write().unwrap_or_else(|p| p.into_inner());
    let echo = Server::start(Mode::Echo);
    let silent = Server::start(Mode::Silent);
    let e = egress(
        &[
            format!("up.test:{}", echo.port()),
            format!("127.0.0.1:{}", echo.port()),
            format!("silent.test:{}", silent.port()),
            format!("127.0.0.1:{}", silent.port()),
        ],
        &["up.test:127.0.0.1", "silent.test:127.0.0.1"],
    );
    assert!(eventually(|| proxy_threads() == 0));
    let before = fds();
    let (proxy, addr) = proxy_with(e, Config::default(), None);
    let mut tunnel = client(
        addr,
        format!("CONNECT up.test:{} HTTP/1.1\r\n\r\n", echo.port()).as_bytes(),
    );
    assert_eq!(read_head(&mut tunnel), ESTABLISHED);
    tunnel.write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    tunnel.read_exact(&mut one).unwrap();
    let half_head = client(addr, b"CONNECT up.test:1 HTTP/1.1\r\n");
    let half_socks = client(addr, &[0x05, 0x01]);
    let get = format!("GET http://silent.test:{}/ HTTP/1.1\r\n\r\n", silent.port());
    let waiting = client(addr, get.as_bytes());
    assert!(eventually(|| silent.received().ends_with(b"\r\n\r\n")));
    assert!(eventually(|| proxy_threads() == 5));
    for (fd, to) in fds() {
        if !before.contains_key(&fd) {
            assert!(cloexec(&fd), "descriptor {fd} ({to}) is not close-on-exec");
        }
    }
    let t0 = Instant::now();
    let records = proxy.stop().records;
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(records.len(), 4, "{records:#?}");
    assert_eq!(records[0].decision, Decision::Allowed);
    assert_eq!((records[0].bytes_up, records[0].bytes_down), (1, 1));
    assert!(eventually(|| proxy_threads() == 0));
    for mut c in [tunnel, half_head, half_socks, waiting] {
        assert_eq!(read_to_end(&mut c), b"");
    }
    let leaked = || {
        fds()
            .into_iter()
            .filter(|(fd, _)| !before.contains_key(fd))
            .collect::<Vec<_>>()
    };
    assert!(
        eventually(|| leaked().is_empty()),
        "left open: {:?}",
        leaked()
    );
}

#[test]
fn connections_one_after_another_take_turns_on_a_few_threads() {
    let _w = CENSUS.write().unwrap_or_else(|p| p.into_inner());
    let up = Server::start(Mode::Echo);
    assert!(eventually(|| proxy_threads() == 0));
    let (proxy, addr) = proxy_with(up_egress(up.port()), Config::default(), None);
    let connect = format!("CONNECT up.test:{} HTTP/1.1\r\n\r\n", up.port());
    let mut most = 0;
    for _ in 0..200 {
        let mut c = client(addr, connect.as_bytes());
        assert_eq!(read_head(&mut c), ESTABLISHED);
        drop(c);
        most = most.max(proxy_threads());
    }
    // The leader, at most 16 followers, and a connection still ending.
    assert!(most <= 18, "{most} threads for connections one at a time");
    // Every thread but the leader busy with a held tunnel: the next one is still accepted
    // and served (a new thread leads while the leader serves).
    let held: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut c = client(addr, connect.as_bytes());
            assert_eq!(read_head(&mut c), ESTABLISHED);
            c
        })
        .collect();
    let mut last = client(addr, connect.as_bytes());
    assert_eq!(read_head(&mut last), ESTABLISHED);
    last.write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    last.read_exact(&mut one).unwrap();
    assert_eq!(&one, b"x");
    drop((held, last));
    let records = proxy.stop().records;
    assert_eq!(records.len(), 221);
    assert!(records.iter().all(|r| r.decision == Decision::Allowed));
    assert!(eventually(|| proxy_threads() == 0));
}
