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
pub(super) fn root_mounts(
    img: &ImageRoot,
    idmap: Option<super::mounts::MountIdmap>,
) -> Vec<MountOp> {
    vec![MountOp::Overlay {
        keep: None,
        lower: img.rootfs.clone(),
        dest: "/".into(),
        idmap,
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

#[cfg(test)]
mod tests {
    use super::super::{resolve, ExecRequest, HostFacts, Plan};
    use super::*;

    fn host(cwd: &std::path::Path) -> HostFacts {
        HostFacts {
            uid: 1000,
            gid: 100,
            cwd: cwd.to_path_buf(),
            source_date_epoch: None,
            now: 1_800_000_000,
            cpus_available: 4,
            unix_sockets: Vec::new(),
        }
    }

    fn image(rootfs: &std::path::Path) -> ImageRoot {
        ImageRoot {
            reference: "busybox".into(),
            digest: format!("sha256:{}", "a".repeat(64)),
            rootfs: rootfs.to_path_buf(),
            env: vec![
                ("PATH".into(), "/img/bin".into()),
                ("TZ".into(), "Europe/Paris".into()),
                ("IMAGE_VAR".into(), "1".into()),
            ],
            argv: vec!["/bin/entry".into(), "--flag".into()],
            user: Some((1000, 1000)),
        }
    }

    fn plan(req: ExecRequest) -> Result<Plan, PlanError> {
        let work = tempfile::tempdir().unwrap();
        resolve(&req, &host(work.path()))
    }

    #[test]
    fn image_root_is_a_writable_overlay() {
        let root = tempfile::tempdir().unwrap();
        let mut req = ExecRequest::new(vec![]);
        req.image = Some(image(root.path()));
        let p = plan(req).unwrap();
        assert_eq!(
            p.mounts[0],
            MountOp::Overlay {
                lower: root.path().to_path_buf(),
                dest: "/".into(),
                keep: None,
                idmap: None,
            }
        );
        assert!(!p.mounts.contains(&MountOp::ReadonlyRoot));
        assert!(!p
            .mounts
            .iter()
            .any(|m| matches!(m, MountOp::Tmpfs { dest, .. } if dest.as_os_str() == "/")));
        assert!(!p
            .mounts
            .iter()
            .any(|m| matches!(m, MountOp::Preload { .. })));
        assert!(p
            .mounts
            .iter()
            .any(|m| matches!(m, MountOp::PreloadFile { .. })));
        assert_eq!(p.rootfs, root.path());
        assert_eq!(p.argv, vec!["/bin/entry", "--flag"]);
        assert_eq!((p.uid_map.inside, p.gid_map.inside), (1000, 1000));
        assert!(p.env.contains(&"PATH=/img/bin".to_string()));
        assert!(
            p.env.contains(&"TZ=UTC".to_string()),
            "pins win: {:?}",
            p.env
        );
        assert!(p.env.contains(&"IMAGE_VAR=1".to_string()));
        assert_eq!(p.cwd, std::path::Path::new("/work"));
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""op":"overlay""#), "{json}");
    }

    #[test]
    fn the_users_command_env_and_ids_win() {
        let root = tempfile::tempdir().unwrap();
        let mut req = ExecRequest::new(vec!["sh".into(), "-c".into(), "true".into()]);
        req.image = Some(image(root.path()));
        req.env = vec![
            ("TZ".into(), "Asia/Tokyo".into()),
            ("IMAGE_VAR".into(), "2".into()),
        ];
        req.user = Some((0, 0));
        let p = plan(req).unwrap();
        assert_eq!(p.argv, vec!["sh", "-c", "true"]);
        assert!(p.env.contains(&"TZ=Asia/Tokyo".to_string()));
        assert!(p.env.contains(&"IMAGE_VAR=2".to_string()));
        assert_eq!(p.uid_map.inside, 0);
    }

    #[test]
    fn isolation_rootfs_and_empty_command() {
        let root = tempfile::tempdir().unwrap();
        let mut req = ExecRequest::new(vec!["true".into()]);
        req.image = Some(image(root.path()));
        req.isolation = Isolation::None;
        assert!(matches!(plan(req.clone()), Err(PlanError::ImageIsolation)));
        req.isolation = Isolation::Auto;
        assert_eq!(plan(req.clone()).unwrap().isolation, Isolation::Full);
        req.rootfs = Some(root.path().to_path_buf());
        assert!(matches!(plan(req), Err(PlanError::ImageAndRootfs)));
        let mut req = ExecRequest::new(vec![]);
        let mut img = image(root.path());
        img.argv.clear();
        req.image = Some(img);
        assert!(matches!(plan(req), Err(PlanError::EmptyCommand)));
    }
}
