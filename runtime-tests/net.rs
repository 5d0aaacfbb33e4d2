//! The egress allowlist (`--net allow`, `spec/network.md`): named hosts through the proxy
//! and nothing else. Every server is started by the test on the host's loopback; names are
//! mapped with `--add-host` (never real DNS).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// What the test server answers for a path: the body and its content type.
type Route = Arc<dyn Fn(&str) -> (Vec<u8>, &'static str) + Send + Sync>;

/// An HTTP server on the host's loopback that answers every request with `hello PATH` and
/// keeps the request heads it saw.
struct Upstream {
    port: u16,
    conns: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start() -> Upstream {
        Upstream::serving(Arc::new(|path: &str| {
            (format!("hello {path}").into_bytes(), "text/plain")
        }))
    }

    /// A server whose answer for a path is `route(path)` (body, content type).
    fn serving(route: Route) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let conns = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (c, h) = (conns.clone(), heads.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let (h, route) = (h.clone(), route.clone());
                thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    h.lock().unwrap().push(head);
                    let (body, kind) = route(&path);
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(&body);
                });
            }
        });
        Upstream { port, conns, heads }
    }
}

/// `reprorun exec ARGS -- sh -c SCRIPT` in `work`, with `--record rec.json`.
fn exec(work: &Work, args: &[&str], script: &str) -> std::process::Output {
    let mut all = vec!["exec", "--record", "rec.json"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "sh", "-c", script]);
    work.run(&all)
}

/// The run record's `network` list.
fn network(work: &Work) -> Vec<serde_json::Value> {
    read_json(&work.path().join("rec.json"))["network"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no network list in the record"))
}

#[test]
fn allowed_names_work_for_curl_python_pip_and_node() {
    require!(Need::Root);
    let wheel = tiny_wheel();
    let up = Upstream::serving(Arc::new(move |path: &str| {
        match path {
        "/simple/demo/" => (
            b"<html><body><a href=\"/files/demo-1.0-py3-none-any.whl\">demo-1.0-py3-none-any.whl</a></body></html>".to_vec(),
            "text/html",
        ),
        p if p.ends_with(".whl") => (wheel.clone(), "application/octet-stream"),
        p => (format!("hello {p}").into_bytes(), "text/plain"),
    }
    }));
    let p = up.port;
    let work = Work::new();
    let host = format!("api.test:{p}");
    let script = format!(
        "curl -sS http://api.test:{p}/curl; echo; \
         curl -sS -p http://api.test:{p}/tunnel; echo; \
         curl -sS --socks5-hostname 127.0.0.1:3128 http://api.test:{p}/socks; echo; \
         python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://api.test:{p}/py\").read().decode())'; \
         node -e 'require(\"http\").get({{host:\"127.0.0.1\",port:3128,path:\"http://api.test:{p}/node\",headers:{{Host:\"api.test:{p}\"}}}}, r => {{ let b=\"\"; r.on(\"data\", d => b += d); r.on(\"end\", () => console.log(b + \" \" + process.env.NODE_USE_ENV_PROXY)); }})'; \
         python3 -m pip download -q --no-cache-dir --disable-pip-version-check --no-deps -d /tmp/dl --index-url http://api.test:{p}/simple/ --trusted-host api.test demo && ls /tmp/dl"
    );
    let o = exec(
        &work,
        &[
            "--allow-host",
            &host,
            "--allow-host",
            &format!("127.0.0.1:{p}"),
            "--add-host",
            "api.test:127.0.0.1",
            "--net-log",
            "net.jsonl",
        ],
        &script,
    );
    let out = expect_code(&o, 0);
    for line in [
        "hello /curl",
        "hello /tunnel",
        "hello /socks",
        "hello /py",
        "hello /node 1",
        "demo-1.0-py3-none-any.whl",
    ] {
        assert!(out.lines().any(|l| l == line), "{line:?} missing: {out}");
    }
    let net = network(&work);
    assert!(net.len() >= 7, "one record per connection: {net:#?}");
    let protocols: Vec<&str> = net
        .iter()
        .map(|r| r["protocol"].as_str().unwrap())
        .collect();
    assert_eq!(&protocols[..3], ["http", "connect", "socks5"], "{net:#?}");
    for r in &net {
        assert_eq!(r["decision"], "allowed", "{r}");
        assert_eq!(r["host"], "api.test", "{r}");
        assert_eq!(r["rule"], host.as_str(), "{r}");
        assert_eq!(r["address"], "127.0.0.1", "{r}");
        assert!(r["bytes_down"].as_u64().unwrap() > 0, "{r}");
    }
    // The plain-HTTP request reached the upstream in origin form, without proxy headers.
    let heads = up.heads.lock().unwrap().clone();
    let curl = heads.iter().find(|h| h.contains("/curl")).unwrap();
    assert!(curl.starts_with("GET /curl HTTP/1.1\r\n"), "{curl}");
    assert!(!curl.to_ascii_lowercase().contains("proxy-"), "{curl}");
    // --net-log streamed the same attempts, one JSON line each.
    let log = std::fs::read_to_string(work.path().join("net.jsonl")).unwrap();
    assert_eq!(log.lines().count(), net.len(), "{log}");
}

/// A wheel pip accepts: a module, METADATA, WHEEL and RECORD, zipped by the host's Python.
fn tiny_wheel() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo-1.0-py3-none-any.whl");
    let script = "import sys, zipfile\n\
        with zipfile.ZipFile(sys.argv[1], 'w') as z:\n\
        \x20   z.writestr('demo/__init__.py', 'x = 1\\n')\n\
        \x20   z.writestr('demo-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: demo\\nVersion: 1.0\\n')\n\
        \x20   z.writestr('demo-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
        \x20   z.writestr('demo-1.0.dist-info/RECORD', '')\n";
    let o = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    std::fs::read(&path).unwrap()
}

