use std::io::Read;

use super::leak::Scanner;
use super::select::{
    before, ground, head_at, mentions_fix, merges_pr, names_issue, Commit, History, PreFix,
};
use super::tar::{parse_ls_tree, write_tar, Entry, Hashing, Kind, MTIME};
use crate::input::{ClosingPr, EventCommit, Issue};

fn commit(id: &str, parent: Option<&str>, time: i64, message: &str) -> Commit {
    Commit {
        id: id.into(),
        parents: parent.into_iter().map(str::to_string).collect(),
        time,
        message: message.into(),
    }
}

fn issue(number: u64, state: &str, created: &str) -> Issue {
    Issue {
        repo: "lab/model".into(),
        number,
        title: "size mismatch when loading".into(),
        body: String::new(),
        state: state.into(),
        state_reason: None,
        created_at: created.into(),
        closed_at: None,
        labels: Vec::new(),
        comments: Vec::new(),
        url: format!("https://github.com/lab/model/issues/{number}"),
        closing_prs: Vec::new(),
        timeline_commits: Vec::new(),
        reproducibility: None,
        category: None,
        fix_commit: None,
        label_source: None,
    }
}

/// main: c1(100) - c2(200) - m4(400, merges PR #9 whose commit is b3(300)) - c5(500).
fn repo() -> (Vec<Commit>, Vec<Commit>) {
    let first_parent = vec![
        commit("c5", Some("m4"), 500, "docs"),
        commit(
            "m4",
            Some("c2"),
            400,
            "Merge pull request #9 from u/fix\n\nfix loading",
        ),
        commit("c2", Some("c1"), 200, "train script"),
        commit("c1", None, 100, "initial"),
    ];
    let mut all = first_parent.clone();
    all.insert(2, commit("b3", Some("c2"), 300, "Fixes #7: strict=False"));
    all[1].parents.push("b3".into());
    (first_parent, all)
}

fn with_history<T>(f: impl FnOnce(&History) -> T) -> T {
    let (fp, all) = repo();
    let known = all.clone();
    let resolve = move |id: &str| {
        known
            .iter()
            .find(|c| c.id.starts_with(id))
            .map(|c| (c.id.clone(), c.parents.first().cloned()))
    };
    f(&History {
        first_parent: &fp,
        all: &all,
        resolve: &resolve,
    })
}

#[test]
fn heads_by_date_along_the_first_parent_chain() {
    let (fp, _) = repo();
    assert_eq!(head_at(&fp, 450).map(|c| c.id.as_str()), Some("m4"));
    assert_eq!(
        head_at(&fp, 400).map(|c| c.id.as_str()),
        Some("m4"),
        "at: inclusive"
    );
    assert_eq!(
        before(&fp, 400).map(|c| c.id.as_str()),
        Some("c2"),
        "before: strict"
    );
    assert_eq!(before(&fp, 100), None);
}

#[test]
fn open_issues_see_the_head_at_collection() {
    let t =
        with_history(|h| ground(&issue(1, "open", ""), 150, 450, PreFix::FixParent, h)).unwrap();
    assert_eq!(
        (t.target, t.rule, t.commit.as_str(), t.fix),
        ("open", "default_branch_at_collected_at", "m4", None)
    );
}

#[test]
fn closed_issues_without_evidence_see_the_state_before_they_were_opened() {
    let mut i = issue(2, "closed", "");
    i.timeline_commits.push(EventCommit {
        event: "closed".into(),
        commit: "fork0001".into(),
    });
    let t = with_history(|h| ground(&i, 250, 600, PreFix::FixParent, h)).unwrap();
    assert_eq!(
        (t.target, t.rule, t.commit.as_str()),
        ("closed_silver", "before_created_at", "c2"),
        "a commit the clone lacks is no evidence"
    );
    let e = with_history(|h| ground(&i, 50, 600, PreFix::FixParent, h)).unwrap_err();
    assert!(e.contains("no commit before"), "{e}");
}

