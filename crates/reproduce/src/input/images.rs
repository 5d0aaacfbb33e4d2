//! The instances' images, made ready before any run: an `image` the store has is used as it
//! is; one it lacks is pulled from its registry (through the registry configuration's
//! mirrors), once per study however many instances name it; a `dockerfile` is built by the
//! host's engine and imported, once per Dockerfile and context. Every instance's `image` is
//! then pinned to the digest it resolved to (`NAME@sha256:…`), so its runs, the run record
//! and a resumed study all name the same image, and later studies find it offline.

use std::collections::BTreeMap;
use std::path::PathBuf;

use reprorun_runtime::image::build::{self, BuildRequest, Engine};
use reprorun_runtime::image::digest::Digest;
use reprorun_runtime::image::pull::{self, registries::Registries, PullRequest};
use reprorun_runtime::image::store::Store;
use reprorun_runtime::image::ImageError;

use super::{Defaults, InputError, Instance};

/// `--pull`: when an instance's `image` is pulled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PullPolicy {
    /// When the store does not have it (podman's and Docker's default).
    #[default]
    Missing,
    /// Never: an image the store lacks is an error (offline).
    Never,
    /// Every study pulls it again (a tag may have moved).
    Always,
}

/// `--build-runtime`: what runs a Dockerfile's `RUN` steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BuildRuntime {
    /// reprorun itself (podman's `--runtime`; Docker uses its daemon's runtime).
    #[default]
    Reprorun,
    /// The engine's own default runtime.
    Engine,
}

/// Where an instance's image comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Source {
    /// A name in the store, or a registry reference.
    Reference(String),
    Dockerfile {
        dockerfile: PathBuf,
        context: PathBuf,
    },
}

impl Source {
    /// The instance's `image`, or `dockerfile` (with `context`, default the Dockerfile's
    /// directory); both is an error.
    pub(crate) fn of(
        image: Option<String>,
        dockerfile: Option<PathBuf>,
        context: Option<PathBuf>,
    ) -> Result<Option<Source>, String> {
        match (image, dockerfile, context) {
            (Some(_), Some(_), _) => Err("\"image\" and \"dockerfile\" cannot both be set".into()),
            (_, None, Some(_)) => Err("\"context\" needs a \"dockerfile\"".into()),
            (Some(r), None, None) => Ok(Some(Source::Reference(r))),
            (None, Some(d), c) => {
                if !d.is_file() {
                    return Err(format!("dockerfile {} is not a file", d.display()));
                }
                let context = c.unwrap_or_else(|| {
                    d.parent().map_or_else(|| PathBuf::from("."), PathBuf::from)
                });
                if !context.is_dir() {
                    return Err(format!("context {} is not a directory", context.display()));
                }
                // Absolute: the engine runs them, and messages name them.
                let abs = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
                Ok(Some(Source::Dockerfile {
                    dockerfile: abs(d),
                    context: abs(context),
                }))
            }
            (None, None, None) => Ok(None),
        }
    }
}

/// `NAME@sha256:…`: the name as given, pinned to the digest it resolved to.
pub(crate) fn pinned(name: &str, digest: &Digest) -> String {
    match name.rsplit_once('@') {
        Some(_) => name.to_string(),
        None => format!("{name}@{digest}"),
    }
}

/// Resolves every source (each once), pulling or building what the store lacks, and pins
/// the instances' `image`. `sources` pairs an index of `insts` with its source.
pub(crate) fn prepare(
    insts: &mut [Instance],
    sources: Vec<(usize, Source)>,
    defaults: &Defaults,
) -> Result<(), InputError> {
    if sources.is_empty() {
        return Ok(());
    }
    let mut by_source: BTreeMap<Source, Vec<usize>> = BTreeMap::new();
    for (i, s) in sources {
        by_source.entry(s).or_default().push(i);
    }
    let fail = |users: &[usize], what: String, e: String| InputError::Instance {
        id: insts[users[0]].instance_id.clone(),
        reason: format!("{what}: {e}"),
    };
    let store = Store::new(defaults.store.clone()).map_err(|e| InputError::Instance {
        id: insts[by_source.values().next().map_or(0, |u| u[0])]
            .instance_id
            .clone(),
        reason: e.to_string(),
    })?;
    let mut registries = None;
    let mut pins = Vec::new();
    for (source, users) in &by_source {
        let others = match users.len() {
            1 => String::new(),
            n => format!(" (and {} more instance(s))", n - 1),
        };
        let (name, digest) = match source {
            Source::Reference(r) => {
                let what = format!("image {r:?}");
                reference(&store, r, defaults, &mut registries, &others)
                    .map_err(|e| fail(users, what, e))?
            }
            Source::Dockerfile {
                dockerfile,
                context,
            } => {
                let what = format!("dockerfile {}", dockerfile.display());
                let d = dockerfile_image(&store, dockerfile, context, defaults, &others)
                    .map_err(|e| fail(users, what, e))?;
                (build::name(&d.1), d.0)
            }
        };
        for &i in users {
            pins.push((i, pinned(&name, &digest)));
        }
    }
    for (i, pin) in pins {
        // The run's root as runs will see it: a record that cannot run is refused now.
        reprorun_runtime::image::run_root(&store, &pin).map_err(|e| InputError::Instance {
            id: insts[i].instance_id.clone(),
            reason: format!("image {pin:?}: {e}"),
        })?;
        insts[i].image = Some(pin);
    }
    Ok(())
}

