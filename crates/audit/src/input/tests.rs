use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `gh issue list --state all --json ...` output, as gh prints it (trimmed).
const GH: &str = r#"[
  {"number": 7, "title": "ModuleNotFoundError: No module named 'torch_scatter'",
   "body": "Running python train.py fails.", "state": "CLOSED", "stateReason": "COMPLETED",
   "createdAt": "2023-04-02T10:00:00Z", "closedAt": "2023-04-05T09:30:00Z",
   "labels": [{"id": "LA_1", "name": "bug", "description": "", "color": "d73a4a"}],
   "comments": [{"id": "IC_1", "author": {"login": "maint"}, "authorAssociation": "OWNER",
                 "body": "Fixed in #9", "createdAt": "2023-04-05T09:00:00Z", "reactionGroups": []}],
   "closedByPullRequestsReferences": [
     {"id": "PR_1", "number": 9, "url": "https://github.com/lab/model/pull/9",
      "repository": {"id": "R_1", "name": "model", "owner": {"id": "O", "login": "lab"}},
      "mergeCommit": {"oid": "aaaabbbb"}},
     {"number": 3, "url": "https://github.com/else/fork/pull/3",
      "repository": {"name": "fork", "owner": {"login": "else"}}}],
   "url": "https://github.com/lab/model/issues/7"},
  {"number": 8, "title": "Can you release the checkpoints?", "body": "", "state": "OPEN",
   "stateReason": "", "createdAt": "2023-05-01T00:00:00+02:00", "closedAt": "0001-01-01T00:00:00Z",
   "labels": [], "comments": [], "closedByPullRequestsReferences": [],
   "url": "https://github.com/lab/model/issues/8"}
]"#;

#[test]
fn gh_issue_list_output_is_read_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "issues.json", GH);
    let got = load_issues(&f).unwrap();
    assert!(got.bad.is_empty(), "{:?}", got.bad);
    let [a, b] = &got.items[..] else {
        panic!("{:?}", got.items)
    };
    assert_eq!(
        (a.repo.as_str(), a.number),
        ("lab/model", 7),
        "repo from url"
    );
    assert_eq!(
        (a.state.as_str(), a.state_reason.as_deref()),
        ("closed", Some("completed"))
    );
    assert_eq!(a.labels, ["bug"]);
    assert_eq!(a.comments[0].author.as_deref(), Some("maint"));
    assert_eq!(
        a.closing_prs,
        [ClosingPr {
            number: 9,
            merge_commit: Some("aaaabbbb".into()),
            merged: None
        }],
        "the pull request of another repository is left out"
    );
    assert_eq!(a.created_secs().unwrap(), 1_680_429_600);
    assert!(b.is_open());
    assert_eq!(b.closed_at, None, "gh's zero time is no time");
    assert_eq!(b.state_reason, None);
    assert_eq!(b.created_secs().unwrap(), 1_682_892_000, "offset applied");
}

