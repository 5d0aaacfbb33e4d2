use super::*;
use crate::cli::Cli;
use clap::{CommandFactory, FromArgMatches};

/// The derived tree as the binary used it before (`help::exec_grouped(Cli::command())`).
fn derived() -> Command {
    crate::help::exec_grouped(Cli::command())
}

/// Every help text of `a` and `b`, at this level and below, compared; `path` names the level.
fn same_help(a: &mut Command, b: &mut Command, path: &str) {
    assert_eq!(a.get_name(), b.get_name(), "{path}");
    assert_eq!(
        a.render_help().to_string(),
        b.render_help().to_string(),
        "{path} -h"
    );
    assert_eq!(
        a.render_long_help().to_string(),
        b.render_long_help().to_string(),
        "{path} --help"
    );
    assert_eq!(
        a.render_usage().to_string(),
        b.render_usage().to_string(),
        "{path} usage"
    );
    assert_eq!(a.is_hide_set(), b.is_hide_set(), "{path} hidden");
    let names = |c: &Command| {
        c.get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(a), names(b), "{path} subcommands");
    // clap's own `help` subcommand holds a copy of the tree for shell completion, made at
    // the top's build, before any deferred part is: below it the trees differ, and no command
    // line shows it (`help X Y` lines are in `parses_as_the_derive`; reprorun generates no
    // completions).
    if path.ends_with(" help") {
        return;
    }
    for name in names(a) {
        let sa = a.find_subcommand_mut(&name).unwrap();
        let mut sa = sa.clone();
        let mut sb = b.find_subcommand_mut(&name).unwrap().clone();
        same_help(&mut sa, &mut sb, &format!("{path} {name}"));
    }
}

/// The top level's help and every subcommand's, recursively, read as the derive's do.
#[test]
fn every_help_is_the_derives() {
    let (mut a, mut b) = (derived(), command());
    a.build();
    b.build();
    same_help(&mut a, &mut b, "reprorun");
}

/// clap's own consistency checks pass on the whole lazy tree (every deferred part built).
#[test]
fn passes_clap_debug_assert() {
    command().debug_assert();
}

/// Nothing below the top is built until parsed: the tree a start makes holds no subcommand's
/// arguments.
#[test]
fn builds_no_subcommand_arguments_up_front() {
    let c = command();
    for sub in c.get_subcommands() {
        let own = sub.get_arguments().filter(|a| !a.is_hide_set()).count();
        assert_eq!(own, 0, "{} built up front", sub.get_name());
    }
}

/// What each tree makes of `args`: the parsed command line, or clap's error as shown (its
/// kind, rendered text and exit code).
fn outcome(c: Command, args: &[&str]) -> String {
    match c.try_get_matches_from(args) {
        Ok(m) => match Cli::from_arg_matches(&m) {
            Ok(cli) => format!("ok {cli:?}"),
            Err(e) => format!("from {:?} {} {}", e.kind(), e.render(), e.exit_code()),
        },
        Err(e) => format!("err {:?} {} {}", e.kind(), e.render(), e.exit_code()),
    }
}

/// A table of command lines, good and bad, over every subcommand: parsed alike, refused
/// alike (the same message and exit code), help and version shown alike.
#[test]
fn parses_as_the_derive() {
    let lines: &[&[&str]] = &[
        &["reprorun"],
        &["reprorun", "--help"],
        &["reprorun", "-h"],
        &["reprorun", "--version"],
        &["reprorun", "-V"],
        &["reprorun", "help"],
        &["reprorun", "help", "exec"],
        &["reprorun", "help", "image"],
        &["reprorun", "help", "nope"],
        &["reprorun", "help", "image", "-h"],
        &["reprorun", "help", "image", "list"],
        &["reprorun", "help", "image", "nope"],
        &["reprorun", "help", "help"],
        &["reprorun", "image", "help", "list"],
        &["reprorun", "nope"],
        &["reprorun", "exe"],
        &["reprorun", "--bogus"],
        &["reprorun", "exec", "--help"],
        &["reprorun", "exec", "-h"],
        &["reprorun", "exec", "--version"],
        &["reprorun", "exec", "--net", "host", "--", "/bin/true"],
        &["reprorun", "exec", "--net", "nope", "--", "/bin/true"],
        &["reprorun", "exec", "--nett", "host", "--", "/bin/true"],
        &["reprorun", "exec", "--root", "/r", "--", "t"],
        &["reprorun", "--root", "/r", "exec", "--", "t"],
        &[
            "reprorun", "exec", "--image", "a", "--rootfs", "/b", "--", "t",
        ],
        &[
            "reprorun", "exec", "--bind", "/a:/b", "--tmpfs", "/t", "--", "t",
        ],
        &[
            "reprorun", "--root", "/r", "--log", "/l", "--debug", "state", "c1",
        ],
        &["reprorun", "state"],
        &["reprorun", "state", "c1", "c2"],
        &["reprorun", "create", "--bundle", "/b", "c1"],
        &["reprorun", "create", "--help"],
        &["reprorun", "start", "c1", "--log-format", "json"],
        &["reprorun", "kill", "c1", "KILL"],
        &["reprorun", "kill", "--all", "c1"],
        &["reprorun", "delete", "--force", "c1"],
        &["reprorun", "run", "--detach", "c1"],
        &["reprorun", "list", "--format", "json"],
        &["reprorun", "list", "--format", "xml"],
        &["reprorun", "ps", "c1"],
        &["reprorun", "features"],
        &["reprorun", "features", "extra"],
        &["reprorun", "spec", "--rootless"],
        &["reprorun", "oci-exec", "c1", "ls"],
        &["reprorun", "oci-exec", "--help"],
        &["reprorun", "image"],
        &["reprorun", "image", "--help"],
        &["reprorun", "image", "list"],
        &["reprorun", "image", "bogus"],
        &["reprorun", "mirror"],
        &["reprorun", "mirror", "--help"],
        &["reprorun", "reproduce"],
        &["reprorun", "reproduce", "--help"],
        &["reprorun", "audit"],
        &["reprorun", "audit", "--help"],
        &["reprorun", "audit", "nope"],
    ];
    for args in lines {
        assert_eq!(
            outcome(derived(), args),
            outcome(command(), args),
            "{args:?}"
        );
    }
}

/// Every subcommand, at every depth, answers `--help`, a missing value and an unknown option
/// as the derive's does.
#[test]
fn every_subcommand_refuses_as_the_derive() {
    fn paths(c: &Command, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        for s in c.get_subcommands() {
            let mut p = prefix.clone();
            p.push(s.get_name().to_string());
            out.push(p.clone());
            paths(s, p, out);
        }
    }
    let mut full = derived();
    full.build();
    let mut all = Vec::new();
    paths(&full, vec!["reprorun".into()], &mut all);
    assert!(all.len() > 20, "{} subcommands", all.len());
    for p in &all {
        for extra in [&["--help"][..], &["-h"], &["--no-such-option"], &[]] {
            let args: Vec<&str> = p
                .iter()
                .map(String::as_str)
                .chain(extra.iter().copied())
                .collect();
            assert_eq!(
                outcome(derived(), &args),
                outcome(command(), &args),
                "{args:?}"
            );
        }
    }
}
