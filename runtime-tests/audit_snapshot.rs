//! `reprorun audit filter` and `reprorun audit snapshot` on a git repository made by each
//! test with dated commits, and issues in gh's and REST's spellings.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use sha2::Digest;

use crate::common::*;

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

/// The repository `lab/model`, its commits by name, and the files around it.
struct Fixture {
    work: Work,
    commits: BTreeMap<&'static str, String>,
}

const ISSUE_URL_6: &str = "https://github.com/lab/model/issues/6";

impl Fixture {
    /// main: c1 - c2 - m4 (merges b3, PR #10) - c5 ("Fixes #4") - c6 - c7 (empty) - c8
    /// (NOTES.md names issue #6's URL).
    fn new() -> Fixture {
        let work = Work::new();
        let repo = work.path().join("model");
        std::fs::create_dir(&repo).unwrap();
        let mut commits = BTreeMap::new();
        let write = |name: &str, text: &str| {
            let p = repo.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        // A message starting "Merge pull request" merges the branch `fix`.
        let mut commit = |name: &'static str, date: &str, message: &str| {
            if message.starts_with("Merge pull request") {
                git(
                    &repo,
                    date,
                    &["merge", "-q", "--no-ff", "-m", message, "fix"],
                );
            } else {
                git(&repo, date, &["add", "-A"]);
                git(
                    &repo,
                    date,
                    &["commit", "-q", "--allow-empty", "-m", message],
                );
            }
            commits.insert(name, git(&repo, date, &["rev-parse", "HEAD"]));
        };
        git(&repo, "2023-01-01T00:00:00Z", &["init", "-q", "-b", "main"]);
        write("README.md", "# model\n");
        write("train.py", "import torch\nmodel.load_state_dict(ckpt)\n");
        write("scripts/run.sh", "#!/bin/sh\npython train.py\n");
        std::fs::set_permissions(
            repo.join("scripts/run.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("train.py", repo.join("latest.py")).unwrap();
        // A submodule, uninitialized: a gitlink and an empty directory.
        std::fs::create_dir_all(repo.join("third_party/lib")).unwrap();
        let sub = "1111111111111111111111111111111111111111";
        git(
            &repo,
            "2023-01-01T00:00:00Z",
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sub},third_party/lib"),
            ],
        );
        commit("c1", "2023-01-01T00:00:00Z", "initial");
        write("config.yaml", "lr: 0.1\n");
        commit("c2", "2023-02-01T00:00:00Z", "config");
        git(
            &repo,
            "2023-03-01T00:00:00Z",
            &["checkout", "-q", "-b", "fix"],
        );
        write(
            "train.py",
            "import torch\nmodel.load_state_dict(ckpt, strict=False)\n",
        );
        commit("b3", "2023-03-01T00:00:00Z", "load leniently");
        git(&repo, "2023-03-05T00:00:00Z", &["checkout", "-q", "main"]);
        commit(
            "m4",
            "2023-03-05T00:00:00Z",
            "Merge pull request #10 from u/fix",
        );
        write("requirements.txt", "torch==2.0\n");
        commit("c5", "2023-04-01T00:00:00Z", "Pin torch\n\nFixes #4");
        write("README.md", "# model\n\nRun scripts/run.sh.\n");
        commit("c6", "2023-05-01T00:00:00Z", "docs");
        commit("c7", "2023-05-10T00:00:00Z", "rerun CI");
        write("NOTES.md", &format!("Known problem: {ISSUE_URL_6}\n"));
        commit("c8", "2023-06-01T00:00:00Z", "notes");
        write("later.txt", "after collection\n");
        commit("c9", "2023-08-01T00:00:00Z", "after the collection");
        std::fs::write(
            work.path().join("paper.md"),
            "# The paper\n\nWe reach 76.5%.\n",
        )
        .unwrap();
        let f = Fixture { work, commits };
        f.pairs("model", &[]);
        f
    }

