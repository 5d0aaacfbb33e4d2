use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::limits::{
    decide, next_link, parse_head, same_origin, wait_for_budget, Budget, Decision, Head,
};
use super::papers::{normalize_repo_url, plan_records, PaperSource};
use super::{fetch, github};

#[test]
fn repository_links_normalise_to_owner_name() {
    let cases = [
        ("https://github.com/lab/model", "lab/model"),
        ("http://github.com/lab/model.git", "lab/model"),
        ("github.com/lab/model/", "lab/model"),
        ("https://www.github.com/Lab/Model", "Lab/Model"),
        (
            "https://github.com/lab/model/tree/main/src/train",
            "lab/model",
        ),
        (
            "https://github.com/lab/model/blob/v1/README.md#usage",
            "lab/model",
        ),
        (
            "https://github.com/lab/model?tab=readme-ov-file",
            "lab/model",
        ),
        ("git@github.com:lab/model.git", "lab/model"),
        ("ssh://git@github.com/lab/model.git", "lab/model"),
        ("  https://GitHub.com/lab/my.model  ", "lab/my.model"),
    ];
    for (url, want) in cases {
        assert_eq!(normalize_repo_url(url).as_deref(), Ok(want), "{url}");
    }
}

#[test]
fn non_github_and_incomplete_links_say_why() {
    let cases = [
        ("", "no repository link"),
        (
            "https://gitlab.com/lab/model",
            "not a GitHub repository (gitlab.com)",
        ),
        (
            "https://lab.github.io/model",
            "not a GitHub repository (lab.github.io)",
        ),
        ("https://github.com/lab", "no owner/name"),
        ("https://github.com/orgs/lab", "not a repository link"),
        ("https://github.com/lab/..", "not a repository link"),
    ];
    for (url, want) in cases {
        let err = normalize_repo_url(url).unwrap_err();
        assert!(err.contains(want), "{url}: {err}");
    }
}

fn records(rows: &[Value]) -> Vec<(usize, Map<String, Value>)> {
    rows.iter()
        .enumerate()
        .map(|(i, v)| (i + 1, v.as_object().cloned().unwrap_or_default()))
        .collect()
}

#[test]
fn plan_keeps_github_papers_and_records_each_skip() {
    let rows = [
        json!({"paper_id": "p1", "repo_url": "https://github.com/lab/model", "paper_url": "https://x.org/p1.pdf", "year": 2024}),
        json!({"paper_id": "p2", "repo_url": "https://gitlab.com/lab/other", "paper_url": "u"}),
        json!({"paper_id": "p3", "paper_url": "u"}),
        json!({"paper_id": "p4", "repo_url": "github.com/LAB/model.git", "paper_url": "u"}),
        json!({"paper_id": "p5", "repo_url": "github.com/lab/nopaper"}),
        json!({"paper_id": "p6", "repo_url": "github.com/lab/local", "paper_path": "papers/p6.pdf"}),
    ];
    let plan = plan_records(&records(&rows), Path::new("/data")).unwrap();
    let jobs: Vec<(&str, &str)> = plan
        .jobs
        .iter()
        .map(|j| (j.paper_id.as_str(), j.repo.as_str()))
        .collect();
    assert_eq!(jobs, [("p1", "lab/model"), ("p6", "lab/local")]);
    assert_eq!(
        plan.jobs[0].paper,
        PaperSource::Url("https://x.org/p1.pdf".into())
    );
    assert_eq!(plan.jobs[0].year, Some(json!(2024)));
    assert_eq!(
        plan.jobs[1].paper,
        PaperSource::Path("/data/papers/p6.pdf".into())
    );
    let skips: Vec<(&str, &str)> = plan
        .skipped
        .iter()
        .map(|s| (s.paper_id.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skips,
        [
            ("p2", "not a GitHub repository (gitlab.com)"),
            ("p3", "no repository link"),
            ("p4", "repository LAB/model is already paper p1's"),
            ("p5", "no paper_url or paper_path"),
        ]
    );
}

#[test]
fn plan_refuses_a_paper_without_id_or_twice() {
    let no_id = [json!({"repo_url": "github.com/a/b"})];
    assert_eq!(
        plan_records(&records(&no_id), Path::new("/"))
            .unwrap_err()
            .0,
        1
    );
    let twice = [json!({"paper_id": "p"}), json!({"paper_id": "p"})];
    let (line, why) = plan_records(&records(&twice), Path::new("/")).unwrap_err();
    assert_eq!(line, 2);
    assert!(why.contains("also on line 1"), "{why}");
}

#[test]
fn link_header_gives_the_next_page() {
    let link = "<https://api.github.com/repositories/1/issues?state=all&page=2>; rel=\"next\", \
                <https://api.github.com/repositories/1/issues?state=all&page=5>; rel=\"last\"";
    assert_eq!(
        next_link(link).as_deref(),
        Some("https://api.github.com/repositories/1/issues?state=all&page=2")
    );
    let last = "<http://h/x?page=1>; rel=\"first\", <http://h/x?page=4>; rel=\"prev\"";
    assert_eq!(next_link(last), None);
    assert_eq!(next_link(""), None);
    assert_eq!(
        next_link("<http://h/x?page=3>;rel=next").as_deref(),
        Some("http://h/x?page=3")
    );
}

#[test]
fn the_last_header_block_is_the_answer() {
    let text = "HTTP/1.1 301 Moved Permanently\r\nLocation: /x\r\n\r\n\
                HTTP/2 200\r\nETag: W/\"abc\"\r\nX-RateLimit-Remaining: 4999\r\nX-RateLimit-Reset: 1700000000\r\n\r\n";
    let head = parse_head(text).unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.get("etag"), Some("W/\"abc\""));
    assert_eq!(
        head.budget(),
        Some(Budget {
            remaining: 4999,
            reset: 1_700_000_000
        })
    );
    assert_eq!(parse_head("garbage"), None);
}

