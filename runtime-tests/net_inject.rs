//! `--inject-env` (issue 47, `spec/network.md`): a key that never enters the sandbox. A TLS
//! upstream on the host's loopback, with a test CA made here, reached through allowlisted
//! names (`--add-host`); `curl` and Python inside.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use rustls::{ServerConfig, ServerConnection, StreamOwned};

use crate::common::tls::TestCa;
use crate::common::*;

/// The real value: never in the sandbox.
const REAL: &str = "sk-test-Q7rT2mX9vB4nK8pL3wZ6";

/// A TLS server for `api.test` and `other.test` under a test CA; it keeps each request's
/// head and body.
struct TlsUpstream {
    port: u16,
    ca_pem: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl TlsUpstream {
    fn start() -> TlsUpstream {
        let ca = TestCa::new(&["api.test", "other.test"]);
        let config = ca.config.clone();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (config, s) = (config.clone(), s.clone());
                thread::spawn(move || serve_one(config, tcp, &s));
            }
        });
        TlsUpstream {
            port,
            ca_pem: ca.pem,
            seen,
        }
    }

    fn seen(&self) -> String {
        self.seen.lock().unwrap().join("\n----\n")
    }
}

/// One request: `/stream` answers in chunks, `/ws` upgrades and echoes, others `hello PATH`.
fn serve_one(config: Arc<ServerConfig>, tcp: TcpStream, seen: &Mutex<Vec<String>>) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(20)));
    let Ok(conn) = ServerConnection::new(config) else {
        return;
    };
    let mut tls = StreamOwned::new(conn, tcp);
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tls.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    if tls.read_exact(&mut body).is_err() {
        return;
    }
    seen.lock()
        .unwrap()
        .push(format!("{head}{}", String::from_utf8_lossy(&body)));
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    match path.as_str() {
        "/stream" => {
            let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
            for i in 0..3 {
                let event = format!("data: event {i}\n\n");
                let _ = write!(tls, "{:x}\r\n{event}\r\n", event.len());
                let _ = tls.flush();
                thread::sleep(Duration::from_millis(50));
            }
            let _ = tls.write_all(b"0\r\n\r\n");
        }
        "/ws" => {
            let _ = tls.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
            let _ = tls.flush();
            let mut buf = [0u8; 1024];
            while let Ok(n @ 1..) = tls.read(&mut buf) {
                let _ = tls.write_all(&[b"echo:", &buf[..n]].concat());
                let _ = tls.flush();
            }
        }
        _ => {
            let body = format!("hello {path}\n");
            let _ = write!(
                tls,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    }
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// A Python client inside: an upgrade request over TLS (trusting SSL_CERT_FILE), then bytes
/// both ways.
const WEBSOCKET: &str = r#"
import os, socket, ssl, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT api.test:%d HTTP/1.1\r\n\r\n" % port)
assert b" 200 " in s.recv(200)
t = ssl.create_default_context().wrap_socket(s, server_hostname="api.test")
t.sendall(b"GET /ws HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nAuthorization: Bearer " + os.environ["KEY_A"].encode() + b"\r\n\r\n")
got = b""
while b"\r\n\r\n" not in got:
    got += t.recv(1000)
print("ws", got.split(b"\r\n")[0].decode())
t.sendall(b"frame " + os.environ["KEY_A"].encode())
print("ws", t.recv(1000).decode() == "echo:frame " + os.environ["KEY_A"])
"#;

#[test]
fn an_injected_key_reaches_its_host_only_and_never_the_sandbox() {
    require!(Need::Root, Need::Tool("curl"), Need::Tool("python3"));
    let up = TlsUpstream::start();
    let p = up.port;
    let work = Work::new();
    std::fs::write(work.path().join("test-ca.pem"), &up.ca_pem).unwrap();
    std::fs::write(work.path().join("ws.py"), WEBSOCKET).unwrap();
    let curl = |name: &str, path: &str, extra: &str| {
        format!(
            "curl -sS {extra} -H \"Authorization: Bearer $KEY_A\" https://{name}:{p}{path}; echo \" rc=$?\"; "
        )
    };
    let script = [
        "cat /proc/self/environ | tr '\\0' '\\n' | grep '^KEY_A='; ".to_string(),
        curl("api.test", "/header", ""),
        curl("other.test", "/elsewhere", ""),
        curl("api.test", "/body", "-d \"key=$KEY_A\""),
        curl("api.test", "/stream", "-N"),
        // A client that trusts only its own CA (pins it): refuses the proxy's certificate.
        curl("api.test", "/pinned", "--cacert /work/test-ca.pem"),
        format!("python3 /work/ws.py {p}; "),
    ]
    .concat();
    let rules = [
        format!("KEY_A:api.test:{p}"),
        format!("KEY_B:other.test:{p}"),
    ];
    let o = work
        .cmd(&[
            "exec",
            "--record",
            "rec.json",
            "--date",
            "1999-06-01",
            "--inject-env",
            &rules[0],
            "--inject-env",
            &rules[1],
            "--upstream-ca",
            "test-ca.pem",
            "--allow-host",
            &format!("127.0.0.1:{p}"),
            "--add-host",
            "api.test:127.0.0.1",
            "--add-host",
            "other.test:127.0.0.1",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .env("KEY_A", REAL)
        .env("KEY_B", "other-Zk3Jq8Wm2Np5Xr7Tv")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = expect_code(&o, 0);
    // The sandbox's environment holds a placeholder of the same shape.
    let line = out
        .lines()
        .find(|l| l.starts_with("KEY_A="))
        .unwrap_or_else(|| panic!("{out}"));
    let placeholder = &line["KEY_A=".len()..];
    assert_eq!(placeholder.len(), REAL.len(), "{out}");
    let class = |c: char| {
        (
            c.is_ascii_lowercase(),
            c.is_ascii_uppercase(),
            c.is_ascii_digit(),
            c,
        )
    };
    for (a, b) in placeholder.chars().zip(REAL.chars()) {
        let (pa, pb) = (class(a), class(b));
        assert_eq!(
            (pa.0, pa.1, pa.2),
            (pb.0, pb.1, pb.2),
            "{placeholder} vs the real shape"
        );
        if !b.is_ascii_alphanumeric() {
            assert_eq!(a, b, "{placeholder}");
        }
    }
    assert_ne!(placeholder, REAL);
    assert!(
        !out.contains(REAL),
        "the real key reached the sandbox: {out}"
    );
    // Its host got the real key in the header; the other host and the body the placeholder.
    assert!(out.contains("hello /header\n rc=0"), "{out}");
    assert!(out.contains("hello /elsewhere\n rc=0"), "{out}");
    assert!(out.contains("hello /body\n rc=0"), "{out}");
    let seen = up.seen();
    let request = |path: &str| {
        seen.split("\n----\n")
            .find(|r| {
                r.starts_with(&format!("GET {path} ")) || r.starts_with(&format!("POST {path} "))
            })
            .unwrap_or_else(|| panic!("no request for {path}: {seen}"))
            .to_string()
    };
    assert!(
        request("/header").contains(&format!("Bearer {REAL}")),
        "{seen}"
    );
    assert!(
        request("/elsewhere").contains(&format!("Bearer {placeholder}")),
        "{seen}"
    );
    assert!(
        request("/body").contains(&format!("key={placeholder}")),
        "{seen}"
    );
    assert!(
        request("/body").contains(&format!("Bearer {REAL}")),
        "{seen}"
    );
    // A streamed (chunked, server-sent events) answer and an upgrade pass through.
    assert!(
        out.contains("data: event 0\n\ndata: event 1\n\ndata: event 2\n\n rc=0"),
        "{out}"
    );
    assert!(out.contains("ws HTTP/1.1 101 Switching Protocols"), "{out}");
    assert!(out.contains("ws True"), "{out}");
    assert!(request("/ws").contains(&format!("Bearer {REAL}")), "{seen}");
    // The pinning client failed closed: no request reached the upstream.
    assert!(!seen.contains("/pinned"), "{seen}");
    assert!(!out.contains("hello /pinned"), "{out}");
    // The record names which secret went where, and the placeholders passed unchanged; never
    // a value.
    let record = std::fs::read_to_string(work.path().join("rec.json")).unwrap();
    assert!(
        !record.contains(REAL) && !record.contains("Zk3Jq8Wm2Np5Xr7Tv"),
        "{record}"
    );
    let net = read_json(&work.path().join("rec.json"))["network"]
        .as_array()
        .cloned()
        .unwrap();
    let find = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        net.iter().filter(|r| pred(r)).cloned().collect::<Vec<_>>()
    };
    let injected = find(&|r| r["injected"] == serde_json::json!(["KEY_A"]));
    assert!(injected.len() >= 3, "{net:#?}");
    let elsewhere = find(&|r| r["host"] == "other.test");
    assert_eq!(elsewhere.len(), 1, "{net:#?}");
    assert_eq!(
        elsewhere[0]["placeholders"],
        serde_json::json!(["KEY_A"]),
        "{net:#?}"
    );
    assert!(
        elsewhere[0]["note"]
            .as_str()
            .unwrap()
            .contains("another host"),
        "{net:#?}"
    );
    let body = find(&|r| {
        r["note"]
            .as_str()
            .is_some_and(|n| n.contains("KEY_A in a request body"))
    });
    assert_eq!(body.len(), 1, "{net:#?}");
    let pinned = find(&|r| r["decision"] == "failed");
    assert_eq!(pinned.len(), 1, "{net:#?}");
    assert!(
        pinned[0]["rule"]
            .as_str()
            .unwrap()
            .contains("TLS handshake with the client failed"),
        "{net:#?}"
    );
}

#[test]
fn an_upstream_the_proxy_cannot_verify_gets_no_key() {
    require!(Need::Root, Need::Tool("curl"));
    let up = TlsUpstream::start();
    let p = up.port;
    let work = Work::new();
    // No --upstream-ca: the host's trust store does not know the test CA.
    let o = work
        .cmd(&[
            "exec",
            "--record",
            "rec.json",
            "--inject-env",
            &format!("KEY_A:api.test:{p}"),
            "--allow-host",
            &format!("127.0.0.1:{p}"),
            "--add-host",
            "api.test:127.0.0.1",
            "--",
            "sh",
            "-c",
            &format!("curl -sS -H \"Authorization: Bearer $KEY_A\" https://api.test:{p}/x; echo \" rc=$?\""),
        ])
        .env("KEY_A", REAL)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = expect_code(&o, 0);
    assert!(
        out.contains("502") || out.contains("reprorun: TLS with the upstream"),
        "{out}"
    );
    assert!(up.seen().is_empty(), "{}", up.seen());
    let net = read_json(&work.path().join("rec.json"))["network"]
        .as_array()
        .cloned()
        .unwrap();
    assert_eq!(net[0]["decision"], "failed", "{net:#?}");
    assert!(
        net[0]["rule"]
            .as_str()
            .unwrap()
            .contains("TLS with the upstream api.test failed"),
        "{net:#?}"
    );
}

#[test]
fn bad_inject_options_fail_before_anything_starts() {
    let work = Work::new();
    let run = |args: &[&str], key: Option<&str>| {
        let mut all = vec!["exec"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "true"]);
        let mut c = work.cmd(&all);
        c.env_remove("KEY_A");
        if let Some(k) = key {
            c.env("KEY_A", k);
        }
        c.stdin(std::process::Stdio::null()).output().unwrap()
    };
    expect_error(
        &run(&["--inject-env", "KEY_A:api.test"], None),
        "KEY_A is not set",
    );
    expect_error(
        &run(&["--inject-env", "KEY_A:api.test"], Some("short")),
        "at least 12",
    );
    let exec = "reprorun exec";
    let ip = run(&["--inject-env", "KEY_A:127.0.0.1"], Some(REAL));
    expect_usage_error(&ip, "name the host", exec);
    expect_usage_error(
        &run(&["--inject-env", "KEY_A"], Some(REAL)),
        "NAME:HOST",
        exec,
    );
    expect_error(
        &run(&["--upstream-ca", "/etc/hostname"], Some(REAL)),
        "--inject-env",
    );
}

/// Node 20 has no proxy variables of its own: CONNECT by hand, then its TLS stack, which
/// trusts the run's CA through NODE_EXTRA_CA_CERTS.
const NODE: &str = r#"
const http = require("http"), tls = require("tls");
const port = +process.argv[2];
http.request({host: "127.0.0.1", port: 3128, method: "CONNECT", path: `api.test:${port}`})
  .on("connect", (res, socket) => {
    const t = tls.connect({socket, servername: "api.test"}, () => {
      t.write(`GET /node HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer ${process.env.KEY_A}\r\nConnection: close\r\n\r\n`);
    });
    let body = "";
    t.on("data", d => body += d);
    t.on("end", () => console.log(body.split("\r\n\r\n")[1].trim()));
    t.on("error", e => console.log("node error", e.message));
  }).end();
"#;

#[test]
fn real_clients_trust_the_run_ca_through_their_own_variables() {
    require!(
        Need::Root,
        Need::Tool("curl"),
        Need::Tool("python3"),
        Need::Tool("node"),
        Need::Tool("git")
    );
    let up = TlsUpstream::start();
    let p = up.port;
    let work = Work::new();
    std::fs::write(work.path().join("node.js"), NODE).unwrap();
    std::fs::write(work.path().join("test-ca.pem"), &up.ca_pem).unwrap();
    // Each client finds the run's CA through its own variable: urllib (OpenSSL's
    // SSL_CERT_FILE), requests (REQUESTS_CA_BUNDLE, not certifi), Node (NODE_EXTRA_CA_CERTS),
    // git (GIT_SSL_CAINFO, with its own http.extraHeader).
    let script = format!(
        "python3 -c 'import os, urllib.request as u; r = u.Request(\"https://api.test:{p}/urllib\", headers={{\"Authorization\": \"Bearer \" + os.environ[\"KEY_A\"]}}); print(u.urlopen(r).read().decode().strip())'; \
         python3 -c 'import os, requests; print(requests.get(\"https://api.test:{p}/requests\", headers={{\"Authorization\": \"Bearer \" + os.environ[\"KEY_A\"]}}).text.strip())'; \
         node /work/node.js {p}; \
         git -c http.extraHeader=\"Authorization: Bearer $KEY_A\" ls-remote https://api.test:{p}/repo.git >/dev/null 2>&1; echo git done"
    );
    let o = work
        .cmd(&[
            "exec",
            "--record",
            "rec.json",
            "--inject-env",
            &format!("KEY_A:api.test:{p}"),
            "--upstream-ca",
            "test-ca.pem",
            "--allow-host",
            &format!("127.0.0.1:{p}"),
            "--add-host",
            "api.test:127.0.0.1",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .env("KEY_A", REAL)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = expect_code(&o, 0);
    for line in [
        "hello /urllib",
        "hello /requests",
        "hello /node",
        "git done",
    ] {
        assert!(out.lines().any(|l| l == line), "{line:?} missing: {out}");
    }
    let seen = up.seen();
    for path in ["/urllib", "/requests", "/node", "/repo.git/info/refs"] {
        let request = seen
            .split("\n----\n")
            .find(|r| r.starts_with(&format!("GET {path}")))
            .unwrap_or_else(|| panic!("no request for {path}: {seen}"));
        assert!(
            request.contains(&format!("Bearer {REAL}")),
            "{path}: {request}"
        );
    }
}