#[test]
fn rest_objects_in_a_directory_pull_requests_skipped_timeline_read() {
    let dir = tempfile::tempdir().unwrap();
    let issues = dir.path().join("issues");
    std::fs::create_dir(&issues).unwrap();
    write(
        &issues,
        "lab__model.json",
        r#"[
      {"url": "https://api.github.com/repos/lab/model/issues/12", "html_url": "https://github.com/lab/model/issues/12",
       "number": 12, "title": "Results lower than the paper", "body": null, "state": "closed",
       "state_reason": "completed", "created_at": "2023-06-01T08:00:00Z", "closed_at": "2023-06-10T08:00:00Z",
       "labels": [{"name": "question"}], "comments": 4, "user": {"login": "u"},
       "timeline": [
         {"event": "labeled"},
         {"event": "referenced", "commit_id": "1111"},
         {"event": "closed", "commit_id": "2222"},
         {"event": "closed", "commit_id": null},
         {"event": "cross-referenced", "source": {"type": "issue", "issue": {"number": 14,
           "repository_url": "https://api.github.com/repos/lab/model",
           "pull_request": {"merged_at": "2023-06-09T00:00:00Z", "merge_commit_sha": "3333"}}}},
         {"event": "cross-referenced", "source": {"type": "issue", "issue": {"number": 15,
           "pull_request": {"merged_at": null}}}}]},
      {"number": 13, "title": "Add feature", "state": "open", "created_at": "2023-06-02T08:00:00Z",
       "pull_request": {"url": "https://api.github.com/repos/lab/model/pulls/13"}},
      {"number": 16, "title": "t", "state": "open", "created_at": "2023-06-03T08:00:00Z"}
    ]"#,
    );
    write(
        &issues,
        "lab__model.timeline.json",
        r#"{"16": [{"event": "referenced", "commit_id": "4444"}]}"#,
    );
    let got = load_issues(&issues).unwrap();
    assert!(got.bad.is_empty(), "{:?}", got.bad);
    let numbers: Vec<u64> = got.items.iter().map(|i| i.number).collect();
    assert_eq!(numbers, [12, 16], "the pull request #13 is skipped");
    let i = &got.items[0];
    assert_eq!(i.body, "");
    assert!(
        i.comments.is_empty(),
        "REST's comment count gives no comments"
    );
    assert_eq!(
        i.timeline_commits,
        [
            EventCommit {
                event: "referenced".into(),
                commit: "1111".into()
            },
            EventCommit {
                event: "closed".into(),
                commit: "2222".into()
            }
        ]
    );
    assert_eq!(i.closing_prs.len(), 1, "only the merged cross-reference");
    assert_eq!(i.closing_prs[0].merge_commit.as_deref(), Some("3333"));
    assert_eq!(
        got.items[1].timeline_commits[0].commit, "4444",
        "sibling file"
    );
    assert_eq!(got.items[1].repo, "lab/model", "repo from the file name");
    assert_eq!(got.items[1].url, "https://github.com/lab/model/issues/16");
}

#[test]
fn the_normalized_output_reads_back_to_the_same_issue() {
    let dir = tempfile::tempdir().unwrap();
    let mut issue = load_issues(&write(dir.path(), "i.json", GH)).unwrap().items[0].clone();
    issue.reproducibility = Some(true);
    issue.category = Some(Category::CrashImmediate);
    issue.label_source = Some("rules".into());
    issue.timeline_commits.push(EventCommit {
        event: "closed".into(),
        commit: "cafe".into(),
    });
    let line = serde_json::to_string(&issue).unwrap();
    let again = load_issues(&write(dir.path(), "o.jsonl", &line)).unwrap();
    assert_eq!(again.items, [issue]);
}

#[test]
fn bad_records_are_named_and_the_others_kept() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "i.jsonl",
        concat!(
            r#"{"repo": "a/b", "number": 1, "state": "open", "created_at": "yesterday"}"#,
            "\n",
            r#"{"repo": "a/b", "number": 2, "state": "open", "created_at": "2023-01-01"}"#,
            "\n",
            r#"{"number": 3, "state": "open", "created_at": "2023-01-01T00:00:00Z"}"#,
            "\n",
            r#"{"repo": "a/b", "number": 4, "state": "open", "created_at": "2023-01-01T00:00:00Z", "category": "weird"}"#,
            "\n",
            r#"{"repo": "a/b", "number": 5, "state": "merged", "created_at": "2023-01-01T00:00:00Z"}"#,
            "\n",
            r#"{"repo": "a/b", "number": 6, "state": "open", "created_at": "2023-01-01T00:00:00Z"}"#,
            "\n"
        ),
    );
    let got = load_issues(&f).unwrap();
    assert_eq!(got.items.len(), 1);
    let msgs: Vec<String> = got.bad.iter().map(ToString::to_string).collect();
    assert_eq!(msgs.len(), 5, "{msgs:?}");
    assert!(
        msgs[0].contains("a/b#1") && msgs[0].contains("yesterday"),
        "{msgs:?}"
    );
    assert!(
        msgs[1].contains("a/b#2"),
        "a plain date is no RFC 3339 time: {msgs:?}"
    );
    assert!(
        msgs[2].contains("i.jsonl:3") && msgs[2].contains("no repository"),
        "{msgs:?}"
    );
    assert!(msgs[3].contains("weird"), "{msgs:?}");
    assert!(msgs[4].contains("open/closed"), "{msgs:?}");
}

