//! reprorun's clap tree with each subcommand's arguments built only when that subcommand is
//! parsed or shown (clap's `Command::defer`). The derived tree (`Cli::command()`) builds
//! (and drops) the arguments of every subcommand of every pipeline on each start: about
//! 1 ms of a `reprorun --version`, `state` or `create` (issue 42; `exec`'s plain form takes
//! the fast parser, `fast.rs`, and builds no tree). This tree holds each subcommand's name,
//! summary and visibility, as the derive gives them, and the derived arguments behind a
//! deferred builder; the unit tests hold every help text, usage error and parse result of
//! the two trees equal, subcommand by subcommand. `Cli::from_arg_matches` reads its matches
//! (the same ids). Adding a subcommand to `Command` or to `OciCommand` means adding its
//! row here; the tests fail until it is.

use clap::{Args, Command};

use reprorun_runtime::oci::cli as oci;
use reprorun_runtime::{image, mirror};

use super::ExecArgs;

/// The top level's summary (`Cli`'s `about`).
const ABOUT: &str = "Run a command so that time, environment, identity and network cannot leak in";

/// A subcommand: its name, its summary (the variant's doc comment, as the derive reads it),
/// whether it is hidden, and the builder of its arguments (`None`: it has none).
type Row = (
    &'static str,
    &'static str,
    bool,
    Option<fn(Command) -> Command>,
);

/// reprorun's subcommands in the derive's order (`Command`, with `OciCommand` flattened in).
const ROWS: &[Row] = &[
    (
        "exec",
        "Run one command in a fresh sandbox and exit with its status. (`exec ID CMD` with a \
         container id, or with runc's exec options, runs CMD in that OCI container.)",
        false,
        Some(exec),
    ),
    (
        "create",
        "OCI: create a container from a bundle; its process waits for `start`",
        false,
        Some(args::<oci::CreateArgs>),
    ),
    (
        "start",
        "OCI: start a created container's process",
        false,
        Some(args::<oci::IdArg>),
    ),
    (
        "state",
        "OCI: print a container's state as JSON",
        false,
        Some(args::<oci::IdArg>),
    ),
    (
        "kill",
        "OCI: send a signal (default SIGTERM) to a container",
        false,
        Some(args::<oci::KillArgs>),
    ),
    (
        "delete",
        "OCI: remove a stopped container (--force: any container)",
        false,
        Some(args::<oci::DeleteArgs>),
    ),
    (
        "run",
        "OCI: create and start a container, wait for it, delete it (--detach: return at once)",
        false,
        Some(args::<oci::RunArgs>),
    ),
    (
        "list",
        "OCI: list containers in the state root",
        false,
        Some(args::<oci::ListArgs>),
    ),
    (
        "ps",
        "OCI: list the processes of a container",
        false,
        Some(args::<oci::PsArgs>),
    ),
    (
        "features",
        "OCI: print the features this runtime supports (runtime-spec features JSON)",
        false,
        None,
    ),
    (
        "spec",
        "OCI: write a default config.json",
        false,
        Some(args::<oci::SpecArgs>),
    ),
    (
        "oci-exec",
        "OCI: execute a process in a running container (runc's `exec ID`)",
        true,
        Some(args::<oci::OciExecArgs>),
    ),
    (
        "image",
        "Import, pull, list, inspect and remove container images (`spec/image.md`)",
        false,
        Some(args::<image::cli::ImageArgs>),
    ),
    (
        "mirror",
        "Read-only dependency-index mirrors frozen at a date: pull, add, index, verify \
         (`spec/mirror.md`)",
        false,
        Some(args::<mirror::cli::MirrorArgs>),
    ),
    (
        "reproduce",
        "Re-run benchmark patches k times with and without the determinism shim; study \
         reproducibility (`spec/reproduce.md`)",
        false,
        Some(args::<reprorun_reproduce::cli::ReproduceArgs>),
    ),
    (
        "audit",
        "The ReproRepo audit: snapshots of repositories as issue reporters saw them, audit \
         agents on paper + snapshot in sandboxes, blind and offline (`spec/audit.md`)",
        false,
        Some(args::<reprorun_audit::cli::AuditArgs>),
    ),
];

/// reprorun's command line, as `help::exec_grouped(Cli::command())` reads it.
pub(crate) fn command() -> Command {
    let top = Command::new("reprorun").group(
        clap::ArgGroup::new("Cli")
            .multiple(true)
            .args([] as [clap::Id; 0]),
    );
    // The summary after the global options: their doc comment sets one too.
    let mut top = oci::GlobalOpts::augment_args(top)
        .about(ABOUT)
        .long_about(None)
        .version(env!("CARGO_PKG_VERSION"))
        .propagate_version(true);
    let globals = crate::help::hidden_globals(&top);
    for &(name, about, hide, build) in ROWS {
        let mut sub = Command::new(name).about(about).long_about(None).hide(hide);
        if name == "exec" {
            // Before the globals are handed down (at the top's build, ahead of the deferred
            // builder): exec's hidden copies keep them out of its help.
            sub = globals.iter().cloned().fold(sub, Command::arg);
        }
        if let Some(build) = build {
            sub = sub.defer(build);
        }
        top = top.subcommand(sub);
    }
    top.subcommand_required(true).arg_required_else_help(true)
}

/// The deferred builder of a subcommand whose arguments are `A`'s: the derive's, with the
/// subcommand's own summary kept over the one `A`'s doc comment gives (as the derive does).
fn args<A: Args>(c: Command) -> Command {
    use clap::builder::Resettable;
    let keep = |s: Option<&clap::builder::StyledStr>| {
        s.cloned().map_or(Resettable::Reset, Resettable::Value)
    };
    let (about, long) = (keep(c.get_about()), keep(c.get_long_about()));
    A::augment_args(c).about(about).long_about(long)
}

/// exec's: its options, under their headings (`help.rs`).
fn exec(c: Command) -> Command {
    crate::help::grouped(args::<ExecArgs>(c))
}

#[cfg(test)]
mod tests;
