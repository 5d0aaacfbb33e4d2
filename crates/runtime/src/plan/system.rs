//! The mounts every sandbox gets whatever its root: /proc, /sys, a minimal /dev, private
//! /run, /tmp and HOME, and the determinism layer's runtime files.

use std::path::Path;

use super::{MountOp, ENTROPY_FIFO};
use crate::determinism::clock::{PRELOAD_PATH, RUN_DIR};
use crate::determinism::{ClockMode, ClockPlan};

/// The mounts every sandbox gets: /proc, /sys, a minimal /dev, private /run, /tmp and HOME.
/// With seeded entropy, /dev/urandom and /dev/random are one FIFO that init keeps filled
/// from the seeded stream (read-only: a writer would block once the pipe is full).
pub(super) fn system_mounts(seeded: bool, tmp_size: Option<u64>) -> Vec<MountOp> {
    let mut ops = vec![
        MountOp::Proc {
            dest: "/proc".into(),
        },
        MountOp::Sysfs {
            dest: "/sys".into(),
        },
        MountOp::Tmpfs {
            dest: "/dev".into(),
            mode: 0o755,
            size: None,
        },
    ];
    ops.extend(device_nodes(seeded));
    ops.push(MountOp::Devpts {
        dest: "/dev/pts".into(),
    });
    ops.extend(dev_links());
    // A directory of /dev's tmpfs, as bubblewrap makes it: the same filesystem type, and no
    // superblock of its own to make and tear down per run (issue 20).
    ops.push(MountOp::Dir {
        dest: "/dev/shm".into(),
        mode: 0o1777,
    });
    ops.push(MountOp::Tmpfs {
        dest: "/run".into(),
        mode: 0o755,
        size: None,
    });
    ops.push(MountOp::Tmpfs {
        dest: "/tmp".into(),
        mode: 0o1777,
        size: tmp_size,
    });
    ops.push(MountOp::Tmpfs {
        dest: "/home".into(),
        mode: 0o755,
        size: None,
    });
    ops.push(MountOp::Dir {
        dest: crate::determinism::HOME_DIR.into(),
        mode: 0o755,
    });
    ops
}

/// `ops` with `/sys` and everything placed under it moved after the rest, in their order.
/// The network namespace is made beside init while it builds the root and joined right
/// before the `sysfs` mount (which needs it): the later that mount comes, the less init
/// waits for it.
pub(super) fn sysfs_last(ops: Vec<MountOp>) -> Vec<MountOp> {
    let (mut rest, sys): (Vec<_>, Vec<_>) = ops
        .into_iter()
        .partition(|op| !op.dest().is_some_and(|d| d.starts_with("/sys")));
    rest.extend(sys);
    rest
}

/// The device nodes of every sandbox and OCI container (runc's list), as binds of the
/// host's nodes; with seeded entropy /dev/urandom and /dev/random are one FIFO that init
/// keeps filled from the seeded stream (read-only: a writer would block once it is full).
pub fn device_nodes(seeded: bool) -> Vec<MountOp> {
    let mut ops = Vec::new();
    let random: &[&str] = if seeded { &[] } else { &["random", "urandom"] };
    for node in ["null", "zero", "full", "tty"].iter().chain(random) {
        ops.push(MountOp::DevNode {
            src: Path::new("/dev").join(node),
            dest: Path::new("/dev").join(node),
        });
    }
    if seeded {
        ops.push(MountOp::Fifo {
            dest: ENTROPY_FIFO.into(),
            mode: 0o444,
            links: vec!["/dev/random".into()],
        });
    }
    ops
}

/// The links of a fresh `/dev` (exec sandboxes and OCI containers alike): `ptmx` into the
/// devpts instance, and `fd`, `stdin`, `stdout`, `stderr` into `/proc/self/fd`.
pub(crate) fn dev_links() -> Vec<MountOp> {
    [
        ("pts/ptmx", "/dev/ptmx"),
        ("/proc/self/fd", "/dev/fd"),
        ("/proc/self/fd/0", "/dev/stdin"),
        ("/proc/self/fd/1", "/dev/stdout"),
        ("/proc/self/fd/2", "/dev/stderr"),
    ]
    .into_iter()
    .map(|(target, dest)| MountOp::Symlink {
        target: target.into(),
        dest: dest.into(),
    })
    .collect()
}

/// The runtime page (clock, seed) and preload library in a private directory of `/run`, and
/// `/etc/ld.so.preload` naming the library. The directory stays writable only in `tick` mode
/// (the shared read counter).
pub(super) fn runtime_mounts(clock: Option<ClockPlan>, seed: Option<u64>) -> Vec<MountOp> {
    // A directory of the sandbox's own /run tmpfs, bound on itself read-only once written:
    // a bind, not a tmpfs of its own (a superblock made and torn down per run, issue 20).
    let mut ops = vec![
        MountOp::Dir {
            dest: RUN_DIR.into(),
            mode: 0o755,
        },
        MountOp::RuntimeFiles {
            dir: RUN_DIR.into(),
            clock,
            seed,
        },
        MountOp::Preload {
            etc: "/etc".into(),
            lib: PRELOAD_PATH.into(),
        },
    ];
    let tick = clock.is_some_and(|c| matches!(c.mode, ClockMode::Tick { .. }));
    if !tick {
        ops.push(MountOp::ReadonlyPath {
            dest: RUN_DIR.into(),
        });
    }
    ops
}

/// The private tmpfs at `RUN_DIR` holding the runtime page and the preload library, for OCI
/// containers (whose `/run` is the bundle's; an exec sandbox's is a directory of its own
/// `/run` tmpfs, [`runtime_mounts`]).
pub(crate) fn runtime_dir(clock: Option<ClockPlan>, seed: Option<u64>) -> Vec<MountOp> {
    vec![
        MountOp::Tmpfs {
            dest: RUN_DIR.into(),
            mode: 0o755,
            size: Some(1 << 20),
        },
        MountOp::RuntimeFiles {
            dir: RUN_DIR.into(),
            clock,
            seed,
        },
    ]
}

/// An OCI container's runtime tmpfs made read-only once written, except in `tick` mode (its
/// page holds the shared read counter).
pub(crate) fn runtime_dir_readonly(tick: bool) -> Option<MountOp> {
    (!tick).then(|| MountOp::Readonly {
        dest: RUN_DIR.into(),
    })
}
