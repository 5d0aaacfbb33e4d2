//! Mount operations: the ordered list the executor performs inside the new mount namespace.
//! Destinations are paths inside the sandbox; sources are paths on the host (or in `--rootfs`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One setup step. The list is performed in order; a later step may cover an earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum MountOp {
    /// A fresh tmpfs. With `dest` = `/` it is the skeleton root every other step builds on.
    Tmpfs {
        dest: PathBuf,
        #[serde(with = "octal")]
        mode: u32,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        size: Option<u64>,
    },
    /// A recursive bind of a host directory or file; `readonly` applies to every submount.
    Bind {
        src: PathBuf,
        dest: PathBuf,
        readonly: bool,
    },
    /// A host device node (`/dev/null`, ...) bound onto an empty file.
    DevNode {
        src: PathBuf,
        dest: PathBuf,
    },
    /// A fresh procfs of the sandbox's pid namespace.
    Proc {
        dest: PathBuf,
    },
    /// A fresh read-only sysfs of the sandbox's net namespace (a read-only bind of the host's
    /// `/sys` when the net namespace is the host's).
    Sysfs {
        dest: PathBuf,
    },
    /// A private devpts instance (`newinstance`) with its own `ptmx`.
    Devpts {
        dest: PathBuf,
    },
    Symlink {
        target: PathBuf,
        dest: PathBuf,
    },
    /// An empty directory (created in a tmpfs; used to hide host content).
    Dir {
        dest: PathBuf,
        #[serde(with = "octal")]
        mode: u32,
    },
    /// Writes the runtime page (the fake clock, if any, and the entropy seed, if seeded) and
    /// the preload library into `dir` (a tmpfs).
    RuntimeFiles {
        dir: PathBuf,
        clock: Option<crate::determinism::ClockPlan>,
        seed: Option<u64>,
    },
    /// A generated file bound read-only over `dest` (identity files in /proc and /sys).
    File {
        dest: PathBuf,
        contents: String,
    },
    /// A FIFO at `dest` with hard links at `links` (seeded /dev/urandom and /dev/random).
    Fifo {
        dest: PathBuf,
        #[serde(with = "octal")]
        mode: u32,
        links: Vec<PathBuf>,
    },
    /// Covers `etc` with a read-only overlay whose top layer holds an `ld.so.preload` naming
    /// `lib`, so every dynamically linked program loads it, whatever its environment.
    Preload {
        etc: PathBuf,
        lib: PathBuf,
    },
    /// Hides `dest` if it exists: a file is covered by the host's `/dev/null` (checked to be
    /// the real null device first), a directory by an empty read-only tmpfs.
    Mask {
        dest: PathBuf,
    },
    /// Makes `dest` (and everything below it) read-only, if it exists.
    ReadonlyPath {
        dest: PathBuf,
    },
    /// Makes one mount read-only.
    Readonly {
        dest: PathBuf,
    },
    /// Makes the skeleton root read-only once every mount point exists.
    ReadonlyRoot,
    /// A fresh writable overlay at `dest` (the root, for `exec --image`): `lower`, a host
    /// directory (the image's flattened root), is never written; the upper and work
    /// directories live in a private tmpfs that ends with the run.
    Overlay {
        lower: PathBuf,
        dest: PathBuf,
    },
    /// Writes `ld.so.preload` naming `lib` into `etc` on a writable root (an image's
    /// overlay), replacing whatever is there, instead of covering `etc` like [`Preload`].
    ///
    /// [`Preload`]: MountOp::Preload
    PreloadFile {
        etc: PathBuf,
        lib: PathBuf,
    },
}

impl MountOp {
    /// The path inside the sandbox this step creates or covers.
    pub fn dest(&self) -> Option<&std::path::Path> {
        match self {
            MountOp::Tmpfs { dest, .. }
            | MountOp::Bind { dest, .. }
            | MountOp::DevNode { dest, .. }
            | MountOp::Proc { dest }
            | MountOp::Sysfs { dest }
            | MountOp::Devpts { dest }
            | MountOp::Symlink { dest, .. }
            | MountOp::Dir { dest, .. }
            | MountOp::RuntimeFiles { dir: dest, .. }
            | MountOp::File { dest, .. }
            | MountOp::Fifo { dest, .. }
            | MountOp::Mask { dest }
            | MountOp::ReadonlyPath { dest }
            | MountOp::Preload { etc: dest, .. }
            | MountOp::PreloadFile { etc: dest, .. }
            | MountOp::Overlay { dest, .. }
            | MountOp::Readonly { dest } => Some(dest),
            MountOp::ReadonlyRoot => None,
        }
    }
}

/// File modes print as octal strings (`"0755"`) so a printed plan reads like `ls -l`.
pub(crate) mod octal {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{mode:04o}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let text = String::deserialize(d)?;
        u32::from_str_radix(&text, 8).map_err(D::Error::custom)
    }
}
