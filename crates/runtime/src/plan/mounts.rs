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
    /// With `idmap` (a root caller's work tree and binds, `idmaps`), the creator, on the
    /// host, clones `src` as a detached tree with the id mapping applied, opened without
    /// following a link, and init attaches that tree here.
    Bind {
        src: PathBuf,
        dest: PathBuf,
        readonly: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idmap: Option<MountIdmap>,
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
    /// OCI: a recursive bind of the bundle's root filesystem as the new root (writable
    /// unless a [`MountOp::ReadonlyRoot`] follows), instead of a skeleton tmpfs.
    RootBind {
        src: PathBuf,
    },
    /// OCI: a filesystem mount (`proc`, `tmpfs`, `sysfs`, `devpts`, `mqueue`, ...) with
    /// flag words ([`flag_word`]) and filesystem data.
    Fs {
        fstype: String,
        source: String,
        dest: PathBuf,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        flags: Vec<String>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        data: String,
    },
    /// OCI: a bind (recursive with `rbind`) with flag words applied to it afterwards
    /// (`ro`, `nosuid`, `nodev`, `noexec`, propagation). With `idmap` it is an idmapped
    /// mount: the creator clones `src` as a detached tree with the id mapping applied
    /// (`open_tree`, `mount_setattr(MOUNT_ATTR_IDMAP)`), and init moves that tree here.
    FlagBind {
        src: PathBuf,
        dest: PathBuf,
        recursive: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        flags: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idmap: Option<MountIdmap>,
    },
    /// OCI: writes `value` to `/proc/sys/KEY` (dots as slashes) before /proc/sys is made
    /// read-only.
    Sysctl {
        key: String,
        value: String,
    },
    /// OCI `linux.devices`: a device node made with mknod (or, where that is refused, the
    /// host's node of the same path bound).
    Device {
        dest: PathBuf,
        /// `c`, `b`, `u` or `p`.
        kind: char,
        major: i64,
        minor: i64,
        #[serde(with = "octal")]
        mode: u32,
        uid: u32,
        gid: u32,
    },
    /// OCI `linux.rootfsPropagation`: the propagation of the new root.
    RootPropagation {
        flag: String,
    },
    /// A fresh writable overlay at `dest` (the root, for `exec --image`): `lower`, a host
    /// directory (the image's flattened root), is never written; the upper and work
    /// directories live in a private tmpfs that ends with the run.
    Overlay {
        lower: PathBuf,
        dest: PathBuf,
        /// `--keep-changes`: a host directory that holds the upper (`upper/`) and work
        /// (`work/`) directories, so the changes outlive the run; else a tmpfs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keep: Option<PathBuf>,
        /// The id mapping of the lower layer (a root caller's, `idmaps`): the creator clones
        /// `lower` (and `keep`, made by it) as detached trees, and init mounts the overlay
        /// over them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idmap: Option<MountIdmap>,
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

/// The id mapping of an idmapped bind (OCI `mounts[].uidMappings`/`gidMappings`, or the
/// container's own for a bare `idmap`/`ridmap` option). A file whose owner on the source
/// filesystem is `inside` + k appears (and a file created through the mount is stored) as
/// host id `outside` + k; ids outside every range appear as the overflow id and cannot be
/// written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountIdmap {
    /// The lines of the mapping user namespace's `uid_map` (empty with `userns`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uid: Vec<super::IdMap>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gid: Vec<super::IdMap>,
    /// A user namespace joined by path whose mapping is used instead (a bare `idmap` in a
    /// container that joins its user namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub userns: Option<PathBuf>,
    /// `ridmap`: the mapping applies to every mount of a recursive bind, not only its top.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recursive: bool,
}

/// What one OCI mount option word means to `mount(2)`: flags it sets, flags it clears, or a
/// propagation change. `None`: not a flag word (filesystem data, e.g. `mode=0755`).
pub fn flag_word(word: &str) -> Option<FlagWord> {
    use libc::*;
    let set = |f: u64| Some(FlagWord::Set(f));
    let clear = |f: u64| Some(FlagWord::Clear(f));
    let prop = |f: u64| Some(FlagWord::Propagation(f));
    match word {
        "ro" => set(MS_RDONLY),
        "rw" => clear(MS_RDONLY),
        "nosuid" => set(MS_NOSUID),
        "suid" => clear(MS_NOSUID),
        "nodev" => set(MS_NODEV),
        "dev" => clear(MS_NODEV),
        "noexec" => set(MS_NOEXEC),
        "exec" => clear(MS_NOEXEC),
        "sync" => set(MS_SYNCHRONOUS),
        "async" => clear(MS_SYNCHRONOUS),
        "dirsync" => set(MS_DIRSYNC),
        "mand" => set(MS_MANDLOCK),
        "nomand" => clear(MS_MANDLOCK),
        "noatime" => set(MS_NOATIME),
        "atime" => clear(MS_NOATIME),
        "nodiratime" => set(MS_NODIRATIME),
        "diratime" => clear(MS_NODIRATIME),
        "relatime" => set(MS_RELATIME),
        "norelatime" => clear(MS_RELATIME),
        "strictatime" => set(MS_STRICTATIME),
        "nostrictatime" => clear(MS_STRICTATIME),
        "nosymfollow" => set(0x100),
        "private" => prop(MS_PRIVATE),
        "rprivate" => prop(MS_PRIVATE | MS_REC),
        "shared" => prop(MS_SHARED),
        "rshared" => prop(MS_SHARED | MS_REC),
        "slave" => prop(MS_SLAVE),
        "rslave" => prop(MS_SLAVE | MS_REC),
        "unbindable" => prop(MS_UNBINDABLE),
        "runbindable" => prop(MS_UNBINDABLE | MS_REC),
        _ => None,
    }
}

/// See [`flag_word`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagWord {
    Set(u64),
    Clear(u64),
    Propagation(u64),
}

/// The flags and the propagation change of a list of flag words (later words win).
pub fn flag_bits(words: &[String]) -> (u64, Option<u64>) {
    let (mut flags, mut propagation) = (0u64, None);
    for w in words {
        match flag_word(w) {
            Some(FlagWord::Set(f)) => flags |= f,
            Some(FlagWord::Clear(f)) => flags &= !f,
            Some(FlagWord::Propagation(p)) => propagation = Some(p),
            None => {}
        }
    }
    (flags, propagation)
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
            | MountOp::Readonly { dest }
            | MountOp::Fs { dest, .. }
            | MountOp::FlagBind { dest, .. }
            | MountOp::PreloadFile { etc: dest, .. }
            | MountOp::Overlay { dest, .. }
            | MountOp::Device { dest, .. } => Some(dest),
            MountOp::ReadonlyRoot
            | MountOp::RootBind { .. }
            | MountOp::Sysctl { .. }
            | MountOp::RootPropagation { .. } => None,
        }
    }
}

/// File modes print as octal strings (`"0755"`) so a printed plan reads like `ls -l`.
pub(crate) mod octal {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{mode:04o}"))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let text = String::deserialize(d)?;
        u32::from_str_radix(&text, 8).map_err(D::Error::custom)
    }
}
