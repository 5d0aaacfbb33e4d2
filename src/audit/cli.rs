//! `reprorun audit filter|snapshot|run`: arguments to options, and what is printed.

use clap::{Args, Subcommand};

use super::AuditError;

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Label each issue's relevance to reproducibility and its category (built-in rules,
    /// or a judge command); labels given in the input win.
    Filter(super::filter::FilterArgs),
    /// Build the snapshots: each issue's repository as its reporter saw it, without history,
    /// into a content-addressed corpus directory.
    Snapshot(super::snapshot::SnapshotArgs),
    /// Run an audit agent on every snapshot group of a corpus, in fresh sandboxes, and
    /// record each run's findings.
    Run(Box<super::run::RunArgs>),
}

/// Runs one `reprorun audit` command.
pub(crate) fn run(args: AuditArgs) -> Result<(), AuditError> {
    match args.command {
        AuditCommand::Filter(a) => super::filter::command(a),
        AuditCommand::Snapshot(a) => super::snapshot::command(a),
        AuditCommand::Run(a) => super::run::command(*a),
    }
}
