//! `reprorun audit collect` against a fake GitHub REST API served by the test on loopback
//! (paginated issues with pull requests mixed in, timelines, ETags answering 304, a spent
//! primary rate limit, a 403 secondary limit with Retry-After, a repository that 404s), and
//! clones from local bare repositories (`--clone-base`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::common::*;

const TOKEN: &str = "ghp_t0kenThatMustNeverBeWritten42";

/// One request as the fake API saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    if_none_match: bool,
    auth: Option<String>,
    /// 0: the connection was closed without an answer.
    status: u16,
}

#[derive(Default)]
struct State {
    routes: BTreeMap<String, (u16, Value)>,
    /// Raw bodies (papers).
    files: BTreeMap<String, Vec<u8>>,
    seen: Vec<Seen>,
    /// Requests that broke a limit the server had announced.
    violations: Vec<String>,
    /// Answer this path once with `X-RateLimit-Remaining: 0`, the reset 2 s ahead.
    spend_budget_on: Option<String>,
    reset_at: Option<u64>,
    /// Answer this path once with a 403 secondary limit, `Retry-After: 1`.
    secondary_on: Option<String>,
    retry_not_before: Option<Instant>,
    /// Hold this path until `release` is set, then close without an answer.
    hold: Option<String>,
    release: bool,
}

type Shared = Arc<Mutex<State>>;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn etag(body: &[u8]) -> String {
    format!("W/\"{}\"", &sha256_hex(body)[..16])
}

fn answer(stream: &mut TcpStream, status: u16, headers: &[(String, String)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

fn handle(state: &Shared, mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.insert(n.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut s = state.lock().unwrap();
    if s.reset_at.is_some_and(|r| unix_now() < r) {
        s.violations
            .push(format!("{path} before the rate limit's reset"));
    }
    if s.retry_not_before.is_some_and(|t| Instant::now() < t) {
        s.violations.push(format!("{path} before Retry-After"));
    }
    let mut seen = Seen {
        path: path.clone(),
        if_none_match: headers.contains_key("if-none-match"),
        auth: headers.get("authorization").cloned(),
        status: 0,
    };
    if s.hold.as_deref() == Some(path.as_str()) {
        s.hold = None;
        s.seen.push(seen);
        drop(s);
        while !state.lock().unwrap().release {
            std::thread::sleep(Duration::from_millis(20));
        }
        return;
    }
    let mut extra = vec![
        ("X-RateLimit-Remaining".to_string(), "4000".to_string()),
        (
            "X-RateLimit-Reset".to_string(),
            (unix_now() + 3600).to_string(),
        ),
    ];
    let (status, body) = if s.secondary_on.as_deref() == Some(path.as_str()) {
        s.secondary_on = None;
        s.retry_not_before = Some(Instant::now() + Duration::from_secs(1));
        extra.push(("Retry-After".into(), "1".into()));
        let body = json!({"message": "You have exceeded a secondary rate limit."});
        (403, body.to_string().into_bytes())
    } else if let Some(bytes) = s.files.get(&path) {
        (200, bytes.clone())
    } else {
        let (status, body) = s
            .routes
            .get(&path)
            .cloned()
            .unwrap_or((404, json!({"message": "Not Found"})));
        (status, body.to_string().into_bytes())
    };
    if s.spend_budget_on.as_deref() == Some(path.as_str()) {
        s.spend_budget_on = None;
        let reset = unix_now() + 2;
        s.reset_at = Some(reset);
        extra[0].1 = "0".into();
        extra[1].1 = reset.to_string();
    }
    let tag = etag(&body);
    let (status, body) = match headers.get("if-none-match") {
        Some(t) if status == 200 && *t == tag => (304, Vec::new()),
        _ => (status, body),
    };
    if status == 200 {
        extra.push(("ETag".into(), tag));
    }
    if let Some(next) = next_page(&s, &path) {
        extra.push(("Link".into(), format!("<{next}>; rel=\"next\"")));
    }
    seen.status = status;
    s.seen.push(seen);
    drop(s);
    answer(&mut stream, status, &extra, &body);
}

/// The next page of a paginated route: `PATH&page=N+1` when that is a route.
fn next_page(s: &State, path: &str) -> Option<String> {
    let base = s.routes.get("base")?.1.as_str()?.to_string();
    let (stem, page) = match path.rsplit_once("&page=") {
        Some((stem, n)) => (stem, n.parse::<u32>().ok()?),
        None => (path, 1),
    };
    let next = format!("{stem}&page={}", page + 1);
    s.routes
        .contains_key(&next)
        .then(|| format!("{base}{next}"))
}

fn serve(state: Shared) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    state
        .lock()
        .unwrap()
        .routes
        .insert("base".into(), (200, json!(base)));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let state = state.clone();
            std::thread::spawn(move || handle(&state, stream));
        }
    });
    base
}

