//! What reprorun adds to a message when the mistake is likely the caller's: the whole of a
//! usage error, a value split by the shell, a program that is on the caller's PATH but not
//! in the sandbox. Plain text from plain data, so it is unit-tested without a sandbox.

use std::path::{Path, PathBuf};

mod evidence;
mod tap;

pub use tap::StderrTap;

/// clap's whole message (what is wrong, the valid values or the missing arguments, the usage
/// line), as `reprorun: ...`, with a hint naming `command`'s own `--help` (`reprorun mirror
/// pull`: the subcommand the arguments named).
pub fn usage_message(text: &str, command: &str) -> String {
    let text = text.trim_end();
    let text = text.strip_prefix("error: ").unwrap_or(text);
    let body = match text.rfind("For more information, try") {
        Some(at) => text[..at].trim_end(),
        None => text,
    };
    format!("reprorun: {body}\n\nFor more information, try '{command} --help'.\n")
}

/// The subcommand path that `args` (reprorun's whole command line) name in `cmd`:
/// `reprorun mirror pull` (options and their values skipped; runc's `exec ID`, parsed as `oci-exec`, shown as
/// `exec`).
pub fn command_path(cmd: &clap::Command, args: &[String]) -> String {
    let mut words = vec![cmd.get_name().to_string()];
    let mut at = cmd;
    for arg in args.iter().skip(1) {
        if arg == "--" {
            break;
        }
        if arg.starts_with('-') {
            continue;
        }
        // Not a subcommand: an option's value, or a positional argument.
        if let Some(sub) = at.find_subcommand(arg) {
            words.push(sub.get_name().replace("oci-exec", "exec"));
            at = sub;
        }
    }
    words.join(" ")
}

/// When the command of `exec OPTIONS COMMAND...` (no `--`) directly follows an option's
/// value, the hint that the shell may have split that value (`--timeout 10 minutes`).
/// `args` are the arguments after `exec`; `takes_value` says whether an option takes one.
pub(crate) fn split_value(
    args: &[String],
    command: &[String],
    takes_value: impl Fn(&str) -> bool,
) -> Option<String> {
    let start = args.len().checked_sub(command.len())?;
    if args.get(start..)? != command || start < 2 {
        return None;
    }
    let (option, value, word) = (&args[start - 2], &args[start - 1], command.first()?);
    if value == "--" || !option.starts_with('-') || option.contains('=') || !takes_value(option) {
        return None;
    }
    Some(format!(
        "hint: `{word}` was run as the command because `{option}` took only `{value}`; if \
         `{word}` belongs to that value, quote it (`{option} '{value} {word}'`), and put the \
         command after `--`"
    ))
}

