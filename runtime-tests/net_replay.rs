//! `--net-record DIR` and `--net-replay DIR` (issue 47 section 2, `spec/network.md`): a run
//! recorded once against upstreams on the host's loopback (a TLS one under a test CA, and a
//! plain-HTTP one), reached through allowlisted names, then replayed with the upstreams
//! stopped: real clients (curl, Python's urllib and requests) print the same bytes. A
//! request the cassette lacks is refused and named; a link planted at DIR and a corrupted
//! cassette are refused with one line.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use rustls_pki_types::PrivateKeyDer;

use crate::common::*;

/// Upstreams on loopback: TLS for `api.test`, plain HTTP for `plain.test`; they count the
/// requests they answer and stop accepting on `stop`.
struct Upstreams {
    tls: u16,
    plain: u16,
    ca_pem: String,
    served: Arc<AtomicUsize>,
    stopped: Arc<AtomicBool>,
}

#[allow(deprecated)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Upstreams {
    fn start() -> Upstreams {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["api.test".into()])
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        let config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), ca.der().clone()],
                PrivateKeyDer::from(leaf_key),
            )
            .unwrap();
        let config = Arc::new(config);
        let served = Arc::new(AtomicUsize::new(0));
        let stopped = Arc::new(AtomicBool::new(false));
        let listen = |tls: Option<Arc<ServerConfig>>| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let (served, stopped) = (served.clone(), stopped.clone());
            thread::spawn(move || {
                for tcp in listener.incoming().flatten() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let (tls, served) = (tls.clone(), served.clone());
                    thread::spawn(move || {
                        let _ = tcp.set_read_timeout(Some(Duration::from_secs(20)));
                        match tls {
                            Some(config) => {
                                let conn = ServerConnection::new(config).unwrap();
                                let mut s = StreamOwned::new(conn, tcp);
                                serve(&mut s, &served);
                                s.conn.send_close_notify();
                                let _ = s.flush();
                            }
                            None => serve(&mut &tcp, &served),
                        }
                    });
                }
            });
            port
        };
        let tls = listen(Some(config));
        let plain = listen(None);
        Upstreams {
            tls,
            plain,
            ca_pem: ca.pem(),
            served,
            stopped,
        }
    }

    /// Stops accepting (the listeners close) and waits until both ports refuse.
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for port in [self.tls, self.plain] {
            let _ = TcpStream::connect(("127.0.0.1", port));
            assert!(wait_until(Duration::from_secs(10), || {
                TcpStream::connect(("127.0.0.1", port)).is_err()
            }));
        }
    }
}