fn git(dir: &Path, date: &str, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    stdout(&out).trim().to_string()
}

/// The fixture: `gh/lab/model.git` (c1, c2 fixes #3, m3 merges PR #5 for #4), the API's
/// routes, a papers file, a fake `pdftotext` on PATH.
struct Fixture {
    work: Work,
    state: Shared,
    base: String,
    fix3: String,
    merge5: String,
}

fn issue(base: &str, n: u64, state: &str, created: &str, comments: u64) -> Value {
    let mut v = json!({
        "number": n, "title": format!("issue {n}"), "body": format!("Traceback for {n}"),
        "state": state, "created_at": created, "comments": comments,
        "html_url": format!("https://github.com/lab/model/issues/{n}"),
        "url": format!("{base}/repos/lab/model/issues/{n}"),
        "labels": [{"name": "bug"}],
    });
    if state == "closed" {
        v["closed_at"] = json!("2024-01-08T00:00:00Z");
    }
    v
}

impl Fixture {
    fn new() -> Fixture {
        let work = Work::new();
        let src = work.path().join("src");
        std::fs::create_dir(&src).unwrap();
        git(&src, "2024-01-01T00:00:00Z", &["init", "-q", "-b", "main"]);
        std::fs::write(src.join("train.py"), "import torch\n").unwrap();
        git(&src, "2024-01-01T00:00:00Z", &["add", "-A"]);
        git(&src, "2024-01-01T00:00:00Z", &["commit", "-qm", "c1"]);
        std::fs::write(src.join("train.py"), "import torch\nfixed = 3\n").unwrap();
        git(&src, "2024-01-05T00:00:00Z", &["commit", "-qam", "c2"]);
        let fix3 = git(&src, "2024-01-05T00:00:00Z", &["rev-parse", "HEAD"]);
        git(&src, "2024-01-06T00:00:00Z", &["checkout", "-qb", "fix"]);
        std::fs::write(src.join("eval.py"), "print(1)\n").unwrap();
        git(&src, "2024-01-06T00:00:00Z", &["add", "-A"]);
        git(&src, "2024-01-06T00:00:00Z", &["commit", "-qm", "eval"]);
        git(&src, "2024-01-07T00:00:00Z", &["checkout", "-q", "main"]);
        git(
            &src,
            "2024-01-07T00:00:00Z",
            &[
                "merge",
                "-q",
                "--no-ff",
                "-m",
                "Merge pull request #5 from x/fix",
                "fix",
            ],
        );
        let merge5 = git(&src, "2024-01-07T00:00:00Z", &["rev-parse", "HEAD"]);
        std::fs::create_dir_all(work.path().join("gh/lab")).unwrap();
        git(
            work.path(),
            "2024-01-07T00:00:00Z",
            &["clone", "-q", "--bare", "src", "gh/lab/model.git"],
        );
        let state: Shared = Arc::default();
        let base = serve(state.clone());
        let f = Fixture {
            work,
            state,
            base,
            fix3,
            merge5,
        };
        f.routes();
        f.write_inputs();
        f
    }

