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
    /// Pull an image from an OCI registry (Docker Hub, ghcr.io, a private registry) into
    /// the store: the platform's manifest, its config and layers (gzip, zstd or plain),
    /// downloaded 4 at a time, resumed after an interruption, each verified by digest, then
    /// imported like `image import`. Credentials come from the podman and Docker auth files
    /// ($REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
    /// $DOCKER_CONFIG/config.json, ~/.docker/config.json). Prints `sha256:DIGEST NAME`.
    Pull {
        /// NAME[:TAG] or NAME@sha256:DIGEST, as Docker and podman write them
        /// (`python:3.11-slim`, `ghcr.io/o/n:tag`, `host:5000/n@sha256:...`).
        #[arg(value_name = "REF")]
        reference: String,
        /// The platform to pick from a multi-platform image: OS/ARCH[/VARIANT] (default
        /// linux and this machine's architecture).
        #[arg(long, value_name = "OS/ARCH")]
        platform: Option<String>,
        /// `false`: do not check the registry's certificate, and use plain HTTP when it
        /// does not speak TLS (a private registry).
        #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
        tls_verify: bool,
        /// Certificates for the registry: `*.crt` CAs, `NAME.cert` + `NAME.key` client
        /// certificate (default /etc/containers/certs.d/HOST, /etc/docker/certs.d/HOST).
        #[arg(long, value_name = "DIR")]
        cert_dir: Option<PathBuf>,
        /// Mirrors and registry locations: a containers-registries.conf(5) file
        /// (`[[registry]]` prefix/location/insecure/blocked, `[[registry.mirror]]`) or Docker's
        /// daemon.json (`registry-mirrors`, `insecure-registries`). Default: podman's files
        /// ($CONTAINERS_REGISTRIES_CONF, ~/.config/containers/registries.conf or
        /// /etc/containers/registries.conf, and their registries.conf.d), then
        /// /etc/docker/daemon.json.
        #[arg(long, value_name = "FILE")]
        registries_conf: Option<PathBuf>,
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
        ImageCommand::Pull {
            reference,
            platform,
            tls_verify,
            cert_dir,
            registries_conf,
        } => {
            let req = super::pull::PullRequest {
                reference,
                platform,
                tls: super::pull::http::Tls {
                    verify: tls_verify,
                    cert_dir,
                },
                auth_files: super::pull::auth::files(|k| std::env::var(k).ok()),
                registries: super::pull::registries::Registries::for_flag(
                    registries_conf.as_deref(),
                )
                .map_err(super::pull::PullError::from)?,
            };
            let rec = super::pull::pull(&store, &req)?;
            let mut line = rec.digest.to_string();
            for n in &rec.names {
                line.push(' ');
                line.push_str(n);
            }
            writeln!(out, "{line}").map_err(print)?;
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