#[test]
fn patch_evidence_in_its_order() {
    // fixes #7 in b3's message.
    let t =
        with_history(|h| ground(&issue(7, "closed", ""), 250, 600, PreFix::FixParent, h)).unwrap();
    assert_eq!(
        (t.target, t.rule, t.commit.as_str(), t.fix.as_deref()),
        ("closed_gold", "fixes_keyword", "c2", Some("b3"))
    );
    // ... but not for an issue opened after that commit.
    let t =
        with_history(|h| ground(&issue(7, "closed", ""), 350, 600, PreFix::FixParent, h)).unwrap();
    assert_eq!(t.rule, "before_created_at");

    // A closed event's commit wins over the keyword.
    let mut i = issue(7, "closed", "");
    i.timeline_commits = vec![
        EventCommit {
            event: "referenced".into(),
            commit: "c2".into(),
        },
        EventCommit {
            event: "closed".into(),
            commit: "c5".into(),
        },
    ];
    let t = with_history(|h| ground(&i, 150, 600, PreFix::FixParent, h)).unwrap();
    assert_eq!(
        (t.rule, t.commit.as_str(), t.fix.as_deref()),
        ("closed_event_commit", "m4", Some("c5")),
        "closed before referenced"
    );

    // A merged closing pull request wins over events: by its merge commit, or found by
    // GitHub's merge subject when the export names none.
    i.closing_prs = vec![ClosingPr {
        number: 9,
        merge_commit: None,
        merged: None,
    }];
    let t = with_history(|h| ground(&i, 150, 600, PreFix::FixParent, h)).unwrap();
    assert_eq!(
        (t.rule, t.commit.as_str(), t.fix.as_deref()),
        ("merged_pr", "c2", Some("m4"))
    );
    i.closing_prs[0].merged = Some(false);
    let t = with_history(|h| ground(&i, 150, 600, PreFix::FixParent, h)).unwrap();
    assert_eq!(
        t.rule, "closed_event_commit",
        "an unmerged pull request is none"
    );

    // The input's fix_commit comes first, and must exist.
    i.fix_commit = Some("c2".into());
    let t = with_history(|h| ground(&i, 150, 600, PreFix::FixParent, h)).unwrap();
    assert_eq!(
        (t.rule, t.commit.as_str(), t.fix.as_deref()),
        ("given_fix_commit", "c1", Some("c2"))
    );
    i.fix_commit = Some("deadbeef".into());
    let e = with_history(|h| ground(&i, 150, 600, PreFix::FixParent, h)).unwrap_err();
    assert!(
        e.contains("deadbeef") && e.contains("no such commit"),
        "{e}"
    );
}

#[test]
fn the_repositorys_own_history_grounds_a_closed_issue_without_a_timeline() {
    // As `gh issue list --json` gives it: no closing PR, no events; the commits name the
    // issue only in passing, as real repositories do.
    let fp = vec![
        commit(
            "d6",
            Some("d5"),
            50_000,
            "Fix eval (issues #2, #28, #35, #37)",
        ),
        commit("d5", Some("d4"), 5_000, "Update README (#2)"),
        commit("d4", Some("d3"), 4_000, "Revert #28 workaround"),
        commit("d3", Some("d1"), 3_000, "Tune lr (#280)"),
        commit("d1", None, 1_000, "initial"),
    ];
    let resolve = |id: &str| {
        fp.iter()
            .find(|c| c.id == id)
            .map(|c| (c.id.clone(), c.parents.first().cloned()))
    };
    let h = History {
        first_parent: &fp,
        all: &fp,
        resolve: &resolve,
    };
    let mut i = issue(28, "closed", "1970-01-01T00:33:20Z"); // 2,000
    i.closed_at = Some("1970-01-01T01:23:20Z".into()); // 5,000
    let t = ground(&i, 2_000, 200_000, PreFix::FixParent, &h).unwrap();
    assert_eq!((t.target, t.rule), ("closed_gold", "history_reference"));
    assert_eq!((t.commit.as_str(), t.fix.as_deref()), ("d3", Some("d4")));
    assert_eq!(t.pre_fix, Some(PreFix::FixParent));
    // The issue-time snapshot instead of the fix's parent: what the reporter saw.
    let t = ground(&i, 2_000, 200_000, PreFix::IssueTime, &h).unwrap();
    assert_eq!((t.commit.as_str(), t.fix.as_deref()), ("d1", Some("d4")));
    assert_eq!(t.pre_fix.map(PreFix::name), Some("issue_time"));
    // Nothing before the close: the first naming commit within a day after it.
    let mut i = issue(35, "closed", "1970-01-01T00:33:20Z");
    i.closed_at = Some("1970-01-01T01:23:20Z".into());
    let t = ground(&i, 2_000, 200_000, PreFix::FixParent, &h).unwrap();
    assert_eq!(
        (t.rule, t.fix.as_deref()),
        ("history_reference", Some("d6"))
    );
    // Without closed_at, or named only by a longer number, the issue stays silver.
    let i = issue(28, "closed", "1970-01-01T00:33:20Z");
    assert_eq!(
        ground(&i, 2_000, 200_000, PreFix::FixParent, &h)
            .unwrap()
            .target,
        "closed_silver"
    );
    for (msg, n, yes) in [
        ("Update README (#2)", 2, true),
        ("Fix eval (issues #2, #28, #35, #37)", 35, true),
        ("see #5.", 5, true),
        ("Tune lr (#280)", 28, false),
        ("abc#5", 5, false),
    ] {
        assert_eq!(names_issue(msg, n), yes, "{msg}");
    }
}