#[test]
fn every_refusal_class_is_refused_and_recorded() {
    require!(Need::Root);
    let up = Upstream::start();
    let p = up.port;
    // A host abstract socket the sandbox must not reach.
    use std::os::linux::net::SocketAddrExt;
    let name = format!("reprorun-net-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let abstract_ = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    abstract_.set_nonblocking(true).unwrap();
    let work = Work::new();
    let code = |url: &str, extra: &str| {
        format!("echo \"{url} $(curl -s -o /dev/null -w '%{{http_code}}' {extra} {url})\"; ")
    };
    let sni = format!(
        "python3 -c '\nimport socket, ssl\ns = socket.create_connection((\"127.0.0.1\", 3128))\ns.sendall(b\"CONNECT api.test:{p} HTTP/1.1\\r\\nHost: api.test:{p}\\r\\n\\r\\n\")\nprint(\"sni\", s.recv(100).split(b\" \")[1].decode())\nc = ssl.create_default_context()\ntry:\n    c.wrap_socket(s, server_hostname=\"evil.test\")\nexcept Exception as e:\n    print(\"sni-refused\", type(e).__name__)\n'; "
    );
    let direct = format!(
        "python3 -c '\nimport socket\nfor what, fn in [(\"direct\", lambda: socket.create_connection((\"127.0.0.1\", {p}), timeout=2)), (\"metadata\", lambda: socket.create_connection((\"169.254.169.254\", 80), timeout=2)), (\"udp\", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"8.8.8.8\", 53))), (\"abstract\", lambda: socket.socket(socket.AF_UNIX).connect(\"\\0{name}\"))]:\n    try:\n        fn(); print(what, \"reached\")\n    except OSError as e:\n        print(what, \"refused\", e.errno)\n'"
    );
    let script = [
        code(&format!("http://other.test:{p}/"), ""),
        code("http://api.test:81/", ""),
        code(&format!("http://127.0.0.2:{p}/"), ""),
        code(&format!("http://api.test:{p}/"), ""),
        code(&format!("http://meta.test:{p}/"), ""),
        code(&format!("http://v6.test:{p}/"), ""),
        sni,
        direct,
    ]
    .concat();
    let o = exec(
        &work,
        &[
            "--allow-host",
            &format!("api.test:{p}"),
            "--allow-host",
            &format!("meta.test:{p}"),
            "--allow-host",
            &format!("v6.test:{p}"),
            // api.test resolves to the host's loopback, which is not itself allowlisted;
            // v6.test to an address of a reserved block nobody answers on.
            "--add-host",
            "api.test:127.0.0.1",
            "--add-host",
            "meta.test:169.254.169.254",
            "--add-host",
            "v6.test:[::1]",
        ],
        &script,
    );
    let out = expect_code(&o, 0);
    let want = [
        format!("http://other.test:{p}/ 403"),
        "http://api.test:81/ 403".to_string(),
        format!("http://127.0.0.2:{p}/ 403"),
        format!("http://api.test:{p}/ 403"),
        format!("http://meta.test:{p}/ 403"),
        format!("http://v6.test:{p}/ 403"),
        "direct refused 111".to_string(),
        "metadata refused 101".to_string(),
        "udp refused 101".to_string(),
        "abstract refused 111".to_string(),
    ];
    for line in &want {
        assert!(out.lines().any(|l| l == line), "{line:?} missing: {out}");
    }
    assert_eq!(
        up.conns.load(Ordering::SeqCst),
        0,
        "the upstream was reached: {out}"
    );
    assert!(
        abstract_.accept().is_err(),
        "the host's abstract socket was reached"
    );
    // The CONNECT for the SNI check was refused before the tunnel (api.test is loopback).
    assert!(out.contains("sni 403"), "{out}");
    let net = network(&work);
    let rules: Vec<String> = net
        .iter()
        .map(|r| {
            assert_eq!(r["decision"], "refused", "{r}");
            r["rule"].as_str().unwrap().to_string()
        })
        .collect();
    // The proxy's seven, then the two direct attempts outside the sandbox (the sandbox's
    // own loopback and unix sockets are not egress).
    assert_eq!(rules.len(), 9, "exactly the attempts: {rules:#?}");
    let expect_in = |i: usize, needle: &str| {
        assert!(
            rules[i].contains(needle),
            "{needle:?} not in {:?}",
            rules[i]
        );
    };
    expect_in(0, "not in the allowlist");
    expect_in(1, "port 81");
    expect_in(2, "127.0.0.2");
    expect_in(3, "loopback");
    expect_in(4, "cloud metadata");
    expect_in(5, "loopback");
    expect_in(6, "loopback");
    expect_in(7, "connect to 169.254.169.254:80 outside the proxy");
    expect_in(8, "sendto to 8.8.8.8:53 outside the proxy");
    assert_eq!(net[7]["protocol"], "direct-connect");
    assert_eq!(net[8]["protocol"], "direct-sendto");
}

#[test]
fn a_tls_client_hello_must_name_the_connect_host() {
    require!(Need::Root);
    // A loopback "TLS" upstream that is allowlisted by its literal address: the CONNECT is
    // allowed, then the ClientHello's SNI decides.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let p = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for s in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut s = s;
                let mut buf = [0u8; 4096];
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    let work = Work::new();
    let client = |sni: &str| {
        format!(
            "python3 -c '\nimport socket, ssl\ns = socket.create_connection((\"127.0.0.1\", 3128))\ns.sendall(b\"CONNECT api.test:{p} HTTP/1.1\\r\\n\\r\\n\")\nprint(\"{sni}\", s.recv(100).split(b\" \")[1].decode())\ns.settimeout(3)\ntry:\n    ssl.create_default_context().wrap_socket(s, server_hostname=\"{sni}\")\nexcept Exception as e:\n    print(\"{sni}\", \"alert\" if \"ACCESS_DENIED\" in str(e) else \"other\", e)\n'; "
        )
    };
    let o = exec(
        &work,
        &[
            "--allow-host",
            &format!("api.test:{p}"),
            "--allow-host",
            &format!("127.0.0.1:{p}"),
            "--add-host",
            "api.test:127.0.0.1",
        ],
        &[client("evil.test"), client("api.test")].concat(),
    );
    let out = expect_code(&o, 0);
    assert!(out.contains("evil.test 200"), "{out}");
    assert!(out.contains("evil.test alert"), "{out}");
    // The matching name got through to the (silent) upstream: no alert, a timeout.
    assert!(out.contains("api.test other"), "{out}");
    let net = network(&work);
    assert_eq!(net.len(), 2, "{net:#?}");
    assert_eq!(net[0]["decision"], "refused");
    assert!(
        net[0]["rule"].as_str().unwrap().contains("SNI"),
        "{}",
        net[0]
    );
    assert_eq!(net[1]["decision"], "allowed");
}

#[test]
fn bad_allowlists_fail_before_anything_starts() {
    let work = Work::new();
    for (args, needle) in [
        (vec!["--allow-host", "*"], "\"*\""),
        (vec!["--allow-host", "pypi.org:*"], "pypi.org:*"),
        (vec!["--allow-host", "pypi.org:70000"], "70000"),
        (vec!["--allow-host", "bad..name"], "bad..name"),
        (
            vec!["--allow-file", "/nonexistent/allow.txt"],
            "/nonexistent/allow.txt",
        ),
        (vec!["--add-host", "name-only"], "name-only"),
        (
            vec!["--net", "host", "--allow-host", "pypi.org"],
            "--net allow",
        ),
        (
            vec!["--net", "allow", "--isolation", "none"],
            "--isolation=none",
        ),
    ] {
        let mut all = vec!["exec"];
        all.extend(args.iter().copied());
        all.extend(["--", "true"]);
        let o = work.run(&all);
        expect_bad_input(&o, needle);
    }
    // `--net allow` alone is valid, allows nothing, and still sets the proxy variables.
    let o = work.run(&["exec", "--net", "allow", "--dry-run", "--", "true"]);
    let plan: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert_eq!(plan["egress"]["rules"], serde_json::json!([]));
    let env = plan["env"].to_string();
    assert!(env.contains("HTTPS_PROXY=http://127.0.0.1:3128"), "{env}");
    assert!(env.contains("NO_PROXY=localhost,127.0.0.1,::1"), "{env}");
    // A file of patterns, with comments, in the plan in canonical form.
    std::fs::write(
        work.path().join("allow.txt"),
        "# model APIs\napi.openai.com\n\n*.PythonHosted.org.\n[::1]:8080\n",
    )
    .unwrap();
    let o = work.run(&[
        "exec",
        "--allow-file",
        "allow.txt",
        "--dry-run",
        "--",
        "true",
    ]);
    let plan: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert_eq!(
        plan["egress"]["rules"],
        serde_json::json!(["api.openai.com:443", "*.pythonhosted.org:443", "[::1]:8080"])
    );
}

#[test]
fn nothing_hangs_and_nothing_is_left_when_the_run_ends() {
    require!(Need::Root);
    // An upstream that accepts and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let p = silent.local_addr().unwrap().port();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let h = held.clone();
    thread::spawn(move || {
        for s in silent.incoming().flatten() {
            h.lock().unwrap().push(s);
        }
    });
    let work = Work::new();
    // A client left waiting on the silent upstream in the background, garbage, and a
    // request head over the cap: the run still ends as soon as the command does.
    let script = format!(
        "curl -s -m 30 -p http://api.test:{p}/ >/dev/null & sleep 0.5; \
         printf 'garbage\\r\\n\\r\\n' | timeout 5 python3 -c 'import socket,sys; s=socket.create_connection((\"127.0.0.1\",3128)); s.sendall(sys.stdin.buffer.read()); print(\"garbage\", s.recv(100).split(b\" \")[1].decode())'; \
         python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\",3128))
try:
  s.sendall(b\"GET http://api.test/ HTTP/1.1\\r\\nX: \" + b\"a\" * 70000 + b\"\\r\\n\\r\\n\"); print(\"huge\", s.recv(100).split(b\" \")[1].decode())
except ConnectionError: print(\"huge reset\")'; \
         echo done"
    );
    let started = Instant::now();
    let o = exec(
        &work,
        &[
            "--allow-host",
            &format!("api.test:{p}"),
            "--allow-host",
            &format!("127.0.0.1:{p}"),
            "--add-host",
            "api.test:127.0.0.1",
        ],
        &script,
    );
    let out = expect_code(&o, 0);
    assert!(out.contains("garbage 400"), "{out}");
    assert!(
        out.lines()
            .any(|l| l == "huge 431" || l == "huge 400" || l == "huge reset"),
        "{out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the run waited for the stalled connection"
    );
    let net = network(&work);
    assert_eq!(net.len(), 3, "{net:#?}");
    assert_eq!(
        net[0]["decision"], "allowed",
        "the stalled tunnel: {}",
        net[0]
    );
    assert_eq!(net[1]["decision"], "failed", "{}", net[1]);
    // The proxy's connection to the silent upstream was closed when the run ended.
    assert!(wait_until(Duration::from_secs(5), || {
        held.lock().unwrap().iter().all(|s| {
            let _ = s.set_nonblocking(true);
            let mut b = [0u8; 1];
            matches!((&*s).read(&mut b), Ok(0))
        })
    }));
}

#[test]
fn rootless_runs_reach_allowed_hosts() {
    let Some(user) = rootless_user() else { return };
    let up = Upstream::start();
    let p = up.port;
    let (_dir, bin) = world_readable_binary();
    let work = Work::new();
    let o = as_user(
        user,
        &bin,
        &[
            "exec",
            "--allow-host",
            &format!("api.test:{p}"),
            "--allow-host",
            &format!("127.0.0.1:{p}"),
            "--add-host",
            "api.test:127.0.0.1",
            "--",
            "sh",
            "-c",
            &format!("curl -sS http://api.test:{p}/rootless; echo; curl -s -o /dev/null -w '%{{http_code}}' http://other.test:{p}/"),
        ],
        work.path(),
    );
    let out = expect_code(&o, 0);
    assert!(out.contains("hello /rootless"), "{out}");
    assert!(out.ends_with("403"), "{out}");
}

/// The `Name:` of `/proc/PID/status`'s line `key`.
fn status_field(pid: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

#[test]
fn the_proxy_parses_the_sandbox_bytes_unprivileged_in_the_sandbox_cgroup() {
    require!(Need::Root);
    let up = Upstream::start();
    let work = Work::new();
    let port = up.port.to_string();
    let rule = format!("up.test:{port}");
    // The workload asks once through the proxy, then waits for the file the test writes.
    let script =
        format!("curl -sS http://up.test:{port}/x; echo; while [ ! -e go ]; do sleep 0.1; done");
    let child = work
        .cmd(&[
            "exec",
            "--record",
            "rec.json",
            "--memory",
            "256m",
            "--allow-host",
            &rule,
            "--allow-host",
            &format!("127.0.0.1:{port}"),
            "--add-host",
            "up.test:127.0.0.1",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let supervisor = child.id().to_string();
    // The supervisor's children: init, and the proxy's helper.
    let mut helper = None;
    wait_until(Duration::from_secs(20), || {
        let kids =
            std::fs::read_to_string(format!("/proc/{supervisor}/task/{supervisor}/children"))
                .unwrap_or_default();
        helper = kids
            .split_whitespace()
            .map(str::to_string)
            .find(|pid| status_field(pid, "Name:").as_deref() == Some("rrnet-proxy"));
        helper.is_some() && up.conns.load(Ordering::SeqCst) > 0
    });
    let found = helper.clone().and_then(|pid| {
        let uid = status_field(&pid, "Uid:")?;
        let cap = status_field(&pid, "CapEff:")?;
        let bnd = status_field(&pid, "CapBnd:")?;
        let nnp = status_field(&pid, "NoNewPrivs:")?;
        let groups = status_field(&pid, "Groups:")?;
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let init_cgroup = std::fs::read_to_string(format!("/proc/{supervisor}/cgroup")).ok()?;
        Some((uid, cap, bnd, nnp, groups, cgroup != init_cgroup))
    });
    std::fs::write(work.path().join("go"), "").unwrap();
    let o = child.wait_with_output().unwrap();
    let (uid, cap, bnd, nnp, groups, own_cgroup) =
        found.unwrap_or_else(|| panic!("no rrnet-proxy child of the supervisor {supervisor}"));
    // Not root by any of its four ids, no capability at all, no way back.
    assert!(
        uid.split_whitespace().all(|id| id != "0"),
        "helper uids: {uid}"
    );
    assert_eq!(cap, "0000000000000000", "helper CapEff");
    assert_eq!(bnd, "0000000000000000", "helper CapBnd");
    assert_eq!(nnp, "1", "helper NoNewPrivs");
    assert_eq!(groups, "", "helper supplementary groups");
    assert!(own_cgroup, "the helper is not in the sandbox's cgroup");
    // The run and its record are as before.
    assert!(
        stdout(&o).contains("hello /x"),
        "{:?} {} {}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    let net = network(&work);
    assert_eq!(net.len(), 1, "{net:?}");
    assert_eq!(net[0]["decision"], "allowed");
    assert_eq!(net[0]["host"], "up.test");
    assert_eq!(net[0]["protocol"], "http");
}