#[test]
fn malformed_files_and_duplicates_stop_loading() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.jsonl", "{\"number\": 1\n");
    assert!(matches!(
        load_issues(&bad),
        Err(InputError::Records(RecordsError::Line { line: 1, .. }))
    ));
    let twice = write(
        dir.path(),
        "twice.jsonl",
        "{\"repo\":\"a/b\",\"number\":1,\"state\":\"open\",\"created_at\":\"2023-01-01T00:00:00Z\"}\n\
         {\"url\":\"https://github.com/a/b/issues/1\",\"number\":1,\"state\":\"OPEN\",\"createdAt\":\"2023-01-01T00:00:00Z\"}\n",
    );
    let e = load_issues(&twice).unwrap_err().to_string();
    assert!(e.contains("a/b#1 appears twice"), "{e}");
    let missing = load_issues(&dir.path().join("nope.json")).unwrap_err();
    assert!(matches!(
        missing,
        InputError::Records(RecordsError::Read { .. })
    ));
}

#[test]
fn pairs_resolve_paths_and_dates() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "pairs.jsonl",
        concat!(
            r#"{"paper_id": "p2", "repo": "lab/model", "clone": "repos/model", "paper": "p.pdf", "collected_at": "2024-01-01", "year": 2023, "extra": 1}"#,
            "\n",
            r#"{"paper_id": "p1", "title": "T", "repo": "lab/other", "clone": "/abs/b.bundle", "paper": "x.md", "collected_at": "2024-01-01T12:00:00Z", "default_branch": "dev"}"#,
            "\n",
            r#"{"paper_id": "p3", "repo": "lab/third", "clone": "c", "paper": "x.docx", "collected_at": "2024-01-01"}"#,
            "\n",
            r#"{"paper_id": "p4", "repo": "lab/fourth", "clone": "c", "paper": "x.txt", "collected_at": "soon"}"#,
            "\n"
        ),
    );
    let got = load_pairs(&f).unwrap();
    let ids: Vec<&str> = got.items.iter().map(|p| p.paper_id.as_str()).collect();
    assert_eq!(ids, ["p1", "p2"], "sorted by paper_id");
    let (p1, p2) = (&got.items[0], &got.items[1]);
    assert_eq!(p1.clone, Path::new("/abs/b.bundle"));
    assert_eq!(p1.collected, 1_704_110_400);
    assert_eq!(
        (p1.paper_kind.as_str(), p1.default_branch.as_deref()),
        ("md", Some("dev"))
    );
    assert_eq!(
        p2.clone,
        dir.path().join("repos/model"),
        "relative to the pairs file"
    );
    assert_eq!(
        p2.collected,
        1_704_067_200 + 86_399,
        "a plain date is that whole day"
    );
    assert_eq!(
        (p2.paper_kind.as_str(), p2.year.as_deref()),
        ("pdf", Some("2023"))
    );
    let msgs: Vec<String> = got.bad.iter().map(ToString::to_string).collect();
    assert!(
        msgs[0].starts_with("pair p3:") && msgs[0].contains(".pdf"),
        "{msgs:?}"
    );
    assert!(
        msgs[1].starts_with("pair p4:") && msgs[1].contains("soon"),
        "{msgs:?}"
    );
}

#[test]
fn a_repository_in_two_pairs_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let row = |id: &str| {
        format!(
            r#"{{"paper_id": "{id}", "repo": "a/b", "clone": "c", "paper": "p.pdf", "collected_at": "2024-01-01"}}"#
        )
    };
    let f = write(
        dir.path(),
        "p.jsonl",
        &format!("{}\n{}\n", row("x"), row("y")),
    );
    let e = load_pairs(&f).unwrap_err().to_string();
    assert!(e.contains("p.jsonl:2") && e.contains("pair x"), "{e}");
}