fn head(status: u16, headers: &[(&str, &str)]) -> Head {
    Head {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn a_spent_budget_waits_until_its_reset() {
    let spent = Some(Budget {
        remaining: 0,
        reset: 1_000,
    });
    assert_eq!(wait_for_budget(spent, 990), Some(11));
    assert_eq!(wait_for_budget(spent, 1_001), None);
    let left = Some(Budget {
        remaining: 3,
        reset: 1_000,
    });
    assert_eq!(wait_for_budget(left, 990), None);
    assert_eq!(wait_for_budget(None, 990), None);
}

#[test]
fn rate_limits_and_errors_are_retried_the_rest_used() {
    for status in [200, 304, 404, 410, 422] {
        assert_eq!(
            decide(Some(&head(status, &[])), false, 0, 0, 0.0),
            Decision::Use
        );
    }
    // A 403 that is no rate limit is the caller's.
    assert_eq!(
        decide(Some(&head(403, &[])), false, 0, 0, 0.5),
        Decision::Use
    );
    let retry = |d: Decision| match d {
        Decision::Retry { secs, why } => (secs, why),
        other => panic!("expected a retry: {other:?}"),
    };
    // Secondary: Retry-After, spread by up to half again.
    let (secs, why) = retry(decide(
        Some(&head(403, &[("retry-after", "4")])),
        false,
        0,
        0,
        0.0,
    ));
    assert_eq!(secs, 4.0);
    assert!(why.contains("secondary rate limit"), "{why}");
    let (secs, _) = retry(decide(
        Some(&head(429, &[("retry-after", "4")])),
        false,
        0,
        0,
        0.5,
    ));
    assert_eq!(secs, 5.0);
    // Primary: spent, until the reset.
    let spent = head(
        403,
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1030"),
        ],
    );
    assert_eq!(retry(decide(Some(&spent), false, 1_000, 0, 0.9)).0, 31.0);
    // Secondary without Retry-After: a minute, doubling.
    assert_eq!(
        retry(decide(Some(&head(403, &[])), true, 0, 0, 0.0)).0,
        60.0
    );
    assert_eq!(
        retry(decide(Some(&head(429, &[])), false, 0, 2, 0.0)).0,
        240.0
    );
    // Server errors and failed transfers: from 1 s, doubling.
    assert_eq!(
        retry(decide(Some(&head(502, &[])), false, 0, 3, 0.0)).0,
        8.0
    );
    assert_eq!(retry(decide(None, false, 0, 1, 0.0)).0, 2.0);
    // Up to MAX_ATTEMPTS.
    let last = super::limits::MAX_ATTEMPTS - 1;
    assert!(matches!(
        decide(None, false, 0, last, 0.0),
        Decision::GiveUp(_)
    ));
}

#[test]
fn merged_same_repository_prs_are_the_ones_looked_up() {
    let events = vec![
        json!({"event": "cross-referenced", "source": {"issue": {"number": 7, "pull_request": {"merged_at": "2024-01-01T00:00:00Z"}}}}),
        json!({"event": "cross-referenced", "source": {"issue": {"number": 8, "pull_request": {"merged_at": null}}}}),
        json!({"event": "cross-referenced", "source": {"issue": {"number": 9, "pull_request": {"merged_at": "2024-01-01T00:00:00Z"}, "repository": {"full_name": "fork/model"}}}}),
        json!({"event": "cross-referenced", "source": {"issue": {"number": 10}}}),
        json!({"event": "closed", "commit_id": "abc"}),
    ];
    assert_eq!(github::merged_prs(&events, "lab/model"), [7]);
}

#[test]
fn a_record_reads_back_as_the_issue_with_comments_and_evidence() {
    let issue = json!({
        "number": 4, "title": "crash", "body": "Traceback", "state": "closed",
        "created_at": "2024-01-01T00:00:00Z", "closed_at": "2024-01-03T00:00:00Z",
        "html_url": "https://github.com/lab/model/issues/4", "comments": 1,
        "labels": [{"name": "bug"}],
    });
    let events = vec![
        json!({"event": "commented", "user": {"login": "ann"}, "body": "same here", "created_at": "2024-01-02T00:00:00Z"}),
        json!({"event": "cross-referenced", "source": {"issue": {"number": 7, "pull_request": {"merged_at": "2024-01-03T00:00:00Z"}}}}),
        json!({"event": "closed", "commit_id": "c0ffee"}),
    ];
    let merges = BTreeMap::from([(7, "m7".to_string())]);
    let rec = github::record(issue.as_object().unwrap(), events, &merges);
    let got = crate::input::issue_from_record(&rec, Some("lab/model"), &BTreeMap::new())
        .unwrap()
        .unwrap();
    assert_eq!(got.id(), "lab/model#4");
    assert_eq!(got.comments.len(), 1);
    assert_eq!(got.comments[0].author.as_deref(), Some("ann"));
    assert_eq!(got.comments[0].body, "same here");
    assert_eq!(got.closing_prs.len(), 1);
    assert_eq!(got.closing_prs[0].merge_commit.as_deref(), Some("m7"));
    assert_eq!(got.timeline_commits.len(), 1);
    assert_eq!(got.timeline_commits[0].commit, "c0ffee");
    assert_eq!(got.labels, ["bug"]);
}

#[test]
fn timelines_are_fetched_for_closed_issues_and_commented_open_ones() {
    let obj = |v: Value| v.as_object().cloned().unwrap();
    assert!(github::needs_timeline(&obj(
        json!({"state": "closed", "comments": 0})
    )));
    assert!(github::needs_timeline(&obj(
        json!({"state": "open", "comments": 2})
    )));
    assert!(!github::needs_timeline(&obj(
        json!({"state": "open", "comments": 0})
    )));
}

#[test]
fn paper_kind_is_the_magic_then_the_extension() {
    assert_eq!(
        fetch::paper_kind(b"%PDF-1.7 ...", "https://x/abs/1"),
        Some("pdf")
    );
    assert_eq!(
        fetch::paper_kind(b"# T", "https://x/paper.md?raw=1"),
        Some("md")
    );
    assert_eq!(fetch::paper_kind(b"text", "/p/paper.TXT"), Some("txt"));
    assert_eq!(fetch::paper_kind(b"<html>", "https://x/abs/1"), None);
}

#[test]
fn only_the_apis_own_pages_are_followed() {
    let api = "https://api.github.com";
    assert!(same_origin(
        api,
        "https://api.github.com/repositories/1/issues?page=2"
    ));
    assert!(same_origin(
        "http://127.0.0.1:8080/",
        "http://127.0.0.1:8080/x"
    ));
    assert!(!same_origin(api, "https://api.github.com.evil.org/x"));
    assert!(!same_origin(api, "http://api.github.com/x"));
    assert!(!same_origin(
        "http://127.0.0.1:8080",
        "http://127.0.0.1:9090/x"
    ));
    assert!(!same_origin(api, "/relative"));
}

#[test]
fn curl_config_strings_are_quoted_and_single_line() {
    use super::http::quoted;
    assert_eq!(
        quoted("If-None-Match: W/\"abc\""),
        "\"If-None-Match: W/\\\"abc\\\"\""
    );
    assert_eq!(quoted("a\\b"), "\"a\\\\b\"");
    // A value cannot smuggle a second option onto another line.
    assert_eq!(
        quoted("x\nurl = \"http://evil\""),
        "\"xurl = \\\"http://evil\\\"\""
    );
}

#[test]
fn since_takes_rfc3339_or_a_day() {
    assert_eq!(super::since("2024-03-01").unwrap(), "2024-03-01T00:00:00Z");
    assert_eq!(
        super::since("2024-03-01T12:30:00+02:00").unwrap(),
        "2024-03-01T10:30:00Z"
    );
    for bad in ["yesterday", "2024-13-01", "1700000000"] {
        assert!(super::since(bad).is_err(), "{bad}");
    }
}
