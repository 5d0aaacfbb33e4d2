//! `.dockerignore` against the engines themselves: for real projects' files (the fixtures
//! in `fixtures/dockerignore`, see `record.sh` there), a live dockerd sends exactly the
//! files `docker-sends.txt` lists — the list reprorun's matcher is held to by the unit tests
//! of `image/build/ignore.rs` — and podman, handed the patterns reprorun gives it
//! (`podman-ignorefile`, which those unit tests hold to reprorun's own rewrite), sends the
//! same. Handed the project's file as it is, podman 4 keeps the paths of a leading-`/`
//! pattern (containers/podman#25458), so a build key over Docker's rules would miss them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::oci_engines::Dockerd;

const CASES: [&str; 2] = ["grafana", "home-assistant"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/fixtures/dockerignore")
}

/// `record.sh ARGS` with `DOCKER_HOST`: the files the engine sent, one a line.
fn record(docker_host: Option<&str>, args: &[&str]) -> String {
    let mut c = Command::new("timeout");
    c.arg("300").arg(fixtures().join("record.sh")).args(args);
    if let Some(h) = docker_host {
        c.env("DOCKER_HOST", h);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "record.sh {args:?}: {}", stderr(&out));
    stdout(&out)
}

fn sent(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(case).join("docker-sends.txt")).unwrap()
}

#[test]
fn docker_sends_what_the_dockerignore_fixtures_record() {
    require!(Need::Root, Need::Tool("dockerd"), Need::Tool("docker"));
    let Some(d) = Dockerd::start("ignore", &[]) else {
        return;
    };
    for case in CASES {
        let got = record(Some(&d.socket()), &["docker", case]);
        assert_eq!(got, sent(case), "{case}: dockerd sent another set of files");
    }
}

#[test]
fn podman_handed_reprorun_patterns_sends_what_docker_sends() {
    require!(Need::Root, Need::Tool("podman"));
    for case in CASES {
        let file = fixtures().join(case).join("podman-ignorefile");
        let got = record(None, &["podman", case, file.to_str().unwrap()]);
        assert_eq!(got, sent(case), "{case}: podman sent another set of files");
    }
}
