//! `exec --image`: how an image from the store becomes the sandbox's root. The root is a
//! fresh writable overlay whose lower layer is the image's flattened root filesystem (never
//! written) and whose upper layer lives in a tmpfs that ends with the run, so every run starts
//! from the image as imported. See `spec/image.md`.

use std::path::PathBuf;

use crate::determinism::{EnvError, EnvProfile};

use super::{Isolation, MountOp, PlanError};

/// An image resolved from the store (by `image::run_root`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRoot {
    /// What the user named (`busybox`, `sha256:…`).
    pub reference: String,
    /// The image's manifest digest.
    pub digest: String,
    /// The flattened root filesystem in the store.
    pub rootfs: PathBuf,
    /// The image's `Env`, in order.
    pub env: Vec<(String, String)>,
    /// `Entrypoint` followed by `Cmd`: the command when none is given.
    pub argv: Vec<String>,
    /// The image's `User`, resolved to ids.
    pub user: Option<(u32, u32)>,
}

/// The root of an image run: the overlay replaces the skeleton tmpfs and the read-only binds.
pub(super) fn root_mounts(img: &ImageRoot) -> Vec<MountOp> {
    vec![MountOp::Overlay {
        lower: img.rootfs.clone(),
        dest: "/".into(),
    }]
}

/// The image's environment goes over the pins, except that the determinism pins (TZ, LANG,
/// LC_ALL, HOME, SOURCE_DATE_EPOCH, the hash seeds) win; PATH is the image's if it sets one.
/// The user's `--env` and `--env-file` come after, and win over both.
pub(super) fn apply_env(env: &mut EnvProfile, img: &ImageRoot) -> Result<(), EnvError> {
    for (k, v) in &img.env {
        if k == "PATH" || env.get(k).is_none() {
            env.set(k, v)?;
        }
    }
    Ok(())
}

/// An image needs a mount namespace: `--isolation=none` is refused and `auto` means `full`
/// (a pins-only run would run the command on the host's files, not the image's).
pub(super) fn isolation(requested: Isolation) -> Result<Isolation, PlanError> {
    match requested {
        Isolation::None => Err(PlanError::ImageIsolation),
        _ => Ok(Isolation::Full),
    }
}

/// On the image's writable root, `/etc/ld.so.preload` is written into the overlay instead of
/// covering `/etc` with a read-only overlay, so the image's `/etc` stays writable.
pub(super) fn writable_etc(mounts: &mut [MountOp]) {
    for op in mounts {
        if let MountOp::Preload { etc, lib } = op {
            *op = MountOp::PreloadFile {
                etc: etc.clone(),
                lib: lib.clone(),
            };
        }
    }
}