/// Where `program` (a bare name) is on the caller's `path` (a PATH value): the first
/// executable file of that name.
pub(crate) fn on_path(program: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_empty() || program.contains('/') {
        return None;
    }
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The hint for a command not found in the sandbox that the caller has at `found`.
pub(crate) fn not_found(program: &str, found: &Path) -> String {
    let dir = found.parent().unwrap_or(found).display();
    format!(
        "hint: `{program}` is at {} on your PATH, which the sandbox does not see (its PATH is \
         the pinned one and HOME is private); bring it in with `--import-tool {program}`, or \
         with `--bind {dir}:{dir}:ro` and its full path",
        found.display()
    )
}

/// Whether a failed run of `plan` could get the offline hint: the network off, no mirror,
/// and a package client on the command line. Only then is its standard error read
/// ([`StderrTap`]) for the evidence the hint needs.
pub fn offline_hint_possible(plan: &crate::plan::Plan) -> bool {
    let offline = plan.egress.is_none()
        && plan.has(crate::plan::Namespace::Net)
        && !plan.env.iter().any(|e| e.starts_with("REPRORUN_MIRROR="));
    offline && package_client(&plan.argv).is_some()
}

/// The hints for a run that ended with a failure (`outcome.exit_code` not 0): a package
/// client needed the network with the network off, as its output (`stderr`, the end of the
/// run's standard error where it was read) shows; it ran on a work tree it could not write.
pub fn after_failed_run(
    plan: &crate::plan::Plan,
    outcome: &crate::sandbox::Outcome,
    stderr: Option<&[u8]>,
) -> Vec<String> {
    if outcome.exit_code == 0 {
        return Vec::new();
    }
    let mut hints = Vec::new();
    let client = package_client(&plan.argv).filter(|_| offline_hint_possible(plan));
    let evidence = stderr.and_then(|e| evidence::needed_network(&String::from_utf8_lossy(e)));
    if let (Some(client), Some((_, line))) = (client, evidence) {
        hints.push(offline_client(client, &line));
    }
    hints.extend(unwritable_workdir(plan));
    hints
}

/// A read-write /work whose host directory belongs to a uid the sandbox does not map (it
/// shows as `nobody`) and is not writable by others: nothing inside can write there.
fn unwritable_workdir(plan: &crate::plan::Plan) -> Option<String> {
    use crate::plan::{MountOp, Namespace};
    use std::os::unix::fs::MetadataExt;
    let rw = plan.mounts.iter().any(|m| {
        // An idmapped /work (a root caller's) is the workload's own, whoever owns it.
        matches!(m, MountOp::Bind { dest, readonly: false, idmap: None, .. } if dest == Path::new(crate::plan::WORKDIR))
    });
    let meta = std::fs::metadata(&plan.host_workdir).ok()?;
    let map = &plan.uid_map;
    let mapped = (map.outside..map.outside.saturating_add(map.count)).contains(&meta.uid());
    if !rw || !plan.has(Namespace::User) || mapped || meta.mode() & 0o002 != 0 {
        return None;
    }
    Some(format!(
        "hint: the work tree {} belongs to uid {}, which the sandbox does not map (inside it \
         shows as nobody), so the command (uid {}) cannot write to /work; run reprorun as uid \
         {}, or give the tree to uid {} (`chown -R {}:{} {}`)",
        plan.host_workdir.display(),
        meta.uid(),
        map.inside,
        meta.uid(),
        map.outside,
        map.outside,
        plan.gid_map.outside,
        plan.host_workdir.display()
    ))
}

/// Package clients that download what they install.
const CLIENTS: &[&str] = &[
    "pip", "pip3", "uv", "uvx", "pipx", "poetry", "pdm", "pipenv", "conda", "mamba", "npm", "npx",
    "yarn", "pnpm", "go", "cargo", "gem", "bundle", "composer", "mvn", "gradle",
];

/// The first package client the command runs, by name: a word of its arguments (a
/// `sh -c` script's words too), or `-m pip`. Which client ran is not observed (the
/// supervisor does not watch connections under `--net none`: a routed `connect` would fail
/// with EINTR whenever a signal is pending), so this names what the command line names.
pub(crate) fn package_client(argv: &[String]) -> Option<&'static str> {
    let words: Vec<&str> = argv
        .iter()
        .flat_map(|a| a.split(|c: char| c.is_whitespace() || ";|&()'\"`$".contains(c)))
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().enumerate().find_map(|(i, w)| {
        let base = w.rsplit('/').next().unwrap_or(w);
        let base = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if *w == "-m" {
            return words
                .get(i + 1)
                .and_then(|m| CLIENTS.iter().find(|c| **c == *m))
                .copied();
        }
        CLIENTS.iter().find(|c| **c == base).copied()
    })
}

/// The hint for a failed `--net none` run without a mirror whose command runs `client` and
/// whose output shows it needed the network (`line`, quoted).
pub(crate) fn offline_client(client: &str, line: &str) -> String {
    format!(
        "hint: the network is off (--net none) and no --mirror is given, so `{client}` can \
         download nothing (the output says: {line:?}); give it a dependency mirror (`reprorun \
         mirror pull`, then `--mirror DIR`), or let it out with `--allow-host NAME`"
    )
}

/// The hints for a program the sandbox did not find (`errno` ENOENT/ENOTDIR): a value the
/// shell split (`--timeout 10 minutes`), a program the caller has on `path`. `after` are the
/// arguments after `exec`, `command` the command they gave.
pub(crate) fn exec_not_found(
    program: &str,
    after: &[String],
    command: &[String],
    path: Option<&std::ffi::OsStr>,
    takes_value: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut hints: Vec<String> = split_value(after, command, takes_value)
        .into_iter()
        .collect();
    if let Some(found) = path.and_then(|p| on_path(program, p)) {
        hints.push(not_found(program, &found));
    }
    hints
}

/// Hints for a command not found in the sandbox: a value the shell split (`--timeout 10
/// minutes`), a program the caller has on its PATH. `cli`: reprorun's command line.
pub fn for_exec_error(
    e: &crate::sandbox::SandboxError,
    command: &[String],
    cli: &clap::Command,
) -> Vec<String> {
    let crate::sandbox::SandboxError::Exec { program, errno } = e else {
        return Vec::new();
    };
    if !matches!(
        errno,
        nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR
    ) {
        return Vec::new();
    }
    let raw: Vec<String> = std::env::args().collect();
    let after = raw
        .iter()
        .position(|a| a == "exec")
        .map_or(&raw[..0], |i| &raw[i + 1..]);
    let takes_value = |option: &str| {
        cli.find_subcommand("exec").is_some_and(|sub| {
            sub.get_arguments().any(|a| {
                a.get_action().takes_values()
                    && (a
                        .get_long()
                        .is_some_and(|l| option.strip_prefix("--") == Some(l))
                        || a.get_short().is_some_and(|c| option == format!("-{c}")))
            })
        })
    };
    let path = std::env::var_os("PATH");
    exec_not_found(program, after, command, path.as_deref(), takes_value)
}

#[cfg(test)]
mod tests;