    fn routes(&self) {
        let b = &self.base;
        let list = "/repos/lab/model/issues?state=all&per_page=100";
        let mut pr = issue(b, 2, "open", "2024-01-02T00:00:00Z", 0);
        pr["pull_request"] = json!({"url": "x"});
        let commented = json!({"event": "commented", "user": {"login": "ann"},
            "body": "same for me", "created_at": "2024-01-03T00:00:00Z"});
        let big: Vec<Value> = (1..=5)
            .map(|n| issue(b, n, "open", "2024-01-02T00:00:00Z", 0))
            .collect();
        let routes = [
            (
                "/repos/lab/model".to_string(),
                json!({"full_name": "lab/model", "default_branch": "main"}),
            ),
            (
                "/repos/lab/big".into(),
                json!({"full_name": "lab/big", "default_branch": "main"}),
            ),
            (
                "/repos/lab/big/issues?state=all&per_page=100".into(),
                json!(big),
            ),
            (
                list.into(),
                json!([issue(b, 1, "open", "2024-01-02T00:00:00Z", 1), pr]),
            ),
            (
                format!("{list}&page=2"),
                json!([
                    issue(b, 3, "closed", "2024-01-04T00:00:00Z", 0),
                    issue(b, 4, "closed", "2024-01-04T00:00:00Z", 0),
                ]),
            ),
            (
                format!("{list}&page=3"),
                json!([issue(b, 6, "open", "2024-01-04T00:00:00Z", 0)]),
            ),
            (
                "/repos/lab/model/issues/1/timeline?per_page=100".into(),
                json!([commented]),
            ),
            (
                "/repos/lab/model/issues/3/timeline?per_page=100".into(),
                json!([
                    {"event": "referenced", "commit_id": self.fix3},
                    {"event": "closed", "commit_id": self.fix3},
                ]),
            ),
            (
                "/repos/lab/model/issues/4/timeline?per_page=100".into(),
                json!([
                    {"event": "cross-referenced", "source": {"type": "issue", "issue": {
                        "number": 5, "pull_request": {"merged_at": "2024-01-07T00:00:00Z"},
                        "repository": {"full_name": "lab/model"}}}},
                    {"event": "closed", "commit_id": null},
                ]),
            ),
            (
                "/repos/lab/model/pulls/5".into(),
                json!({"number": 5, "merged": true, "merge_commit_sha": self.merge5}),
            ),
        ];
        let mut s = self.state.lock().unwrap();
        for (path, body) in routes {
            s.routes.insert(path, (200, body));
        }
        s.routes.insert(
            "/repos/lab/quiet".into(),
            (
                200,
                json!({"full_name": "lab/quiet", "default_branch": "main"}),
            ),
        );
        s.routes.insert(
            "/repos/lab/quiet/issues?state=all&per_page=100".into(),
            (410, json!({"message": "Issues are disabled for this repo"})),
        );
        s.files.insert(
            "/papers/model.pdf".into(),
            b"%PDF-1.4 the model paper".to_vec(),
        );
        s.spend_budget_on = Some(format!("{list}&page=2"));
        s.secondary_on = Some("/repos/lab/model/issues/3/timeline?per_page=100".into());
    }