#[test]
fn the_fix_keywords_of_swe_bench() {
    let url = "https://github.com/lab/model/issues/12";
    for yes in [
        "Fixes #12",
        "fix #12.",
        "this closes #12",
        "Resolved: #12",
        "RESOLVES  #12\n",
        "see https://github.com/lab/model/issues/12",
    ] {
        assert!(mentions_fix(yes, 12, url), "{yes}");
    }
    for no in [
        "Fixes #123",
        "see #12",
        "prefix #12",
        "fixes#12",
        "fixes lab/model#13",
    ] {
        assert!(!mentions_fix(no, 12, url), "{no}");
    }
    assert!(merges_pr("Merge pull request #9 from u/branch", 9));
    assert!(merges_pr("Load weights leniently (#9)\n\nbody", 9));
    assert!(!merges_pr("Merge pull request #90 from u/branch", 9));
}

fn entry(path: &str, kind: Kind, oid: &str) -> Entry {
    Entry {
        path: path.as_bytes().to_vec(),
        kind,
        oid: oid.into(),
    }
}

#[test]
fn ls_tree_records_are_read_and_dot_git_left_out() {
    let raw = [
        "100644 blob aa\tREADME.md",
        "100755 blob bb\tscripts/run.sh",
        "120000 blob cc\tlatest",
        "160000 commit dd\tthird_party/lib",
        "100644 blob ee\tsub/.git",
    ]
    .map(|r| format!("{r}\0"))
    .concat();
    let raw = raw.as_bytes();
    let got = parse_ls_tree(raw).unwrap();
    assert_eq!(
        got,
        [
            entry("README.md", Kind::File { exec: false }, "aa"),
            entry("scripts/run.sh", Kind::File { exec: true }, "bb"),
            entry("latest", Kind::Symlink, "cc"),
            entry("third_party/lib", Kind::Gitlink, "dd"),
        ]
    );
    assert!(parse_ls_tree(b"040000 tree ff\tdir\0").is_err());
}

fn tar_of(entries: &[Entry]) -> (String, Vec<u8>) {
    let mut content = |e: &Entry| -> std::io::Result<Vec<u8>> {
        Ok(match e.oid.as_str() {
            "cc" => b"scripts/run.sh".to_vec(),
            oid => format!("content of {oid}\n").into_bytes(),
        })
    };
    let out = write_tar(
        entries,
        &mut content,
        &mut |_, _| {},
        Hashing::new(Vec::new()),
    )
    .unwrap();
    out.finish()
}

