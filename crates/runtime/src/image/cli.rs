//! `reprorun image ...`: arguments and output. Every failure is one line on stderr and exit
//! status 125.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::extract::{Limits, Options};
use super::store::{ImageRecord, Store};
use super::{ImageError, ImportRequest};

/// Options of `reprorun image`.
#[derive(Debug, Args)]
pub struct ImageArgs {
    /// Image store directory (env REPRORUN_STORE; default /var/lib/reprorun for root, else
    /// $XDG_DATA_HOME/reprorun or ~/.local/share/reprorun).
    #[arg(long, global = true, value_name = "DIR", env = "REPRORUN_STORE")]
    pub store: Option<PathBuf>,
    #[command(subcommand)]
    pub command: ImageCommand,
}

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Import an OCI image layout (directory or tar archive) or a `docker save` archive:
    /// every blob is verified and the layers are unpacked safely into the store. Prints
    /// `sha256:DIGEST NAME...` per image.
    Import {
        /// The layout directory or archive (tar or tar.gz).
        #[arg(value_name = "PATH")]
        path: PathBuf,
        /// Name the image NAME[:TAG] (default tag `latest`) instead of the name it carries
        /// (docker's RepoTags, or the layout's ref.name annotation).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Keep setuid and setgid bits of files (stripped by default).
        #[arg(long)]
        keep_setuid: bool,
        /// Keep file capabilities (`security.capability` attributes; stripped by default).
        #[arg(long)]
        keep_caps: bool,
    },
    /// List the images in the store.
    Ls {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print what the store records of an image, as JSON.
    Inspect {
        /// NAME[:TAG] or sha256:DIGEST (or a unique prefix of at least 12 digits).
        #[arg(value_name = "IMAGE")]
        image: String,
    },
    /// Remove names; an image is deleted (with blobs nothing else uses) once no name points
    /// at it. `sha256:DIGEST` removes the image and every name of it.
    Rm {
        /// NAME[:TAG] or sha256:DIGEST; repeatable.
        #[arg(value_name = "IMAGE", required = true)]
        images: Vec<String>,
    },
}

/// Runs `reprorun image ...` (errors are mapped to a message and status by the binary's `cli`).
pub fn run(args: ImageArgs) -> Result<(), ImageError> {
    let store = Store::new(args.store)?;
    let mut out = std::io::stdout().lock();
    let print = |e: std::io::Error| ImageError::Store {
        path: "stdout".into(),
        detail: e.to_string(),
    };
    match args.command {
        ImageCommand::Import {
            path,
            name,
            keep_setuid,
            keep_caps,
        } => {
            let req = ImportRequest {
                input: path,
                name,
                options: Options {
                    keep_setuid,
                    keep_caps,
                },
                limits: Limits::default(),
            };
            for rec in super::import(&store, &req)? {
                let mut line = rec.digest.to_string();
                for n in &rec.names {
                    line.push(' ');
                    line.push_str(n);
                }
                writeln!(out, "{line}").map_err(print)?;
                if let Some(warning) = rec.skipped_devices.warning() {
                    let name = rec
                        .names
                        .first()
                        .map_or(rec.digest.to_string(), Clone::clone);
                    eprintln!("reprorun: warning: image {name}: {warning}");
                }
            }
        }
        ImageCommand::Ls { json } => {
            let images = store.images()?;
            if json {
                let text = serde_json::to_string_pretty(&images).expect("records serialize");
                writeln!(out, "{text}").map_err(print)?;
            } else {
                writeln!(
                    out,
                    "{:<40} {:<12} {:>10}  CREATED",
                    "NAME", "DIGEST", "SIZE"
                )
                .map_err(print)?;
                for rec in &images {
                    for name in names_or_none(rec) {
                        writeln!(
                            out,
                            "{:<40} {:<12} {:>10}  {}",
                            name,
                            rec.digest.short(),
                            human(rec.size),
                            rec.created.as_deref().unwrap_or("-")
                        )
                        .map_err(print)?;
                    }
                }
            }
        }
        ImageCommand::Inspect { image } => {
            let digest = store.resolve(&image)?;
            let rec = store.record(&digest)?;
            let mut value = serde_json::to_value(&rec).expect("records serialize");
            value["rootfs"] = serde_json::Value::String(
                store
                    .image_dir(&digest)
                    .join("rootfs")
                    .display()
                    .to_string(),
            );
            let text = serde_json::to_string_pretty(&value).expect("values serialize");
            writeln!(out, "{text}").map_err(print)?;
        }
        ImageCommand::Rm { images } => {
            let (untagged, removed) = super::remove(&store, &images)?;
            for n in untagged {
                writeln!(out, "untagged {n}").map_err(print)?;
            }
            for d in removed {
                writeln!(out, "deleted {d}").map_err(print)?;
            }
        }
    }
    Ok(())
}

fn names_or_none(rec: &ImageRecord) -> Vec<String> {
    if rec.names.is_empty() {
        vec!["<none>".into()]
    } else {
        rec.names.clone()
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
