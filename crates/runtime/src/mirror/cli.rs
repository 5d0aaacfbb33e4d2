//! `reprorun mirror pull|add|index|verify`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::pull::{PullOpts, DEFAULT_GOPROXY, DEFAULT_INDEX};
use super::MirrorError;

#[derive(Debug, Args)]
pub struct MirrorArgs {
    #[command(subcommand)]
    pub(crate) command: MirrorCommand,
}

// Parsed once per process: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum MirrorCommand {
    /// Build a mirror of what the requirements need, as the index stood at DATE.
    Pull(PullArgs),
    /// Add local distribution files (wheels, sdists) with their upload time.
    Add(AddArgs),
    /// Regenerate the index from the lock; --date drops files uploaded later.
    Index(IndexArgs),
    /// Check every file against the lock and the index against the files.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub(crate) struct PullArgs {
    /// The date the index is taken at (RFC 3339, YYYY-MM-DD or @EPOCH).
    #[arg(long, value_name = "DATE")]
    pub(crate) date: String,
    /// A requirements file (as pip and uv read it).
    #[arg(short = 'r', long = "requirement", value_name = "FILE")]
    pub(crate) requirement: Option<PathBuf>,
    /// Python version the files must run on (a warning says when it was released after
    /// DATE).
    #[arg(long, value_name = "X.Y", default_value = "3.11")]
    pub(crate) python: String,
    /// Wheel platform tag prefix (e.g. manylinux, linux_x86_64); default Linux x86-64.
    #[arg(long, value_name = "TAG")]
    pub(crate) platform: Option<String>,
    /// Upstream simple index (PEP 691 JSON with upload times).
    #[arg(long, value_name = "URL", default_value = DEFAULT_INDEX)]
    pub(crate) index: String,
    /// Also mirror the modules this go.mod needs (GOPROXY tree).
    #[arg(long, value_name = "GO.MOD")]
    pub(crate) go: Option<PathBuf>,
    /// Upstream GOPROXY for --go.
    #[arg(long, value_name = "URL", default_value = DEFAULT_GOPROXY)]
    pub(crate) go_proxy: String,
    /// Also mirror the npm packages this package.json needs (resolved by npm as of DATE,
    /// unless --npm-lock gives the versions).
    #[arg(long, value_name = "PACKAGE.JSON")]
    pub(crate) npm: Option<PathBuf>,
    /// With --npm: mirror exactly this lockfile's versions (package-lock.json v2/v3 or
    /// npm-shrinkwrap.json); one published after DATE fails the pull.
    #[arg(long, value_name = "LOCKFILE", requires = "npm")]
    pub(crate) npm_lock: Option<PathBuf>,
    /// Upstream npm registry for --npm (documents with `time` maps).
    #[arg(long, value_name = "URL", default_value = super::npm::DEFAULT_REGISTRY)]
    pub(crate) npm_registry: String,
    /// The mirror directory to create (must not exist).
    #[arg(long, value_name = "DIR", required_unless_present = "into")]
    pub(crate) out: Option<PathBuf>,
    /// Add to this existing mirror what it lacks, at its own date (another --date is
    /// refused).
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub(crate) into: Option<PathBuf>,
    /// Mirror what the project in DIR needs: its pyproject.toml's [build-system] requires
    /// and [project] dependencies.
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// With --project: these [project.optional-dependencies] extras too.
    #[arg(
        long,
        value_name = "EXTRA,...",
        value_delimiter = ',',
        requires = "project"
    )]
    pub(crate) extras: Vec<String>,
    /// With --project: these [dependency-groups] (PEP 735) too.
    #[arg(
        long,
        value_name = "GROUP,...",
        value_delimiter = ',',
        requires = "project"
    )]
    pub(crate) groups: Vec<String>,
    /// Requirements (e.g. pytest==8.0 or pytest).
    #[arg(value_name = "PKG")]
    pub(crate) packages: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The mirror directory (created if it holds no mirror).
    pub(crate) dir: PathBuf,
    /// Upload time recorded for the files (RFC 3339; default: now).
    #[arg(long, value_name = "TIME")]
    pub(crate) upload_time: Option<String>,
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct IndexArgs {
    pub(crate) dir: PathBuf,
    /// Drop (and delete) files uploaded after DATE.
    #[arg(long, value_name = "DATE")]
    pub(crate) date: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    pub(crate) dir: PathBuf,
}