    fn c(&self, name: &str) -> &str {
        &self.commits[name]
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    /// `pairs.jsonl`: lab/model from `clone`, and extra rows.
    fn pairs(&self, clone: &str, extra: &[Value]) {
        let mut rows = vec![json!({
            "paper_id": "p1", "title": "A model", "repo": "lab/model", "clone": clone,
            "paper": "paper.md", "collected_at": "2023-07-01", "venue": "X", "year": 2023
        })];
        rows.extend(extra.iter().cloned());
        let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(self.path("pairs.jsonl"), text).unwrap();
    }

    /// The issues of lab/model, gh and REST spellings mixed, in `issues/lab__model.json`.
    fn issues(&self, extra: &[Value]) {
        let gh = |n: u64, state: &str, created: &str, title: &str| {
            json!({"number": n, "title": title, "body": "Traceback (most recent call last):\nRuntimeError: size mismatch",
                   "state": state, "stateReason": if state == "CLOSED" { "COMPLETED" } else { "" },
                   "createdAt": created, "closedAt": "0001-01-01T00:00:00Z", "labels": [], "comments": [],
                   "closedByPullRequestsReferences": [],
                   "url": format!("https://github.com/lab/model/issues/{n}")})
        };
        let rest = |n: u64, created: &str, title: &str| {
            json!({"url": format!("https://api.github.com/repos/lab/model/issues/{n}"),
                   "html_url": format!("https://github.com/lab/model/issues/{n}"),
                   "number": n, "title": title, "body": "Results lower than the paper.", "state": "closed",
                   "state_reason": "completed", "created_at": created, "closed_at": "2023-09-01T00:00:00Z",
                   "labels": [{"name": "bug"}], "comments": 2})
        };
        let mut pr = gh(3, "CLOSED", "2023-02-25T00:00:00Z", "strict loading fails");
        pr["closedByPullRequestsReferences"] = json!([{"number": 10, "url": "https://github.com/lab/model/pull/10", "mergeCommit": {"oid": self.c("m4")}}]);
        let mut event = rest(5, "2023-04-15T00:00:00Z", "docs unclear");
        event["timeline"] =
            json!([{"event": "labeled"}, {"event": "closed", "commit_id": self.c("c6")}]);
        let mut rows = vec![
            gh(1, "CLOSED", "2023-02-15T00:00:00Z", "crash one"),
            gh(2, "CLOSED", "2023-02-20T00:00:00Z", "crash two"),
            pr,
            rest(4, "2023-03-10T00:00:00Z", "torch version"),
            event,
            gh(6, "OPEN", "2023-05-25T00:00:00Z", "still broken"),
            rest(7, "2023-05-20T00:00:00Z", "after the empty commit"),
            json!({"url": "https://api.github.com/repos/lab/model/issues/11", "number": 11, "title": "a PR",
                   "state": "open", "created_at": "2023-02-02T00:00:00Z", "pull_request": {"url": "x"}}),
        ];
        rows.extend(extra.iter().cloned());
        let dir = self.path("issues");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("lab__model.json"), Value::Array(rows).to_string()).unwrap();
    }

    fn snapshot(&self, out: &str, extra: &[&str]) -> std::process::Output {
        let mut args = vec![
            "audit",
            "snapshot",
            "--pairs",
            "pairs.jsonl",
            "--issues",
            "issues",
            "--out",
            out,
        ];
        args.extend(extra);
        self.work.run(&args)
    }
}

fn grounding(manifest: &Value, number: u64) -> &Value {
    manifest["issues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["issue"]["number"] == number)
        .map(|i| &i["grounding"])
        .unwrap_or_else(|| panic!("issue #{number} not in the manifest"))
}

fn group<'a>(manifest: &'a Value, id: &str) -> &'a Value {
    manifest["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group_id"] == id)
        .unwrap_or_else(|| panic!("no group {id}"))
}

/// Every file of a directory, by relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

