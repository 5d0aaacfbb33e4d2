//! A parser for `reprorun exec` alone. Building clap's whole tree (every OCI, image, mirror,
//! reproduce and audit subcommand with their arguments) costs more than half of the time the
//! start-up spends parsing (issue 20); a one-shot `exec` needs only its own arguments and the
//! hidden OCI globals. Any outcome but a clean parse (help, version, a usage error) falls back
//! to the full tree, so what users see in those cases is exactly what it was.

use clap::{ArgMatches, Args, Command, FromArgMatches};

use super::ExecArgs;
use crate::oci::cli::GlobalOpts;

/// `Some` when `args` is a one-shot `exec` that parses cleanly with the small tree: the
/// subcommand's options and their matches (what [`super::exec`] takes).
pub(super) fn exec(args: &[String]) -> Option<(ExecArgs, ArgMatches)> {
    // Only the plain form: `reprorun exec ...` with nothing before the subcommand's name (the
    // OCI `exec ID` form has been renamed `oci-exec` by then).
    if args.get(1).map(String::as_str) != Some("exec") {
        return None;
    }
    // The version flag as the full tree has it, so `exec --version` is not read as a command.
    let root = GlobalOpts::augment_args(Command::new("reprorun"))
        .version(env!("CARGO_PKG_VERSION"))
        .propagate_version(true)
        .subcommand(ExecArgs::augment_args(Command::new("exec")))
        .subcommand_required(true);
    let mut matches = root.try_get_matches_from(args).ok()?;
    let (name, sub) = matches.remove_subcommand()?;
    if name != "exec" {
        return None;
    }
    let parsed = ExecArgs::from_arg_matches(&sub).ok()?;
    Some((parsed, sub))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// The small tree and the full one must agree on every exec argument: parse the same
    /// command lines with both and compare what the request is built from.
    #[test]
    fn agrees_with_the_full_tree() {
        for line in [
            "reprorun exec -- /bin/true",
            "reprorun exec --net host --date now --random real -- sh -c x",
            "reprorun exec --cpus 1 --seed 7 --bind /a:/b:ro --tmpfs /t --bind /c:/d -- ls -l",
            "reprorun exec --workdir-mode overlay --timeout 10m --root /run/x -- true",
            "reprorun exec --isolation none -- env",
        ] {
            let args = argv(line);
            let (fast, fm) = exec(&args).unwrap_or_else(|| panic!("fast parse of {line}"));
            let full = crate::help::exec_grouped(super::super::Cli::command())
                .try_get_matches_from(&args)
                .unwrap();
            let sub = full.subcommand_matches("exec").unwrap();
            let slow = ExecArgs::from_arg_matches(sub).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{line}");
            let req_fast = super::super::request(&fast, &fm).map(|r| format!("{r:?}"));
            let req_slow = super::super::request(&slow, sub).map(|r| format!("{r:?}"));
            assert_eq!(req_fast.ok(), req_slow.ok(), "{line}");
        }
    }

    /// Everything that is not a clean one-shot exec goes to the full tree, so help, version
    /// and usage errors read as before.
    #[test]
    fn falls_back_for_help_errors_and_other_commands() {
        for line in [
            "reprorun exec --help",
            "reprorun exec --net bridge -- true",
            "reprorun --root /x exec -- true",
            "reprorun image ls",
            "reprorun",
            "reprorun exec --version",
        ] {
            assert!(exec(&argv(line)).is_none(), "{line}");
        }
    }
}