/// Answers requests on one connection (keep-alive): `/count` says how many it answered so
/// far, `/echo` returns the body, `/stream` answers in chunks, others `hello PATH`.
fn serve(s: &mut dyn ReadWrite, served: &AtomicUsize) {
    loop {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte) {
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
        if s.read_exact(&mut body).is_err() {
            return;
        }
        let n = served.fetch_add(1, Ordering::SeqCst) + 1;
        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let answer = match path.as_str() {
            "/stream" => {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
                for i in 0..3 {
                    let event = format!("data: event {i}\n\n");
                    let _ = write!(s, "{:x}\r\n{event}\r\n", event.len());
                    let _ = s.flush();
                }
                let _ = s.write_all(b"0\r\n\r\n");
                let _ = s.flush();
                continue;
            }
            p if p.starts_with("/count") => format!("count {n}\n"),
            "/echo" => format!("echo {}\n", String::from_utf8_lossy(&body)),
            _ => format!("hello {path}\n"),
        };
        let close = head.to_ascii_lowercase().contains("connection: close");
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Served: {n}\r\nContent-Length: {}\r\n{}\r\n{answer}",
            answer.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        let _ = s.flush();
        if close {
            return;
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Python inside: urllib, then requests (a session: keep-alive), both through the proxy.
const CLIENTS: &str = r#"
import sys, urllib.request
tls, plain = sys.argv[1], sys.argv[2]
print("urllib", urllib.request.urlopen("https://api.test:%s/py?lang=urllib" % tls).read().decode().strip())
print("urllib", urllib.request.urlopen("http://plain.test:%s/plain" % plain).read().decode().strip())
try:
    import requests
except ImportError:
    print("requests missing")
    sys.exit(0)
s = requests.Session()
for i in range(2):
    r = s.get("https://api.test:%s/count" % tls)
    print("requests", r.status_code, r.text.strip())
r = s.post("https://api.test:%s/echo" % tls, data=b"from requests")
print("requests", r.status_code, r.text.strip())
"#;

/// The script the sandbox runs, against the two ports.
fn script(tls: u16, plain: u16) -> String {
    [
        format!(
            "curl -sS https://api.test:{tls}/count https://api.test:{tls}/count; echo \" rc=$?\"; "
        ),
        format!("curl -sS -d 'q=1' https://api.test:{tls}/echo; echo \" rc=$?\"; "),
        format!("curl -sS -N https://api.test:{tls}/stream; echo \" rc=$?\"; "),
        format!("curl -sS http://plain.test:{plain}/plain?x=1; echo \" rc=$?\"; "),
        format!("python3 /work/clients.py {tls} {plain}; echo \" rc=$?\"; "),
        "date +%Y; ".to_string(),
    ]
    .concat()
}

/// `reprorun exec` with the allowlist for both upstreams and `extra` options.
fn run(work: &Work, up: &Upstreams, extra: &[&str], script: &str) -> std::process::Output {
    let (t, p) = (up.tls, up.plain);
    let rules = [
        format!("api.test:{t}"),
        format!("127.0.0.1:{t}"),
        format!("plain.test:{p}"),
        format!("127.0.0.1:{p}"),
    ];
    let mut args = vec![
        "exec",
        "--date",
        "1999-06-01",
        "--upstream-ca",
        "test-ca.pem",
    ];
    if extra.contains(&"--net-replay") {
        args.truncate(3);
    }
    for r in &rules {
        args.extend(["--allow-host", r.as_str()]);
    }
    args.extend([
        "--add-host",
        "api.test:127.0.0.1",
        "--add-host",
        "plain.test:127.0.0.1",
    ]);
    args.extend(extra);
    args.extend(["--", "sh", "-c", script]);
    work.cmd(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_recorded_run_replays_offline_byte_for_byte() {
    require!(Need::Root, Need::Tool("curl"), Need::Tool("python3"));
    let up = Upstreams::start();
    let work = Work::new();
    std::fs::write(work.path().join("test-ca.pem"), &up.ca_pem).unwrap();
    std::fs::write(work.path().join("clients.py"), CLIENTS).unwrap();
    let script = script(up.tls, up.plain);
    let o = run(
        &work,
        &up,
        &["--net-record", "tape", "--record", "rec1.json"],
        &script,
    );
    let recorded = expect_code(&o, 0);
    for want in [
        "count 1\ncount 2\n rc=0",
        "echo q=1\n rc=0",
        "data: event 0\n\ndata: event 1\n\ndata: event 2\n\n rc=0",
        "hello /plain?x=1\n rc=0",
        "urllib hello /py?lang=urllib",
        "urllib hello /plain",
        "requests 200 echo from requests",
        "1999\n",
    ] {
        assert!(recorded.contains(want), "{want:?} not in {recorded}");
    }
    let served = up.served.load(Ordering::SeqCst);
    assert!(served >= 8, "{served}");
    // The cassette: an index of entries and bodies by digest.
    let index = read_json(&work.path().join("tape/index.json"));
    assert_eq!(index["format"], "reprorun-cassette/1");
    let entries = index["entries"].as_array().unwrap();
    assert_eq!(entries.len(), served, "{index:#}");
    for e in entries {
        let digest = e["response_body"]["sha256"].as_str().unwrap();
        let body = std::fs::read(work.path().join("tape/bodies").join(digest)).unwrap();
        assert_eq!(sha256_hex(&body), digest);
    }
    let plain = entries.iter().find(|e| e["scheme"] == "http").unwrap();
    assert_eq!(plain["target"], "/plain?x=1", "{plain:#}");
    assert_eq!(plain["host"], "plain.test");
    let echo = entries.iter().find(|e| e["target"] == "/echo").unwrap();
    assert_eq!(
        echo["request_body"]["sha256"],
        sha256_hex(b"q=1"),
        "{echo:#}"
    );

    // Offline: the upstreams are gone, and nothing reaches them.
    up.stop();
    let o = run(
        &work,
        &up,
        &["--net-replay", "tape", "--record", "rec2.json"],
        &script,
    );
    let replayed = expect_code(&o, 0);
    assert_eq!(replayed, recorded, "replay differs from the recording");
    assert_eq!(up.served.load(Ordering::SeqCst), served);
    let net = read_json(&work.path().join("rec2.json"))["network"]
        .as_array()
        .cloned()
        .unwrap();
    assert!(!net.is_empty());
    for r in &net {
        assert_eq!(r["decision"], "allowed", "{r:#}");
        assert!(r["address"].is_null(), "nothing was resolved: {r:#}");
        assert!(
            r["rule"].as_str().unwrap().starts_with("--net-replay "),
            "{r:#}"
        );
    }
}

#[test]
fn a_request_the_cassette_lacks_is_refused_and_named() {
    require!(Need::Root, Need::Tool("curl"));
    let up = Upstreams::start();
    let work = Work::new();
    std::fs::write(work.path().join("test-ca.pem"), &up.ca_pem).unwrap();
    let t = up.tls;
    let once = format!("curl -sS https://api.test:{t}/known; echo \" rc=$?\"");
    let o = run(&work, &up, &["--net-record", "tape"], &once);
    assert!(expect_code(&o, 0).contains("hello /known\n rc=0"));
    up.stop();
    let twice = format!(
        "curl -sS https://api.test:{t}/known; curl -sS -i https://api.test:{t}/missing?q=1; echo \" rc=$?\"; \
         curl -sS https://elsewhere.test/; echo \" rc=$?\""
    );
    let o = run(
        &work,
        &up,
        &["--net-replay", "tape", "--record", "rec.json"],
        &twice,
    );
    let out = expect_code(&o, 0);
    assert!(out.contains("hello /known\n"), "{out}");
    let line = format!("GET https://api.test:{t}/missing?q=1 is not in the cassette");
    assert!(out.contains("HTTP/1.1 403 Forbidden"), "{out}");
    assert!(out.contains(&line), "{out}");
    assert!(
        out.contains("X-Reprorun-Refusal: reprorun: --net-replay: GET"),
        "{out}"
    );
    let net = read_json(&work.path().join("rec.json"))["network"]
        .as_array()
        .cloned()
        .unwrap();
    let refused: Vec<&serde_json::Value> =
        net.iter().filter(|r| r["decision"] == "refused").collect();
    assert_eq!(refused.len(), 2, "{net:#?}");
    assert!(
        refused[0]["rule"].as_str().unwrap().contains(&line),
        "{net:#?}"
    );
    assert!(
        refused[1]["rule"]
            .as_str()
            .unwrap()
            .contains("no recorded exchange with elsewhere.test:443"),
        "{net:#?}"
    );
}

#[test]
fn a_planted_link_or_a_corrupted_cassette_is_refused_with_one_line() {
    require!(Need::Root);
    let work = Work::new();
    let elsewhere = work.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, work.path().join("tape")).unwrap();
    for flag in ["--net-record", "--net-replay"] {
        let o = work.run(&["exec", flag, "tape", "--", "true"]);
        assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("symbolic link"), "{err}");
    }
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // A cassette whose body was changed after it was written.
    let tape = work.path().join("real");
    std::fs::create_dir_all(tape.join("bodies")).unwrap();
    let body = b"recorded answer\n";
    let digest = sha256_hex(body);
    let empty = sha256_hex(b"");
    std::fs::write(tape.join("bodies").join(&digest), b"changed answer!\n").unwrap();
    std::fs::write(tape.join("bodies").join(&empty), b"").unwrap();
    let index = serde_json::json!({
        "format": "reprorun-cassette/1",
        "entries": [{
            "order": 0, "method": "GET", "scheme": "https", "host": "api.test", "port": 443,
            "target": "/", "request_headers": [],
            "request_body": {"sha256": empty, "size": 0},
            "status": 200, "reason": "OK", "response_headers": [],
            "response_body": {"sha256": digest, "size": body.len()}
        }]
    });
    std::fs::write(tape.join("index.json"), index.to_string()).unwrap();
    let o = work.run(&["exec", "--net-replay", "real", "--", "true"]);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("its SHA-256 is not its name"), "{err}");
    std::fs::write(
        tape.join("index.json"),
        "{\"format\": \"reprorun-cassette/1\"",
    )
    .unwrap();
    let o = work.run(&["exec", "--net-replay", "real", "--", "true"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("index.json: not a cassette index"), "{err}");
}

#[test]
fn reproduce_answers_an_instances_network_from_its_cassette_offline() {
    require!(Need::Root, Need::Tool("curl"));
    use crate::reproduce::{Fixture, FIX, PLAIN_TEST};
    let up = Upstreams::start();
    let mut f = Fixture::new();
    let dir = f.work.path().to_path_buf();
    std::fs::write(dir.join("test-ca.pem"), &up.ca_pem).unwrap();
    let t = up.tls;
    // The instance's tests need an answer from api.test over https.
    let test_cmd = format!("curl -sSf https://api.test:{t}/data");
    let o = run(&f.work, &up, &["--net-record", "cassettes/net1"], &test_cmd);
    assert!(expect_code(&o, 0).contains("hello /data"));
    up.stop();
    for id in ["net1", "net2"] {
        f.add(
            id,
            FIX,
            PLAIN_TEST,
            serde_json::json!({"FAIL_TO_PASS": [], "PASS_TO_PASS": [], "test_cmd": test_cmd}),
        );
    }
    // net1 has a cassette (cassettes/net1), net2 none: its shim runs stay offline.
    let s = f.study(&["--k", "1", "--net-cassettes", "cassettes"]);
    let class = |id: &str| {
        s["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance_id"] == id)
            .unwrap_or_else(|| panic!("{id} not in {s}"))["class_shim"]
            .clone()
    };
    assert_eq!(class("net1"), "reproducible", "{s}");
    assert_ne!(class("net2"), "reproducible", "{s}");
}

/// `org.reprorun.net.record` with TLS (issue 47, `spec/oci.md`): an OCI container's curl
/// (the host's, bound at /usr) reaches the TLS upstream through the monitor's terminating
/// proxy, trusting the run's CA only through the bundle and variables the container gets;
/// then `net.replay` with the upstreams stopped prints the same bytes and nothing reaches
/// them. `net.upstream-ca` without `net.record` fails `create`, naming it.
#[test]
fn a_container_records_https_then_replays_it_offline() {
    require!(Need::Root, Need::Tool("curl"));
    let up = Upstreams::start();
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("test-ca.pem");
    std::fs::write(&ca, &up.ca_pem).unwrap();
    let tape = tmp.path().join("tape");
    let t = up.tls;
    let script = format!(
        "curl -sS https://api.test:{t}/count; echo \" rc=$?\"; \
         curl -sS -d q=1 https://api.test:{t}/echo; echo \" rc=$?\"; \
         curl -sS -N https://api.test:{t}/stream; echo \" rc=$?\""
    );
    let container = |annotations: &[(&str, String)]| {
        let b = crate::oci::Bundle::new(&["sh", "-c", &script], |c| {
            c["process"]["env"] = serde_json::json!(["PATH=/usr/bin:/bin"]);
            c["mounts"].as_array_mut().unwrap().push(serde_json::json!({
                "destination": "/usr", "type": "bind",
                "source": "/usr", "options": ["rbind", "ro"]
            }));
            for (k, v) in annotations {
                c["annotations"][format!("org.reprorun.net.{k}")] = v.clone().into();
            }
        });
        let rootfs = b.work.path().join("rootfs");
        for (link, to) in [("lib", "usr/lib"), ("lib64", "usr/lib64")] {
            std::os::unix::fs::symlink(to, rootfs.join(link)).unwrap();
        }
        b
    };
    let allow = ("allow", format!("api.test:{t}, 127.0.0.1:{t}"));
    let add_host = ("add-host", "api.test:127.0.0.1".to_string());
    let record = ("record", tape.to_str().unwrap().to_string());
    let upstream_ca = ("upstream-ca", ca.to_str().unwrap().to_string());
    let b = container(&[allow.clone(), add_host.clone(), record, upstream_ca.clone()]);
    let recorded = expect_code(&b.run(&["run", "rec"]), 0);
    let want = "count 1\n rc=0\necho q=1\n rc=0\ndata: event 0\n\ndata: event 1\n\ndata: event 2\n\n rc=0\n";
    assert_eq!(recorded, want);
    let index = tape.join("index.json");
    assert!(
        wait_until(Duration::from_secs(10), || index.exists()),
        "no {index:?}"
    );
    up.stop();
    let served = up.served.load(Ordering::SeqCst);
    assert_eq!(served, 3);
    let replay = ("replay", tape.to_str().unwrap().to_string());
    let b = container(&[allow.clone(), add_host.clone(), replay.clone()]);
    let replayed = expect_code(&b.run(&["run", "replay"]), 0);
    assert_eq!(replayed, recorded);
    assert_eq!(
        up.served.load(Ordering::SeqCst),
        served,
        "replay reached the upstream"
    );
    // The upstreams' CA verifies a recording's upstreams: alone it is refused.
    let b = container(&[allow, add_host, replay, upstream_ca]);
    expect_error(&b.run(&["run", "bad"]), "net.upstream-ca");
}