#[test]
fn snapshots_ground_each_issue_as_its_reporter_saw_the_repository() {
    let f = Fixture::new();
    f.issues(&[]);
    let out = f.snapshot("corpus", &["--json"]);
    let summary: Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    let m = read_json(&f.path("corpus/corpus.json"));
    let gid = |c: &str| format!("p1@{}", &f.c(c)[..12]);

    let open = grounding(&m, 6);
    assert_eq!(
        (open["target"].as_str(), open["rule"].as_str()),
        (Some("open"), Some("default_branch_at_collected_at"))
    );
    assert_eq!(
        open["commit"],
        f.c("c8"),
        "the head on 2023-07-01, not the later c9"
    );
    let silver = grounding(&m, 1);
    assert_eq!(
        (silver["target"].as_str(), silver["rule"].as_str()),
        (Some("closed_silver"), Some("before_created_at"))
    );
    assert_eq!(silver["commit"], f.c("c2"));
    let pr = grounding(&m, 3);
    assert_eq!(
        (pr["target"].as_str(), pr["rule"].as_str()),
        (Some("closed_gold"), Some("merged_pr"))
    );
    assert_eq!(
        (&pr["commit"], &pr["fix_commit"]),
        (&json!(f.c("c2")), &json!(f.c("m4")))
    );
    assert_eq!(pr["post_fix_group_id"], gid("m4"));
    let kw = grounding(&m, 4);
    assert_eq!(kw["rule"], "fixes_keyword");
    assert_eq!(
        (&kw["commit"], &kw["fix_commit"]),
        (&json!(f.c("m4")), &json!(f.c("c5")))
    );
    let ev = grounding(&m, 5);
    assert_eq!(ev["rule"], "closed_event_commit");
    assert_eq!(
        (&ev["commit"], &ev["fix_commit"]),
        (&json!(f.c("c5")), &json!(f.c("c6")))
    );
    assert!(
        m["issues"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["issue"]["number"] != 11),
        "PRs skipped"
    );

    // Groups: issues on one commit share one; the post-fix snapshots are groups too.
    assert_eq!(group(&m, &gid("c2"))["issues"], json!([1, 2, 3]));
    assert_eq!(group(&m, &gid("m4"))["post_fix_for"], json!([3]));
    assert_eq!(group(&m, &gid("m4"))["issues"], json!([4]));
    assert_eq!(group(&m, &gid("c6"))["post_fix_for"], json!([5]));
    assert_eq!(
        m["groups"].as_array().unwrap().len(),
        6,
        "c2 m4 c5 c6 c7 c8"
    );
    // c7 is an empty commit: its tree is c6's, stored once.
    assert_eq!(group(&m, &gid("c6"))["tree"], group(&m, &gid("c7"))["tree"]);
    let trees = std::fs::read_dir(f.path("corpus/trees")).unwrap().count();
    assert_eq!(trees, 5);
    assert_eq!(summary["trees"], 5);
    assert_eq!(summary["groups"], 6);
    assert_eq!(summary["issues"], 7);
    assert_eq!(summary["fingerprint"].as_str().unwrap().len(), 64);

    // The leak: c8's NOTES.md names issue #6's URL.
    let warnings = m["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = warnings[0].as_str().unwrap();
    assert!(
        w.contains("NOTES.md") && w.contains("lab/model#6") && w.contains(&gid("c8")),
        "{w}"
    );
    assert!(stderr(&out)
        .lines()
        .any(|l| l.contains("NOTES.md") && l.contains("lab/model#6")));
    assert!(
        stderr(&out).contains("1 pairs, 7 issues, 6 groups, 5 trees, 1 warnings"),
        "{}",
        stderr(&out)
    );

    // The tar: the tree without history, modes and links kept, extractable.
    let tree = group(&m, &gid("c8"))["tree"].as_str().unwrap().to_string();
    let tar_path = f.path(&format!("corpus/trees/{tree}.tar"));
    let mut names = Vec::new();
    let mut archive = tar::Archive::new(std::fs::File::open(&tar_path).unwrap());
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let mode = e.header().mode().unwrap();
        let kind = e.header().entry_type();
        if name == "scripts/run.sh" {
            assert_eq!(mode, 0o755);
        }
        if name == "README.md" {
            assert_eq!(mode, 0o644);
            let mut text = String::new();
            e.read_to_string(&mut text).unwrap();
            assert_eq!(text, "# model\n\nRun scripts/run.sh.\n");
        }
        if name == "latest.py" {
            assert_eq!(kind, tar::EntryType::Symlink);
            assert_eq!(e.link_name().unwrap().unwrap(), Path::new("train.py"));
        }
        names.push(name);
    }
    assert!(
        names.iter().all(|n| !n.split('/').any(|c| c == ".git")),
        "{names:?}"
    );
    assert!(!names.contains(&"later.txt".to_string()));
    for want in [
        "NOTES.md",
        "latest.py",
        "scripts/run.sh",
        "third_party/lib/",
        "config.yaml",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let sha = sha2::Sha256::digest(std::fs::read(&tar_path).unwrap());
    assert_eq!(
        tree,
        sha.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let dir = tempfile::tempdir().unwrap();
    tar::Archive::new(std::fs::File::open(&tar_path).unwrap())
        .unpack(dir.path())
        .unwrap();
    assert!(dir.path().join("third_party/lib").is_dir());
    assert!(!dir.path().join(".git").exists());
    let paper = m["pairs"][0]["paper"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(f.path(&format!("corpus/papers/{paper}"))).unwrap(),
        "# The paper\n\nWe reach 76.5%.\n"
    );
}

#[test]
fn snapshots_are_byte_identical_across_runs_and_from_a_bundle() {
    let f = Fixture::new();
    f.issues(&[]);
    expect_code(&f.snapshot("a", &[]), 0);
    expect_code(&f.snapshot("b", &[]), 0);
    let a = files(&f.path("a"));
    assert_eq!(a, files(&f.path("b")));
    // An earlier corpus is rebuilt in place, to the same bytes.
    expect_code(&f.snapshot("a", &[]), 0);
    assert_eq!(a, files(&f.path("a")));
    assert!(!f.path("a.partial").exists());

    git(
        &f.path("model"),
        "2023-01-01T00:00:00Z",
        &["bundle", "create", "-q", "../model.bundle", "--all"],
    );
    f.pairs("model.bundle", &[]);
    expect_code(&f.snapshot("c", &[]), 0);
    assert_eq!(a, files(&f.path("c")), "a bundle gives the same corpus");
}

#[test]
fn bad_input_is_one_line_naming_the_pair_or_issue_and_skip_bad_goes_on() {
    let f = Fixture::new();
    let missing_clone = json!({"paper_id": "p2", "repo": "lab/gone", "clone": "nowhere",
                               "paper": "paper.md", "collected_at": "2023-07-01"});
    f.pairs("model", &[missing_clone]);
    f.issues(&[]);
    expect_error(&f.snapshot("out", &[]), "pair p2: clone");
    assert!(!f.path("out").exists() && !f.path("out.partial").exists());

    f.pairs("model", &[]);
    let bad_date = json!({"number": 20, "title": "t", "state": "open", "created_at": "last week",
                          "html_url": "https://github.com/lab/model/issues/20"});
    f.issues(std::slice::from_ref(&bad_date));
    expect_error(&f.snapshot("out", &[]), "issue lab/model#20");

    let orphan = json!({"number": 1, "title": "t", "state": "open", "created_at": "2023-01-01T00:00:00Z",
                        "html_url": "https://github.com/other/repo/issues/1"});
    f.issues(std::slice::from_ref(&orphan));
    expect_error(&f.snapshot("out", &[]), "issue other/repo#1: no pair");

    let bad_fix = json!({"number": 21, "title": "t", "state": "closed", "created_at": "2023-05-01T00:00:00Z",
                         "html_url": "https://github.com/lab/model/issues/21", "fix_commit": "abcdef12"});
    f.issues(std::slice::from_ref(&bad_fix));
    expect_error(
        &f.snapshot("out", &[]),
        "issue lab/model#21: fix_commit abcdef12",
    );

    std::fs::write(f.path("not-a-corpus"), "x").unwrap();
    f.issues(&[]);
    expect_error(&f.snapshot("not-a-corpus", &[]), "not a corpus");

    // --skip-bad: each in the warnings, the rest built.
    f.pairs(
        "model",
        &[
            json!({"paper_id": "p2", "repo": "lab/gone", "clone": "nowhere",
                               "paper": "paper.md", "collected_at": "2023-07-01"}),
        ],
    );
    f.issues(&[bad_date, orphan, bad_fix]);
    let out = f.snapshot("out", &["--skip-bad"]);
    expect_code(&out, 0);
    let m = read_json(&f.path("out/corpus.json"));
    let warnings: Vec<&str> = m["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    for needle in ["pair p2", "lab/model#20", "other/repo#1", "lab/model#21"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("skipped: ") && w.contains(needle)),
            "{needle}: {warnings:?}"
        );
        assert!(stderr(&out).contains(needle), "{needle} on stderr");
    }
    assert_eq!(m["pairs"].as_array().unwrap().len(), 1);
    assert_eq!(m["issues"].as_array().unwrap().len(), 7);
}

#[test]
fn a_clone_missing_file_contents_stops_one_group_not_the_corpus() {
    let f = Fixture::new();
    f.issues(&[]);
    // A partial clone: the contents of NOTES.md (only in c8, open issue #6's snapshot) gone.
    let repo = f.path("model");
    let spec = format!("{}:NOTES.md", f.c("c8"));
    let blob = git(&repo, "2023-01-01T00:00:00Z", &["rev-parse", &spec]);
    std::fs::remove_file(repo.join(".git/objects").join(&blob[..2]).join(&blob[2..])).unwrap();
    let group = format!("p1@{}", &f.c("c8")[..12]);
    expect_error(&f.snapshot("out", &[]), &group);
    let out = f.snapshot("out", &["--skip-bad"]);
    expect_code(&out, 0);
    let m = read_json(&f.path("out/corpus.json"));
    let line = format!("{group}: write its tree");
    assert!(stderr(&out).contains(&line), "{}", stderr(&out));
    assert!(
        m["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("left out with its issues [#6]")),
        "{m}"
    );
    let numbers: Vec<u64> = m["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["issue"]["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers.len(), 6, "{numbers:?}");
    assert!(!numbers.contains(&6));
    assert!(m["groups"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["commit"] != f.c("c8")));
}

#[test]
fn the_pre_fix_snapshot_is_a_choice_and_recorded() {
    let f = Fixture::new();
    let late_fix = json!({"number": 12, "title": "lower accuracy", "state": "closed",
                          "created_at": "2023-02-10T00:00:00Z", "closed_at": "2023-05-02T00:00:00Z",
                          "html_url": "https://github.com/lab/model/issues/12", "fix_commit": f.c("c6")});
    f.issues(&[late_fix]);
    expect_code(&f.snapshot("fixparent", &[]), 0);
    let m = read_json(&f.path("fixparent/corpus.json"));
    let g = grounding(&m, 12);
    assert_eq!(g["commit"], f.c("c5"), "{g}");
    assert_eq!(g["pre_fix"], "fix_parent", "{g}");
    expect_code(&f.snapshot("issuetime", &["--pre-fix", "issue-time"]), 0);
    let m = read_json(&f.path("issuetime/corpus.json"));
    let g = grounding(&m, 12);
    assert_eq!(
        g["commit"],
        f.c("c2"),
        "the reporter's view, not the fix's parent: {g}"
    );
    assert_eq!(g["pre_fix"], "issue_time", "{g}");
    assert_eq!(g["fix_commit"], f.c("c6"), "{g}");
    let o = f.snapshot("x", &["--pre-fix", "later"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("possible values: fix-parent, issue-time"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_issue_its_own_snapshot_names_is_kept_or_dropped_and_said() {
    let f = Fixture::new();
    f.issues(&[]);
    // NOTES.md at c8 (open issue #6's snapshot) holds #6's URL.
    let out = f.snapshot("kept", &[]);
    expect_code(&out, 0);
    assert!(
        stderr(&out).contains("1 issue(s) named outright by their own snapshot")
            && stderr(&out).contains("kept, as grounding.named_in"),
        "{}",
        stderr(&out)
    );
    let m = read_json(&f.path("kept/corpus.json"));
    assert_eq!(grounding(&m, 6)["named_in"], "NOTES.md");
    assert!(grounding(&m, 4).get("named_in").is_none());
    let out = f.snapshot("dropped", &["--leaked", "drop"]);
    expect_code(&out, 0);
    let m = read_json(&f.path("dropped/corpus.json"));
    assert!(m["issues"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["issue"]["number"] != 6));
    assert!(
        m["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("left out: issue lab/model#6")),
        "{m}"
    );
    assert!(m["groups"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| !g["issues"].as_array().unwrap().contains(&6.into())));
}

#[test]
fn only_reproducibility_keeps_the_relevant_issues() {
    let f = Fixture::new();
    let question = json!({"number": 30, "title": "Will you release the weights?", "body": "Do you plan to release the checkpoints?",
                          "state": "open", "created_at": "2023-05-01T00:00:00Z",
                          "html_url": "https://github.com/lab/model/issues/30"});
    let labelled = json!({"number": 31, "title": "Will you release the weights?", "body": "",
                          "state": "open", "created_at": "2023-05-01T00:00:00Z", "reproducibility": true,
                          "category": "silent_wrong_setup", "html_url": "https://github.com/lab/model/issues/31"});
    f.issues(&[question, labelled]);
    expect_code(&f.snapshot("out", &["--only-reproducibility"]), 0);
    let m = read_json(&f.path("out/corpus.json"));
    let numbers: Vec<u64> = m["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["issue"]["number"].as_u64().unwrap())
        .collect();
    assert!(
        !numbers.contains(&30) && numbers.contains(&31),
        "{numbers:?}"
    );
    assert_eq!(numbers.len(), 8);
}

#[test]
fn filter_labels_issues_end_to_end() {
    let work = Work::new();
    let rows = [
        json!({"repo": "lab/model", "number": 1, "title": "ImportError", "state": "open",
               "body": "Traceback (most recent call last):\nModuleNotFoundError: No module named 'apex'",
               "created_at": "2023-01-01T00:00:00Z"}),
        json!({"repo": "lab/model", "number": 2, "title": "Feature request: TPU support", "state": "open",
               "body": "Would it be possible to add support for TPUs?", "created_at": "2023-01-02T00:00:00Z"}),
        json!({"repo": "lab/model", "number": 3, "title": "anything", "state": "closed", "stateReason": "COMPLETED",
               "body": "", "createdAt": "2023-01-03T00:00:00Z", "reproducibility": true, "category": "crash_late"}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(work.path().join("issues.jsonl"), text).unwrap();
    let out = work.run(&["audit", "filter", "--issues", "issues.jsonl"]);
    let lines: Vec<Value> = expect_code(&out, 0)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        (
            &lines[0]["reproducibility"],
            &lines[0]["category"],
            &lines[0]["label_source"]
        ),
        (&json!(true), &json!("crash_immediate"), &json!("rules"))
    );
    assert_eq!(
        (&lines[1]["reproducibility"], &lines[1]["label_source"]),
        (&json!(false), &json!("rules"))
    );
    assert_eq!(
        (&lines[2]["category"], &lines[2]["label_source"]),
        (&json!("crash_late"), &json!("input"))
    );
    assert_eq!(lines[2]["state"], "closed");

    let out = work.run(&[
        "audit",
        "filter",
        "--issues",
        "issues.jsonl",
        "--out",
        "labelled.jsonl",
        "--judge-cmd",
        r#"echo '{"reproducibility": true, "category": "silent_wrong_number"}'"#,
    ]);
    expect_code(&out, 0);
    let text = std::fs::read_to_string(work.path().join("labelled.jsonl")).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&first["category"], &first["label_source"]),
        (&json!("silent_wrong_number"), &json!("judge"))
    );

    std::fs::write(
        work.path().join("bad.jsonl"),
        r#"{"repo": "lab/model", "number": 9, "state": "open", "created_at": "soon"}"#,
    )
    .unwrap();
    expect_error(
        &work.run(&["audit", "filter", "--issues", "bad.jsonl"]),
        "issue lab/model#9",
    );
    expect_error(
        &work.run(&[
            "audit",
            "filter",
            "--issues",
            "issues.jsonl",
            "--judge-cmd",
            "exit 3",
        ]),
        "--judge-cmd on issue lab/model#1",
    );
}
