//! Bad input: one line on stderr naming the problem (a usage error: the parser's whole
//! message and a `--help` hint), exit 125, nothing run.

use crate::common::*;

#[test]
fn bad_input_is_refused_with_one_line_and_125() {
    let w = Work::new();
    std::fs::write(w.path().join("file"), "x").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["exec", "--rootfs", "/nonexistent-rootfs", "--", "true"],
            "--rootfs /nonexistent-rootfs: not a directory",
        ),
        (
            &["exec", "--rootfs", "file", "--", "true"],
            "not a directory",
        ),
        (
            &["exec", "--workdir", "/nonexistent-work", "--", "true"],
            "--workdir",
        ),
        (
            &["exec", "--bind", "/etc", "--", "true"],
            "invalid bind spec",
        ),
        (
            &["exec", "--bind", "/etc:relative/target", "--", "true"],
            "invalid bind spec",
        ),
        (
            &["exec", "--bind", "/etc:/x:rx", "--", "true"],
            "invalid bind spec",
        ),
        (
            &["exec", "--bind", "/nonexistent-src:/x", "--", "true"],
            "--bind source /nonexistent-src",
        ),
        (
            &["exec", "--tmpfs", "relative", "--", "true"],
            "invalid mount target",
        ),
        (
            &["exec", "--timeout", "10 parsecs", "--", "true"],
            "invalid duration",
        ),
        (
            &["exec", "--timeout", "0s", "--", "true"],
            "invalid duration",
        ),
        (
            &["exec", "--env", "NOEQUALS", "--", "true"],
            "invalid environment entry",
        ),
        (
            &["exec", "--env-file", "/nonexistent.env", "--", "true"],
            "--env-file /nonexistent.env",
        ),
        (&["exec", "--user", "root", "--", "true"], "invalid --user"),
        (
            &["exec", "--hostname", "bad host", "--", "true"],
            "invalid hostname",
        ),
        (&["exec", "--isolation", "partial", "--", "true"], "partial"),
        (
            &[
                "exec",
                "--record",
                "/nonexistent-dir/run.json",
                "--",
                "true",
            ],
            "--record /nonexistent-dir/run.json",
        ),
        (
            &["exec", "--record", "file/run.json", "--", "true"],
            "--record",
        ),
        (&["exec", "--"], "no command given"),
        (&["exec"], "no command given"),
        (&["exec", "--", ""], "no command given"),
        (&["exec", "--no-such-flag", "--", "true"], "--no-such-flag"),
    ];
    for (args, needle) in cases {
        let o = w.run(args);
        assert!(o.stdout.is_empty(), "{args:?} printed to stdout");
        expect_bad_input(&o, needle);
    }
    std::fs::write(
        w.path().join("bad.env"),
        "GOOD=1\nthis is not an assignment\n",
    )
    .unwrap();
    let o = w.run(&["exec", "--env-file", "bad.env", "--", "true"]);
    expect_error(&o, "bad.env:2: expected KEY=VALUE");
}

#[test]
fn help_and_version_exit_zero() {
    let w = Work::new();
    let o = w.run(&["exec", "--help"]);
    let out = expect_code(&o, 0);
    for flag in [
        "--rootfs",
        "--workdir",
        "--bind",
        "--tmpfs",
        "--net",
        "--env",
        "--env-file",
        "--hostname",
        "--user",
        "--timeout",
        "--isolation",
        "--record",
        "--dry-run",
    ] {
        assert!(out.contains(flag), "--help lacks {flag}");
    }
    let o = w.run(&["--version"]);
    assert_eq!(
        expect_code(&o, 0),
        format!("reprorun {}\n", env!("CARGO_PKG_VERSION"))
    );
}