/// The full name of `r` and its digest: the store's, else pulled (per `--pull`). A short
/// name is recorded as the fully qualified reference it was pulled as
/// (`docker.io/library/python:3.11`), when the store names the image so.
fn reference(
    store: &Store,
    r: &str,
    defaults: &Defaults,
    registries: &mut Option<Registries>,
    others: &str,
) -> Result<(String, Digest), String> {
    let load = |registries: &mut Option<Registries>| -> Result<Registries, String> {
        if registries.is_none() {
            *registries = Some(
                Registries::for_flag(defaults.registries_conf.as_deref())
                    .map_err(|e| e.to_string())?,
            );
        }
        Ok(registries.clone().unwrap_or_default())
    };
    // The first qualified form the store names `digest` by, else `r`.
    let full = |regs: &Registries, digest: &Digest| {
        regs.qualify(r)
            .into_iter()
            .find(|c| store.resolve(c).is_ok_and(|d| &d == digest))
            .unwrap_or_else(|| r.to_string())
    };
    if defaults.pull != PullPolicy::Always {
        match store.resolve(r) {
            // Offline with a configuration that cannot be read: the name as given.
            Ok(d) => return Ok((load(registries).map_or(r.to_string(), |g| full(&g, &d)), d)),
            Err(e @ ImageError::NotFound { .. }) => {
                // A short name the store has by a qualified form of it (podman's local
                // short-name lookup).
                let known = load(registries).ok().and_then(|g| {
                    g.qualify(r)
                        .into_iter()
                        .find_map(|c| store.resolve(&c).ok().map(|d| (c, d)))
                });
                if let Some(found) = known {
                    return Ok(found);
                }
                if defaults.pull == PullPolicy::Never {
                    return Err(e.to_string());
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    let regs = load(registries)?;
    eprintln!("reprorun: pulling {r}{others}");
    let req = PullRequest {
        reference: r.to_string(),
        platform: None,
        tls: pull::http::Tls {
            verify: true,
            cert_dir: None,
        },
        auth_files: pull::auth::files(|k| std::env::var(k).ok()),
        registries: regs.clone(),
    };
    let rec = pull::pull(store, &req).map_err(|e| {
        format!(
            "not in the store {}, and the pull failed: {e} (a private or plain-HTTP registry, or a mirror: --registries-conf; offline: `reprorun image import` it first)",
            store.root.display()
        )
    })?;
    let name = full(&regs, &rec.digest);
    match name == r {
        true => eprintln!("reprorun: pulled {r}: {}", rec.digest),
        false => eprintln!("reprorun: pulled {r} as {name}: {}", rec.digest),
    }
    Ok((name, rec.digest))
}

/// The image built from `dockerfile` (and its digest key), built now unless the store has it.
fn dockerfile_image(
    store: &Store,
    dockerfile: &std::path::Path,
    context: &std::path::Path,
    defaults: &Defaults,
    others: &str,
) -> Result<(Digest, Digest), String> {
    // A cached build needs no engine.
    let keyed = build::keyed(dockerfile, context).map_err(|e| e.to_string())?;
    if let Some(d) = build::cached(store, &keyed.key) {
        return Ok((d, keyed.key));
    }
    let engine = match defaults.build_engine {
        Some(e) => e,
        None => Engine::detect(std::env::var_os("PATH").as_deref()).ok_or_else(|| {
            build::BuildError::NoEngine {
                dockerfile: dockerfile.to_path_buf(),
            }
            .to_string()
        })?,
    };
    let runtime = match defaults.build_runtime {
        BuildRuntime::Reprorun => std::env::current_exe().ok(),
        BuildRuntime::Engine => None,
    };
    let req = BuildRequest {
        dockerfile: dockerfile.to_path_buf(),
        context: context.to_path_buf(),
        engine,
        runtime,
    };
    eprintln!(
        "reprorun: building {} with {}{others}",
        dockerfile.display(),
        engine.program()
    );
    let log = tempfile::Builder::new()
        .prefix("reprorun-build-")
        .suffix(".log")
        .tempfile()
        .map_err(|e| format!("a build log: {e}"))?;
    let digest = match build::build(store, &req, &keyed, log.path()) {
        Ok(d) => d,
        Err(e) => {
            // The log stays for the user to read.
            let _ = log.keep();
            return Err(e.to_string());
        }
    };
    eprintln!("reprorun: built {}: {digest}", dockerfile.display());
    Ok((digest, keyed.key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_an_image_or_a_dockerfile_with_its_context() {
        let dir = tempfile::tempdir().unwrap();
        let df = dir.path().join("Dockerfile");
        std::fs::write(&df, "FROM busybox\n").unwrap();
        assert_eq!(Source::of(None, None, None), Ok(None));
        assert_eq!(
            Source::of(Some("busybox".into()), None, None),
            Ok(Some(Source::Reference("busybox".into())))
        );
        assert_eq!(
            Source::of(None, Some(df.clone()), None),
            Ok(Some(Source::Dockerfile {
                dockerfile: df.clone(),
                context: dir.path().to_path_buf()
            }))
        );
        for (i, d, c, want) in [
            (Some("a".to_string()), Some(df.clone()), None, "cannot both"),
            (
                None,
                None,
                Some(dir.path().into()),
                "needs a \"dockerfile\"",
            ),
            (None, Some(dir.path().join("nope")), None, "is not a file"),
            (
                None,
                Some(df.clone()),
                Some(df.clone()),
                "is not a directory",
            ),
        ] {
            let e = Source::of(i, d, c).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_name_is_pinned_to_its_digest_once() {
        let d = Digest::of(b"x");
        assert_eq!(pinned("busybox", &d), format!("busybox@{d}"));
        let named = format!("swebench/sweb.eval.x86_64.a__b-1:latest@{d}");
        assert_eq!(pinned(&named, &d), named);
    }
}
