//! Seeded streams keyed by process lineage (issue 21, item 1): a program that starts a number
//! of threads varying with timing (a Go program, a threaded C program) consumes pids, yet
//! every later process's getrandom stream and AT_RANDOM bytes repeat run to run.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;

#[test]
fn random_streams_repeat_after_programs_that_start_varying_numbers_of_threads() {
    use std::os::unix::fs::PermissionsExt;
    let probes = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/lineage");
    let out = |n: &str| probes.path().join(n);
    build_probe(
        &src.join("probe.c"),
        &out("probe"),
        &["-pthread"],
        scratch.path(),
    );
    let static_flags = ["-pthread", "-static"];
    build_probe(
        &src.join("probe.c"),
        &out("probe-static"),
        &static_flags,
        scratch.path(),
    );
    build_probe(&src.join("probe.go"), &out("probe-go"), &[], scratch.path());
    for p in [
        probes.path().to_path_buf(),
        out("probe"),
        out("probe-static"),
        out("probe-go"),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bind = format!("{}:/probes:ro", probes.path().display());
    // The thread starters run before each probe; pids taken by their threads vary.
    let script = "cd /probes && ./probe-go && ./probe threads && ./probe print dyn \
        && ./probe-static threads && ./probe-go && ./probe-static print static \
        && ./probe-go && python3 -c 'import os; print(\"py.urandom\", os.urandom(8).hex())' \
        && echo pid $$ $(sh -c 'echo $$')";
    let w = Work::new();
    let mut outputs = Vec::new();
    let mut pids = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let o = Command::new(BIN)
            .args(["exec", "--bind", &bind, "--", "sh", "-c", script])
            .current_dir(w.path())
            .env_remove("REPRORUN_ISOLATION")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = expect_code(&o, 0);
        let (streams, pid) = text.split_once("pid ").expect("pid line");
        pids.insert(pid.to_string());
        outputs.push(streams.to_string());
    }
    for key in [
        "dyn.at_random",
        "dyn.getrandom",
        "child.getrandom",
        "static.at_random",
    ] {
        assert!(outputs[0].contains(key), "{key} missing:\n{}", outputs[0]);
    }
    assert!(outputs[0].contains("py.urandom"), "{}", outputs[0]);
    let first = &outputs[0];
    for (i, o) in outputs.iter().enumerate() {
        assert_eq!(o, first, "run {i} differs from run 0");
    }
    // The streams differ between processes (a child's is not its parent's).
    let value = |k: &str| {
        first
            .lines()
            .find(|l| l.starts_with(k))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
    };
    assert_ne!(value("dyn.getrandom"), value("child.getrandom"));
    assert_ne!(value("dyn.at_random"), value("static.at_random"));
    // The threads did take pids: the later shell's pid varies (pids are not pinned).
    eprintln!("distinct pid lines over 10 runs: {}", pids.len());
}

#[test]
fn random_streams_repeat_after_a_go_build() {
    // The case: `go build` starts 18 to 21 threads depending on timing, and the
    // process after it used to get another pid, so another stream.
    let w = Work::new();
    std::fs::write(w.path().join("go.mod"), "module probe\n\ngo 1.19\n").unwrap();
    std::fs::write(
        w.path().join("main.go"),
        "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"built\") }\n",
    )
    .unwrap();
    // The probe's pid goes to stderr: pids are not pinned, and still vary.
    let script = "go build -o /tmp/p . && /tmp/p && python3 -c 'import os, sys; \
        print(os.getpid(), file=sys.stderr); print(os.urandom(8).hex())' \
        && head -c 8 /dev/urandom | od -An -tx1";
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut pids = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let o = w.run(&["exec", "--", "sh", "-c", script]);
        let out = expect_code(&o, 0);
        assert!(out.starts_with("built\n"), "{out}");
        *seen.entry(out).or_default() += 1;
        pids.insert(stderr(&o));
    }
    assert_eq!(
        seen.len(),
        1,
        "10 runs, {} different outputs: {seen:?}",
        seen.len()
    );
    eprintln!("the probe's pids over 10 runs: {pids:?}");
}

#[test]
fn forks_and_getrandom_never_fail_while_signals_arrive() {
    let probes = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/lineage/forker.c");
    let bin = probes.path().join("forker");
    build_probe(&src, &bin, &[], scratch.path());
    let w = Work::new();
    let bind = format!("{}:/probes:ro", probes.path().display());
    let o = w.run(&["exec", "--bind", &bind, "--", "/probes/forker"]);
    assert_eq!(expect_code(&o, 0), "bad 0 0\n");
    eprintln!("{}", stderr(&o).trim());
}

#[test]
fn siblings_started_together_keep_their_streams() {
    // A pipeline's two ends and two background jobs exec at the same moment; each keeps
    // its own stream run after run (lines sorted: the jobs' order on stdout is a race).
    let py = |tag: &str| format!("python3 -c 'import os; print(\"{tag}\", os.urandom(8).hex())'");
    let script = format!(
        "{} | cat; {} & {} & wait",
        py("pipe"),
        py("job1"),
        py("job2")
    );
    let w = Work::new();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let o = w.run(&["exec", "--", "sh", "-c", &script]);
        let mut lines: Vec<String> = expect_code(&o, 0).lines().map(String::from).collect();
        lines.sort();
        assert_eq!(lines.len(), 3, "{lines:?}");
        seen.insert(lines);
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    let only = seen.into_iter().next().unwrap();
    let values: std::collections::BTreeSet<&str> = only
        .iter()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(values.len(), 3, "each process has its own stream: {only:?}");
}

#[test]
fn the_command_s_at_random_is_the_same_dynamic_or_static() {
    // The command itself is a root of the lineage: the preload library takes its key
    // without asking the supervisor (pid 2, parent pid 1), the supervisor computes it for a
    // static program at its exec. Both must give the same bytes, and run after run.
    use std::os::unix::fs::PermissionsExt;
    let probes = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/lineage/probe.c");
    let (dynamic, stat) = (
        probes.path().join("probe"),
        probes.path().join("probe-static"),
    );
    build_probe(&src, &dynamic, &["-pthread"], scratch.path());
    build_probe(&src, &stat, &["-pthread", "-static"], scratch.path());
    for p in [probes.path(), &dynamic, &stat] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bind = format!("{}:/probes:ro", probes.path().display());
    let w = Work::new();
    let at_random = |args: &[&str]| {
        let mut full = vec!["exec", "--bind", &bind, "--seed", "7", "--"];
        full.extend_from_slice(args);
        let out = expect_code(&w.run(&full), 0);
        out.lines()
            .find(|l| l.starts_with("cmd.at_random "))
            .unwrap_or_else(|| panic!("no AT_RANDOM line: {out}"))
            .to_string()
    };
    let dyn_first = at_random(&["/probes/probe", "print", "cmd"]);
    assert_eq!(at_random(&["/probes/probe", "print", "cmd"]), dyn_first);
    assert_eq!(
        at_random(&["/probes/probe-static", "print", "cmd"]),
        dyn_first
    );
    // The command after a shell's exec is still the same process: the same key.
    assert_eq!(
        at_random(&["sh", "-c", "exec /probes/probe print cmd"]),
        dyn_first
    );
    // Another seed, other bytes.
    let other = expect_code(
        &w.run(&[
            "exec",
            "--bind",
            &bind,
            "--seed",
            "8",
            "--",
            "/probes/probe",
            "print",
            "cmd",
        ]),
        0,
    );
    assert!(!other.contains(&dyn_first), "{other}");
}