    fn write_inputs(&self) {
        let b = &self.base;
        let papers = [
            json!({"paper_id": "p1", "title": "Model", "venue": "NeurIPS", "year": 2024,
                   "repo_url": "https://github.com/lab/model/tree/main/src",
                   "paper_url": format!("{b}/papers/model.pdf")}),
            json!({"paper_id": "p2", "repo_url": "https://github.com/lab/gone", "paper_url": "x"}),
            json!({"paper_id": "p3", "repo_url": "https://gitlab.com/lab/model", "paper_url": "x"}),
            json!({"paper_id": "p4", "repo_url": "github.com/lab/big.git",
                   "paper_path": "local/big.md"}),
            json!({"paper_id": "p5", "repo_url": "github.com/lab/quiet", "paper_path": "local/big.md"}),
        ];
        let text: String = papers.iter().map(|p| format!("{p}\n")).collect();
        std::fs::create_dir(self.work.path().join("local")).unwrap();
        std::fs::write(self.work.path().join("local/big.md"), "# Big\n").unwrap();
        std::fs::write(self.work.path().join("papers.jsonl"), text).unwrap();
        let bin = self.work.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("pdftotext");
        std::fs::write(
            &tool,
            "#!/bin/sh\n# pdftotext -enc UTF-8 PDF TXT\necho \"text of $3\" > \"$4\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }

    fn cmd(&self, out: &str) -> Command {
        self.cmd_with(out, &["--max-issues", "4"])
    }

    fn cmd_with(&self, out: &str, extra: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            self.work.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let clone_base = self.work.path().join("gh");
        let mut c = self.work.cmd(&[
            "audit",
            "collect",
            "--papers",
            "papers.jsonl",
            "--out",
            out,
            "--token-env",
            "TEST_GH_TOKEN",
            "--api",
            &self.base,
            "--json",
        ]);
        c.args(extra);
        c.arg("--clone-base")
            .arg(clone_base)
            .env("TEST_GH_TOKEN", TOKEN)
            .env("PATH", path)
            .env("REPRORUN_PROGRESS", "lines")
            .stdin(Stdio::null());
        c
    }

    fn seen(&self) -> Vec<Seen> {
        std::mem::take(&mut self.state.lock().unwrap().seen)
    }
}

/// Every file under `dir`, recursively.
fn all_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

fn assert_no_token(dir: &Path, logs: &[&str]) {
    for f in all_files(dir) {
        let bytes = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(TOKEN), "the token is in {}", f.display());
    }
    for log in logs {
        assert!(!log.contains(TOKEN), "the token is in the output: {log}");
    }
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn by_number(issues: &[Value], n: u64) -> &Value {
    issues
        .iter()
        .find(|i| i["number"] == n)
        .unwrap_or_else(|| panic!("no issue #{n}"))
}

#[test]
fn collect_writes_snapshot_input_politely_and_a_rerun_is_conditional() {
    let f = Fixture::new();
    let first = f.cmd("src-out").output().unwrap();
    let summary: Value = serde_json::from_str(&expect_code(&first, 0)).unwrap();
    let log1 = f.seen();
    let out = f.work.path().join("src-out");

    // The written files.
    let pairs = jsonl(&out.join("pairs.jsonl"));
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    let p = &pairs[0];
    assert_eq!(
        (&p["paper_id"], &p["repo"]),
        (&json!("p1"), &json!("lab/model"))
    );
    assert_eq!(
        (&p["clone"], &p["default_branch"]),
        (&json!("repos/lab__model.git"), &json!("main"))
    );
    let paper = p["paper"].as_str().unwrap();
    assert!(
        paper.starts_with("papers/") && paper.ends_with(".txt"),
        "{paper}"
    );
    let pdf = p["paper_pdf"].as_str().unwrap();
    assert_eq!(
        std::fs::read(out.join(pdf)).unwrap(),
        b"%PDF-1.4 the model paper",
        "the PDF stored under its sha256"
    );
    assert_eq!(
        pdf,
        format!("papers/{}.pdf", sha256_hex(b"%PDF-1.4 the model paper"))
    );
    assert!(std::fs::read_to_string(out.join(paper))
        .unwrap()
        .starts_with("text of "));
    let skipped: BTreeMap<String, String> = jsonl(&out.join("skipped.jsonl"))
        .iter()
        .map(|s| {
            (
                s["paper_id"].as_str().unwrap().to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(skipped["p2"], "repository not found (HTTP 404)");
    assert_eq!(skipped["p3"], "not a GitHub repository (gitlab.com)");
    assert_eq!(skipped["p4"], "5 issues, more than --max-issues 4");
    assert_eq!(skipped["p5"], "issues not found or disabled (HTTP 404/410)");
    assert_eq!(summary["failed"], 0);

    let names: Vec<String> = std::fs::read_dir(out.join("issues"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["lab__model.jsonl"]);
    let issues = jsonl(&out.join("issues/lab__model.jsonl"));
    let numbers: Vec<u64> = issues
        .iter()
        .map(|i| i["number"].as_u64().unwrap())
        .collect();
    assert_eq!(
        numbers,
        [1, 3, 4, 6],
        "all pages followed, the pull request left out"
    );
    assert_eq!(by_number(&issues, 1)["comments"][0]["author"], "ann");
    assert_eq!(by_number(&issues, 1)["comments"][0]["body"], "same for me");
    assert_eq!(
        by_number(&issues, 3)["timeline_commits"][1],
        json!({"event": "closed", "commit": f.fix3})
    );
    assert_eq!(
        by_number(&issues, 4)["closing_prs"],
        json!([{"number": 5, "merge_commit": f.merge5, "merged": true}])
    );

    // Polite: the token sent to the API only, the limits kept, the secondary limit retried.
    let violations = f.state.lock().unwrap().violations.clone();
    assert!(violations.is_empty(), "{violations:?}");
    let bearer = format!("Bearer {TOKEN}");
    for s in &log1 {
        let want = (!s.path.starts_with("/papers/")).then_some(bearer.as_str());
        assert_eq!(s.auth.as_deref(), want, "{}", s.path);
    }
    let timeline3: Vec<u16> = log1
        .iter()
        .filter(|s| s.path.contains("/issues/3/timeline"))
        .map(|s| s.status)
        .collect();
    assert_eq!(timeline3, [403, 200]);
    assert!(
        !log1.iter().any(|s| s.path.contains("/issues/6/timeline")),
        "an open issue without comments needs no timeline"
    );
    assert!(
        summary["requests"]["retries"].as_u64().unwrap() >= 2,
        "{summary}"
    );
    assert_no_token(&out, &[&stdout(&first), &stderr(&first)]);

    // A second run: only conditional requests, each answered 304; the paper not fetched again.
    let second = f.cmd("src-out").output().unwrap();
    expect_code(&second, 0);
    let log2 = f.seen();
    assert!(!log2.is_empty());
    for s in &log2 {
        assert!(
            !s.path.starts_with("/papers/"),
            "the paper downloaded twice"
        );
        if s.path == "/repos/lab/gone" || s.path.starts_with("/repos/lab/quiet/") {
            continue; // a 404 or 410 has no ETag
        }
        assert!(s.if_none_match && s.status == 304, "{s:?}");
    }
    assert_eq!(jsonl(&out.join("issues/lab__model.jsonl")), issues);
    assert_no_token(&out, &[&stdout(&second), &stderr(&second)]);

    // It feeds `audit snapshot`.
    let snap = f.work.run(&[
        "audit",
        "snapshot",
        "--pairs",
        "src-out/pairs.jsonl",
        "--issues",
        "src-out/issues",
        "--out",
        "corpus",
    ]);
    expect_code(&snap, 0);
    let m = read_json(&f.work.path().join("corpus/corpus.json"));
    let grounding = |n: u64| {
        m["issues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["issue"]["number"] == n)
            .map(|i| i["grounding"].clone())
            .unwrap_or_else(|| panic!("issue #{n} not in the corpus"))
    };
    assert_eq!(grounding(3)["rule"], "closed_event_commit");
    assert_eq!(grounding(3)["fix_commit"], json!(f.fix3));
    assert_eq!(grounding(4)["rule"], "merged_pr");
    assert_eq!(grounding(4)["fix_commit"], json!(f.merge5));
    assert_eq!(grounding(1)["target"], "open");
}

#[test]
fn collect_killed_midway_resumes_without_refetching() {
    let f = Fixture::new();
    f.state.lock().unwrap().hold = Some("/repos/lab/model/issues/4/timeline?per_page=100".into());
    let mut child = f
        .cmd("out")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let held = wait_until(Duration::from_secs(60), || {
        f.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .any(|s| s.path.contains("/issues/4/timeline"))
    });
    assert!(held, "the held request never came");
    // Mid-flight, no process carries the token on its command line.
    for line in host_cmdlines() {
        assert!(
            !line.contains(TOKEN),
            "the token is on a command line: {line}"
        );
    }
    child.kill().unwrap(); // SIGKILL
    let killed = child.wait_with_output().unwrap();
    f.state.lock().unwrap().release = true;
    let log1 = f.seen();
    let fetched: Vec<&str> = log1
        .iter()
        .filter(|s| s.status == 200)
        .map(|s| s.path.as_str())
        .collect();
    assert!(fetched.len() >= 4, "{log1:?}");

    let again = f.cmd("out").output().unwrap();
    expect_code(&again, 0);
    let log2 = f.seen();
    for s in log2.iter().filter(|s| fetched.contains(&s.path.as_str())) {
        assert!(
            s.if_none_match && s.status == 304,
            "fetched again after the kill: {s:?}"
        );
    }
    assert!(
        log2.iter()
            .any(|s| s.path.contains("/issues/4/timeline") && s.status == 200),
        "the held request made on the re-run"
    );
    let out = f.work.path().join("out");
    let issues = jsonl(&out.join("issues/lab__model.jsonl"));
    assert_eq!(issues.len(), 4);
    assert_eq!(
        by_number(&issues, 4)["closing_prs"][0]["merge_commit"],
        json!(f.merge5)
    );
    let pairs = jsonl(&out.join("pairs.jsonl"));
    assert_eq!(pairs.len(), 1);

    assert_no_token(&out, &[&stderr(&killed), &stderr(&again), &stdout(&again)]);
}

#[test]
fn collect_bad_input_is_one_line() {
    let f = Fixture::new();
    let mut c = f.cmd("out");
    c.env_remove("TEST_GH_TOKEN");
    expect_error(
        &c.output().unwrap(),
        "--token-env TEST_GH_TOKEN: the variable is not set",
    );
    std::fs::write(
        f.work.path().join("papers.jsonl"),
        "{\"repo_url\": \"github.com/a/b\"}\n",
    )
    .unwrap();
    expect_error(
        &f.cmd("out").output().unwrap(),
        "papers.jsonl:1: no \"paper_id\" string",
    );
    let bad_since = f.work.run(&[
        "audit",
        "collect",
        "--papers",
        "papers.jsonl",
        "--out",
        "o",
        "--since",
        "yesterday",
    ]);
    expect_error(&bad_since, "--since \"yesterday\"");
}

#[test]
fn collect_a_failed_clone_fails_the_run_and_a_rerun_retries_it() {
    let f = Fixture::new();
    // Without --max-issues lab/big is collected, but gh/lab/big.git does not exist.
    let mut c = f.cmd_with("out", &[]);
    c.env_remove("REPRORUN_PROGRESS");
    let first = c.output().unwrap();
    expect_error(&first, "1 of 5 papers failed");
    let out = f.work.path().join("out");
    let skipped = jsonl(&out.join("skipped.jsonl"));
    let big = skipped.iter().find(|s| s["paper_id"] == "p4").unwrap();
    let reason = big["reason"].as_str().unwrap();
    assert!(reason.starts_with("failed: clone lab/big: "), "{reason}");
    // What did work is written, and only that: snapshot reads it as it is.
    assert_eq!(jsonl(&out.join("pairs.jsonl")).len(), 1);
    assert!(!out.join("issues/lab__big.jsonl").exists());
    f.seen();
    git(
        f.work.path(),
        "2024-01-07T00:00:00Z",
        &["clone", "-q", "--bare", "src", "gh/lab/big.git"],
    );
    let again = f.cmd_with("out", &[]).output().unwrap();
    expect_code(&again, 0);
    let pairs = jsonl(&out.join("pairs.jsonl"));
    let repos: Vec<&str> = pairs.iter().map(|p| p["repo"].as_str().unwrap()).collect();
    assert_eq!(repos, ["lab/model", "lab/big"]);
    assert_eq!(jsonl(&out.join("issues/lab__big.jsonl")).len(), 5);
    assert_eq!(
        pairs[1]["paper"],
        format!("papers/{}.md", sha256_hex(b"# Big\n"))
    );
    assert_eq!(
        std::fs::read(out.join(pairs[1]["paper"].as_str().unwrap())).unwrap(),
        b"# Big\n"
    );
    let refetched: Vec<Seen> = f.seen().into_iter().filter(|s| s.status == 200).collect();
    assert!(
        refetched.is_empty(),
        "the API was asked again: {refetched:?}"
    );

    // A later run killed after p1 and before it reaches p4 leaves p4's pair as it was.
    f.state.lock().unwrap().hold = Some("/repos/lab/big".into());
    let mut third = f
        .cmd_with("out", &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = wait_until(Duration::from_secs(60), || {
        f.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .any(|s| s.path == "/repos/lab/big")
    });
    assert!(held, "the held request never came");
    third.kill().unwrap();
    third.wait().unwrap();
    f.state.lock().unwrap().release = true;
    let after = jsonl(&out.join("pairs.jsonl"));
    let ids: Vec<&str> = after
        .iter()
        .map(|p| p["paper_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p1", "p4"]);
    assert_eq!(after[1], pairs[1], "p4's pair as the earlier run wrote it");
    assert!(out.join("issues/lab__big.jsonl").is_file());
}
