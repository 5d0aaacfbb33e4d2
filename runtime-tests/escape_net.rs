//! Escape attempts through the egress proxy, the audit sandbox's corpus guard, and work the
//! supervisor does for the workload (issue 42, items 4 and 5). Each `attempt_*` is listed in
//! `escape.rs`'s `host_side_tests!`, so the escape summary counts it; each returns
//! `Ok(detail)` when the attempt was blocked.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::*;
use crate::escape::run_measured;

/// A global (not private, not documentation) address the test puts on the loopback device of
/// a network namespace it makes: there it is one of "the host's own addresses".
const OWN_ADDR: &str = "45.45.45.45";

/// An allowlisted name that resolves to one of the host's own addresses (not loopback): a
/// service bound to all addresses must not be reached. Run in a network namespace the test
/// makes (the machine's interfaces are left alone), whose loopback also carries a global
/// address, with a server on 0.0.0.0 there.
pub(crate) fn attempt_proxy_host_own_address() -> Result<String, String> {
    let w = Work::new();
    let script = format!(
        "ip link set lo up && ip addr add {OWN_ADDR}/32 dev lo || exit 97
         python3 -c '
import socket, sys
s = socket.socket(); s.bind((\"0.0.0.0\", 0)); s.listen(8)
open(\"port\", \"w\").write(str(s.getsockname()[1]))
c, _ = s.accept(); open(\"reached\", \"w\").write(\"yes\")
c.sendall(b\"HTTP/1.1 200 OK\\r\\nContent-Length: 12\\r\\nConnection: close\\r\\n\\r\\nHOST-SERVICE\")
c.close()' & srv=$!
         while [ ! -s port ]; do sleep 0.05; done; p=$(cat port)
         {BIN} exec --record rec.json --allow-host svc.test:$p --add-host svc.test:{OWN_ADDR} \
           -- curl -sS -m 10 http://svc.test:$p/
         echo \"exit $?\"; kill $srv 2>/dev/null; exit 0"
    );
    let o = Command::new("unshare")
        .args(["-n", "sh", "-c", &script])
        .current_dir(w.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = stdout(&o);
    if o.status.code() == Some(97) {
        return Err(format!("could not set up the namespace: {}", stderr(&o)));
    }
    if w.path().join("reached").exists() || out.contains("HOST-SERVICE") {
        return Err(format!("the host's service was reached: {out}"));
    }
    let rec = read_json(&w.path().join("rec.json"));
    let refused = rec["network"].as_array().and_then(|n| n.first()).cloned();
    match refused {
        Some(r)
            if r["decision"] == "refused"
                && r["rule"]
                    .as_str()
                    .unwrap_or("")
                    .contains("host's own address") =>
        {
            Ok(r["rule"].as_str().unwrap_or("").to_string())
        }
        other => Err(format!("not recorded as refused: {other:?}; {out}")),
    }
}

/// An HTTP server on the host's loopback that answers the first request head of a connection
/// and then keeps everything else the connection brings until it ends; sends it all.
fn recording_server() -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let mut answered = false;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            if !answered && got.windows(4).any(|w| w == b"\r\n\r\n") {
                answered = true;
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nfirst\n",
                );
                let _ = s.shutdown(Shutdown::Write);
            }
        }
        let _ = tx.send(String::from_utf8_lossy(&got).into_owned());
    });
    (port, rx)
}

/// Two requests in one write to the proxy, the second for a host not on the allowlist: only
/// the first reaches its upstream; the record says the rest was not forwarded.
pub(crate) fn attempt_proxy_pipelined_request() -> Result<String, String> {
    let (p, seen) = recording_server();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let q = other.local_addr().unwrap().port();
    other.set_nonblocking(true).unwrap();
    let w = Work::new();
    let script = format!(
        "import socket
s = socket.create_connection((\"127.0.0.1\", 3128))
s.sendall(b\"GET http://api.test:{p}/first HTTP/1.1\\r\\nHost: api.test:{p}\\r\\n\\r\\n\"
          b\"GET http://other.test:{q}/second HTTP/1.1\\r\\nHost: other.test:{q}\\r\\n\\r\\n\")
got = b\"\"
while True:
    d = s.recv(4096)
    if not d: break
    got += d
print(got.decode(errors=\"replace\"))"
    );
    let o = w.run(&[
        "exec",
        "--record",
        "rec.json",
        "--allow-host",
        &format!("api.test:{p}"),
        "--allow-host",
        &format!("127.0.0.1:{p}"),
        "--add-host",
        "api.test:127.0.0.1",
        "--add-host",
        "other.test:127.0.0.1",
        "--",
        "python3",
        "-c",
        &script,
    ]);
    let upstream = seen
        .recv_timeout(Duration::from_secs(30))
        .map_err(|e| format!("the upstream saw nothing ({e}): {}", stderr(&o)))?;
    if upstream.contains("/second") || upstream.contains("other.test") {
        return Err(format!(
            "the pipelined request reached the upstream: {upstream:?}"
        ));
    }
    if other.accept().is_ok() {
        return Err("the second host's server was reached".into());
    }
    let rec = read_json(&w.path().join("rec.json"));
    let first = rec["network"].as_array().and_then(|n| n.first()).cloned();
    match first {
        Some(r)
            if r["note"]
                .as_str()
                .is_some_and(|n| n.contains("not forwarded")) =>
        {
            Ok(r["note"].as_str().unwrap_or("").to_string())
        }
        other => Err(format!("not recorded: {other:?}; {}", stdout(&o))),
    }
}

/// Writes a one-pair, one-group audit corpus (the format of `spec/audit.md`) into `dir`.
fn tiny_corpus(dir: &Path) {
    let tree = store_tree(dir, &[("main.py", "print(1)\n", 0o644)]);
    let paper = store_paper(dir, "# A paper\n");
    write_manifest(
        dir,
        &serde_json::json!({
            "version": 1,
            "pairs": [{"paper_id": "p1", "repo": "o/demo", "paper": paper,
                       "paper_kind": "md", "collected_at": "2024-01-01T00:00:00Z"}],
            "groups": [{"group_id": "p1@000000000000", "paper_id": "p1", "repo": "o/demo",
                        "commit": "0".repeat(40), "tree": tree, "issues": [1]}],
            "issues": [{"issue": {"repo": "o/demo", "number": 1, "title": "HIDDEN-ISSUE-TITLE"},
                        "grounding": {"target": "open", "group_id": "p1@000000000000",
                                      "rule": "default_branch_at_collected_at"}}],
            "warnings": [],
        }),
    );
}

/// `audit run --corpus` naming a corpus under `/usr` (which agents see) through `..` and
/// through a symbolic link: refused like the plain path. The corpus is put under `/usr` on
/// a tmpfs of a mount namespace the test makes (the host's `/usr` is left alone).
pub(crate) fn attempt_audit_corpus_under_usr_by_link() -> Result<String, String> {
    let w = Work::new();
    tiny_corpus(&w.path().join("corpus"));
    let dotdot = format!("{}/../../usr/local/src/c", w.path().display());
    let script = format!(
        "mount -t tmpfs rr-test /usr/local/src && cp -a corpus /usr/local/src/c || exit 97
         ln -s /usr/local/src/c link
         for c in link {dotdot}; do
           {BIN} audit run --corpus $c --db audit.db --agent cmd --agent-cmd 'cat /usr/local/src/c/corpus.json' --json >/dev/null 2>err
           echo \"$c $? $(cat err)\"
         done"
    );
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .current_dir(w.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = stdout(&o);
    if o.status.code() == Some(97) || out.lines().count() != 2 {
        return Err(format!("setup failed: {out} {}", stderr(&o)));
    }
    for line in out.lines() {
        if !(line.contains(" 125 ") && line.contains("lies under /usr")) {
            return Err(format!("not refused: {line}"));
        }
    }
    Ok(out.replace('\n', "; "))
}

/// 50,000 refused direct `connect()`s (each was kept in the supervisor's memory, without
/// bound): the run record keeps 1,000 and counts the rest, and the supervisor's peak RSS
/// grows by less than 8 MB over a run of 1,000.
pub(crate) fn attempt_direct_connect_flood() -> Result<String, String> {
    let run = |n: u32| {
        let w = Work::new();
        let script = format!(
            "import socket
s = socket.socket()
for i in range({n}):
    try: s.connect((\"192.0.2.1\", 1 + i % 65000))
    except OSError: pass
print(\"done\")"
        );
        let (code, out, err, cost) = run_measured(
            &w,
            &[
                "exec",
                "--record",
                "rec.json",
                "--allow-host",
                "x.test:1",
                "--timeout",
                "60s",
                "--",
                "python3",
                "-c",
                &script,
            ],
        );
        let rec = read_json(&w.path().join("rec.json"));
        (code, out, err, cost.peak_mb, rec)
    };
    let (_, _, _, small, _) = run(1000);
    let (code, out, err, big, rec) = run(50_000);
    let kept = rec["network"].as_array().map_or(0, Vec::len);
    let dropped = rec["network_dropped"].as_u64();
    let seen = format!(
        "peak RSS {small:.1} MB after 1,000, {big:.1} MB after 50,000; kept {kept}, dropped {dropped:?}"
    );
    if code != Some(0) || out != "done\n" {
        return Err(format!("{seen}: status {code:?}, {out:?}, {err}"));
    }
    if big - small > 8.0 || kept > 1000 || dropped != Some(50_000 - kept as u64) {
        return Err(seen);
    }
    Ok(seen)
}

/// The `ss -tmn` lines of the host's sockets connected to 127.0.0.1:`port`, as (Send-Q, send
/// buffer, receive buffer).
fn upstream_sockets(port: u16) -> Vec<(u64, u64, u64)> {
    let o = Command::new("ss")
        .args(["-tmnH", "dst", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    let text = stdout(&o);
    let field = |line: &str, key: &str| -> u64 {
        line.split([',', '(', ')'])
            .find_map(|f| f.strip_prefix(key).and_then(|v| v.parse().ok()))
            .unwrap_or(0)
    };
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        // The socket line, then (indented, or on the same line) its skmem.
        let mut all = line.to_string();
        if let Some(next) = lines.peek() {
            if next.trim_start().starts_with("skmem") {
                all.push(' ');
                all.push_str(lines.next().unwrap_or_default());
            }
        }
        let send_q = all
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        out.push((send_q, field(&all, "tb"), field(&all, "rb")));
    }
    out
}

/// Eight tunnels to an upstream that never reads, each fed until it blocks: the proxy's
/// upstream sockets hold at most their capped buffers (256 KiB), read with `ss` in the host's
/// network namespace while the tunnels are full.
pub(crate) fn attempt_proxy_tunnel_buffers() -> Result<String, String> {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let p = server.local_addr().unwrap().port();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = held.clone();
    std::thread::spawn(move || {
        for s in server.incoming().flatten() {
            h.lock().unwrap().push(s); // never read
        }
    });
    let w = Work::new();
    let script = format!(
        "import socket, time, os
ts = []
for i in range(8):
    s = socket.create_connection((\"127.0.0.1\", 3128))
    s.sendall(b\"CONNECT up.test:{p} HTTP/1.1\\r\\n\\r\\n\")
    assert b\" 200 \" in s.recv(100)
    s.setblocking(False)
    ts.append(s)
chunk = b\"x\" * 65536
idle = 0
while idle < 10:
    moved = 0
    for s in ts:
        try:
            while True: moved += s.send(chunk)
        except BlockingIOError: pass
    idle = idle + 1 if moved == 0 else 0
    time.sleep(0.05)
open(\"/work/filled\", \"w\").close()
for _ in range(600):
    if os.path.exists(\"/work/done\"): break
    time.sleep(0.05)
print(\"ok\")"
    );
    let child = w
        .cmd(&[
            "exec",
            "--allow-host",
            &format!("up.test:{p}"),
            "--allow-host",
            &format!("127.0.0.1:{p}"),
            "--add-host",
            "up.test:127.0.0.1",
            "--timeout",
            "60s",
            "--",
            "python3",
            "-c",
            &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let filled = wait_until(Duration::from_secs(40), || w.path().join("filled").exists());
    let sockets = upstream_sockets(p);
    std::fs::write(w.path().join("done"), "").unwrap();
    let o = child.wait_with_output().unwrap();
    let seen = format!("upstream sockets (Send-Q, tb, rb): {sockets:?}");
    if !filled || sockets.len() != 8 {
        return Err(format!("{seen}; filled {filled}; {}", stderr(&o)));
    }
    // The queue may pass the buffer by the segment that crossed it.
    let cap = 256 * 1024;
    if sockets
        .iter()
        .any(|(q, tb, rb)| *q > cap + 64 * 1024 || *tb > cap || *rb > cap)
    {
        return Err(seen);
    }
    Ok(seen)
}

/// 100 loopback TCP connections inside the sandbox, under `--memory 64m`, whose reader never
/// reads, each written to until it blocks: the bytes the kernel took (socket buffers, the
/// host's memory) stay within the limit (they went to 400 MB, outside `--memory`).
pub(crate) fn attempt_loopback_tcp_memory() -> Result<String, String> {
    let w = Work::new();
    let script = "import socket, time
l = socket.socket(); l.bind((\"127.0.0.1\", 0)); l.listen(128)
pairs = []
for i in range(100):
    c = socket.create_connection(l.getsockname())
    a, _ = l.accept()
    c.setblocking(False)
    pairs.append((c, a))
chunk = b\"x\" * 65536
total = 0
idle = 0
while idle < 5:
    moved = 0
    for c, _ in pairs:
        try:
            while True: moved += c.send(chunk)
        except (BlockingIOError, OSError): pass
    total += moved
    idle = idle + 1 if moved == 0 else 0
    time.sleep(0.05)
print(total >> 20)";
    let o = w.run(&[
        "exec",
        "--memory",
        "64m",
        "--timeout",
        "60s",
        "--",
        "python3",
        "-c",
        script,
    ]);
    let out = stdout(&o);
    let mb: u64 = out
        .trim()
        .parse()
        .map_err(|_| format!("status {:?}: {out:?} {}", o.status.code(), stderr(&o)))?;
    let seen = format!("{mb} MB queued in loopback TCP under --memory 64m");
    if mb > 80 {
        return Err(seen);
    }
    Ok(seen)
}