/// `mirror pull`, to a new mirror (`--out`) or into an existing one (`--into`).
fn pull(a: PullArgs) -> Result<i32, MirrorError> {
    let mut packages = a.packages;
    if let Some(dir) = &a.project {
        packages.extend(super::project::requirements(dir, &a.extras, &a.groups)?);
    }
    if a.requirement.is_none() && packages.is_empty() && a.go.is_none() && a.npm.is_none() {
        return Err(MirrorError::Pull(
            "nothing to mirror: give -r FILE, package names, --project DIR, --go GO.MOD or --npm PACKAGE.JSON".into(),
        ));
    }
    let opts = PullOpts {
        date: super::parse_date("--date", &a.date)?,
        requirements: a.requirement,
        packages,
        python: a.python,
        platform: a.platform,
        index: a.index,
        out: a.out.clone().unwrap_or_default(),
        go_mod: a.go,
        go_proxy: a.go_proxy,
        npm: a.npm,
        npm_lock: a.npm_lock,
        npm_registry: a.npm_registry,
    };
    let resolves_python = opts.requirements.is_some() || !opts.packages.is_empty();
    let warning =
        super::python_release::newer_than_date(&opts.python, opts.date).filter(|_| resolves_python);
    let (dir, lock, added) = match (&a.into, &a.out) {
        (Some(into), _) => {
            let (lock, added) = super::into::pull_into_existing(opts, into)?;
            (into, lock, Some(added))
        }
        (None, Some(out)) => (out, super::pull::pull(&opts)?, None),
        (None, None) => return Err(MirrorError::Pull("give --out DIR or --into DIR".into())),
    };
    // Said once the mirror is made (a pull that fails says why on its own line).
    if let Some(warning) = warning {
        eprintln!("reprorun: warning: {warning}");
    }
    let added = added.map_or(String::new(), |n| format!("{n} files added, "));
    println!(
        "{}: {added}{} files, {} Go module versions, {} npm package versions, as of {}",
        dir.display(),
        lock.files.len(),
        lock.go.len(),
        lock.npm.len(),
        lock.date.as_deref().unwrap_or("?")
    );
    Ok(0)
}

/// Runs one mirror command; returns the exit status (errors are mapped to a message and
/// status by the binary's `cli`).
pub fn run(args: MirrorArgs) -> Result<i32, MirrorError> {
    match args.command {
        MirrorCommand::Pull(a) => pull(a),
        MirrorCommand::Add(a) => {
            let when = a
                .upload_time
                .as_deref()
                .map(|t| super::parse_date("--upload-time", t))
                .transpose()?;
            let n = super::add(&a.dir, &a.files, when)?;
            println!("{}: {n} files added", a.dir.display());
            Ok(0)
        }
        MirrorCommand::Index(a) => {
            let date = a
                .date
                .as_deref()
                .map(|d| super::parse_date("--date", d))
                .transpose()?;
            let dropped = super::index(&a.dir, date)?;
            println!(
                "{}: index written, {dropped} files dropped",
                a.dir.display()
            );
            Ok(0)
        }
        MirrorCommand::Verify(a) => {
            let problems = super::verify(&a.dir)?;
            if problems.is_empty() {
                let lock = super::read_lock(&a.dir)?;
                println!(
                    "{}: OK, {} files, {} Go module versions and {} npm package versions match the lock",
                    a.dir.display(),
                    lock.files.len(),
                    lock.go.len(),
                    lock.npm.len()
                );
                Ok(0)
            } else {
                for p in &problems {
                    eprintln!("reprorun: mirror verify: {p}");
                }
                Ok(1)
            }
        }
    }
}
