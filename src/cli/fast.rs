//! A parser of `reprorun exec`'s own options, without clap. Building even exec's part of
//! clap's tree and matching against it took about 0.2 ms of every start (issue 20), longer
//! than the whole of bubblewrap's argument handling. This one reads the options of
//! [`ExecArgs`] with the same value parsers and defaults, both generated from the one table
//! of exec's options (`exec_args.rs`); anything it does not take in full —
//! help, version, short options, an unknown or repeated option, a value that does not parse,
//! a conflict, a value clap would take from the environment, the OCI globals — goes to the
//! full clap tree, so what users see in those cases (and every message) is exactly clap's.
//! The unit tests hold the two to the same result on every option and on random command
//! lines.

use super::exec_args::{fast_defaults, fast_flag, fast_set, ENV_BACKED};
use super::ExecArgs;
use reprorun_runtime::plan::ExtraMount;

/// `Some` when `args` is a one-shot `exec` this parser takes in full: the options and the
/// `--bind`/`--tmpfs` mounts in command-line order.
pub(super) fn exec(args: &[String]) -> Option<(ExecArgs, Vec<ExtraMount>)> {
    parse_exec(args, |name| std::env::var_os(name).is_some())
}

fn parse_exec(
    args: &[String],
    env_set: impl Fn(&str) -> bool,
) -> Option<(ExecArgs, Vec<ExtraMount>)> {
    // Only the plain form: `reprorun exec ...` with nothing before the subcommand's name (the
    // OCI `exec ID` form has been renamed `oci-exec` by then).
    if args.get(1).map(String::as_str) != Some("exec") || ENV_BACKED.iter().any(|v| env_set(v)) {
        return None;
    }
    let mut a = fast_defaults()?;
    let mut mounts = Vec::new();
    let mut given: Vec<&str> = Vec::new();
    let mut rest = args[2..].iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            a.command = rest.cloned().collect();
            break;
        }
        let Some(long) = arg.strip_prefix("--") else {
            if arg.starts_with('-') {
                return None; // a short option (`-h`): clap's
            }
            // The command's first word: it and everything after it are the command.
            a.command = std::iter::once(arg).chain(rest).cloned().collect();
            break;
        };
        let (name, inline) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (long, None),
        };
        if given.contains(&name) {
            return None; // a once-only option given twice: clap refuses it
        }
        if let Some(flag) = fast_flag(&mut a, name) {
            if inline.is_some() {
                return None;
            }
            *flag = true;
            given.push(name);
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => rest.next()?,
        };
        if value.is_empty() || value.starts_with('-') {
            return None; // clap's reading of these differs by option: leave them to it
        }
        if !fast_set(&mut a, &mut mounts, name, value)? {
            given.push(name);
        }
    }
    // clap's conflicts_with and requires.
    if (a.image.is_some() && a.rootfs.is_some())
        || (given.contains(&"mirror-serve") && a.mirror.is_none())
    {
        return None;
    }
    Some((a, mounts))
}

#[cfg(test)]
mod tests;