#[test]
fn the_tar_is_deterministic_and_keeps_modes_and_links() {
    let entries = [
        entry("scripts/run.sh", Kind::File { exec: true }, "bb"),
        entry("README.md", Kind::File { exec: false }, "aa"),
        entry("latest", Kind::Symlink, "cc"),
        entry("third_party/lib", Kind::Gitlink, "dd"),
        entry(
            &format!("deep/{}/f.txt", "d".repeat(120)),
            Kind::File { exec: false },
            "ff",
        ),
    ];
    let (sha, bytes) = tar_of(&entries);
    let mut reversed = entries.clone();
    reversed.reverse();
    assert_eq!(
        tar_of(&reversed),
        (sha.clone(), bytes.clone()),
        "input order does not matter"
    );
    assert_eq!(
        sha,
        reprorun_runtime::image::digest::hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes))
    );

    let mut archive = tar::Archive::new(bytes.as_slice());
    let mut seen = Vec::new();
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let h = e.header();
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0));
        assert_eq!(h.mtime().unwrap(), MTIME);
        let path = e.path().unwrap().to_string_lossy().into_owned();
        let kind = e.header().entry_type();
        let mode = e.header().mode().unwrap();
        let link = e
            .link_name()
            .unwrap()
            .map(|l| l.to_string_lossy().into_owned());
        let mut text = String::new();
        e.read_to_string(&mut text).unwrap();
        seen.push((path, kind, mode, link, text));
    }
    let paths: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted, "sorted entries");
    let find = |p: &str| {
        seen.iter()
            .find(|s| s.0 == p)
            .unwrap_or_else(|| panic!("{p}: {paths:?}"))
    };
    assert_eq!(find("scripts/run.sh").2, 0o755);
    assert_eq!(find("scripts/run.sh").4, "content of bb\n");
    assert_eq!(find("README.md").2, 0o644);
    assert_eq!(find("latest").1, tar::EntryType::Symlink);
    assert_eq!(find("latest").3.as_deref(), Some("scripts/run.sh"));
    assert_eq!(
        find("third_party/lib/").1,
        tar::EntryType::Directory,
        "a submodule: an empty directory"
    );
    assert_eq!(find("scripts/").2, 0o755);
    assert!(
        paths.iter().any(|p| p.len() > 120),
        "a long path kept: {paths:?}"
    );

    // Extractable into a plain directory with the tar crate.
    let dir = tempfile::tempdir().unwrap();
    tar::Archive::new(bytes.as_slice())
        .unpack(dir.path())
        .unwrap();
    assert!(dir.path().join("third_party/lib").is_dir());
    let link = std::fs::read_link(dir.path().join("latest")).unwrap();
    assert_eq!(link, std::path::Path::new("scripts/run.sh"));

    let mut changed = entries.clone();
    changed[0].kind = Kind::File { exec: false };
    assert_ne!(tar_of(&changed).0, sha, "the exec bit is part of the tree");
}

#[test]
fn the_leak_scan_finds_urls_titles_and_passages() {
    let mut i = issue(7, "closed", "");
    i.body = "When I run   train.py with the default config the loss diverges after two epochs and the final accuracy is far below the paper.".into();
    let mut s = Scanner::new(&[&i]);
    s.scan(b"clean.py", b"print('nothing to see')\n# see #7 later\n");
    assert!(s.warnings("g").is_empty());
    s.scan(
        b"NOTES.md",
        b"Known issue: https://github.com/lab/model/issues/7\n",
    );
    s.scan(b"CHANGES", b"#7 size mismatch when loading: fixed\n");
    s.scan(b"FAQ.md", b"Q: when I run train.py with the default config\nthe loss diverges after two epochs and the final accuracy is far below\n");
    s.scan(b"bin.dat", b"\0https://github.com/lab/model/issues/7");
    let w = s.warnings("p@abc");
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(
        w.iter()
            .any(|l| l.contains("NOTES.md holds the URL of hidden issue lab/model#7")),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|l| l.contains("CHANGES holds #N and the title")),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|l| l.contains("FAQ.md holds a verbatim passage")),
        "{w:?}"
    );
    assert!(
        w.iter().all(|l| l.starts_with("leak: group p@abc: ")),
        "{w:?}"
    );
}
