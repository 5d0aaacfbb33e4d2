//! The mount operations of a plan, run as an ordinary user: files and directories under a
//! temporary staging root, the mount calls written down by a recording fake.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};

use super::apply::{DEVICE_BIND, READ_ONLY};
use super::syscall::Syscall;
use super::{Builder, Layout, MountError};
use crate::plan::MountOp;

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Mount {
        source: Option<PathBuf>,
        target: PathBuf,
        fstype: Option<String>,
        flags: MsFlags,
        data: Option<String>,
    },
    Setattr {
        path: PathBuf,
        recursive: bool,
        set: u64,
        clear: u64,
    },
    MoveMount {
        target: PathBuf,
    },
}

/// Writes every call down; fails the ones `refuse` names by filesystem type.
#[derive(Default)]
struct Recorder {
    calls: RefCell<Vec<Call>>,
    refuse: Vec<&'static str>,
}

impl Syscall for Recorder {
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<(), Errno> {
        if fstype.is_some_and(|t| self.refuse.contains(&t)) {
            return Err(Errno::EPERM);
        }
        self.calls.borrow_mut().push(Call::Mount {
            source: source.map(Path::to_path_buf),
            target: target.to_path_buf(),
            fstype: fstype.map(str::to_string),
            flags,
            data: data.map(str::to_string),
        });
        Ok(())
    }

    fn mount_setattr(
        &self,
        path: &Path,
        recursive: bool,
        set: u64,
        clear: u64,
    ) -> Result<(), Errno> {
        self.calls.borrow_mut().push(Call::Setattr {
            path: path.to_path_buf(),
            recursive,
            set,
            clear,
        });
        Ok(())
    }

    fn move_mount(&self, _: std::os::fd::BorrowedFd, target: &Path) -> Result<(), Errno> {
        self.calls.borrow_mut().push(Call::MoveMount {
            target: target.to_path_buf(),
        });
        Ok(())
    }

    fn pivot_root(&self, _: &Path, _: &Path) -> Result<(), Errno> {
        Err(Errno::EPERM)
    }

    fn umount2(&self, _: &Path, _: MntFlags) -> Result<(), Errno> {
        Err(Errno::EPERM)
    }
}

/// The host's root as the source side, `staging` as the staging root.
fn layout_in(staging: &tempfile::TempDir) -> Layout {
    Layout {
        staging: staging.path().to_path_buf(),
        oldroot: "/".into(),
        newroot: staging.path().join("newroot"),
        private_root: false,
    }
}

/// Runs `ops` with the host's root as the source side and a temporary staging root.
fn run(rec: &Recorder, ops: &[MountOp]) -> (tempfile::TempDir, Result<(), MountError>) {
    let staging = tempfile::tempdir().unwrap();
    let layout = layout_in(&staging);
    let result = Builder::new(rec, layout).run(ops);
    (staging, result)
}

#[test]
fn host_device_nodes_are_bound_read_only() {
    let rec = Recorder::default();
    let ops = [MountOp::DevNode {
        src: "/dev/null".into(),
        dest: "/dev/null".into(),
    }];
    let (staging, result) = run(&rec, &ops);
    result.unwrap();
    let target = staging.path().join("newroot/dev/null");
    assert!(target.is_file(), "an empty file as the mount point");
    assert_eq!(
        *rec.calls.borrow(),
        vec![
            Call::Mount {
                source: Some("/dev/null".into()),
                target: target.clone(),
                fstype: None,
                flags: MsFlags::MS_BIND,
                data: None,
            },
            Call::Setattr {
                path: target,
                recursive: false,
                set: DEVICE_BIND,
                clear: 0,
            },
        ]
    );
    assert_ne!(DEVICE_BIND & crate::sys::MOUNT_ATTR_RDONLY, 0);
    assert_eq!(
        DEVICE_BIND & crate::sys::MOUNT_ATTR_NODEV,
        0,
        "the device must work"
    );
}

#[test]
fn binds_are_recursive_and_read_only_when_asked() {
    let rec = Recorder::default();
    let ops = [
        MountOp::Tmpfs {
            dest: "/tmp".into(),
            mode: 0o1777,
            size: Some(4096),
        },
        MountOp::Bind {
            src: "/usr".into(),
            dest: "/usr".into(),
            readonly: true,
            idmap: None,
        },
    ];
    let (staging, result) = run(&rec, &ops);
    result.unwrap();
    let calls = rec.calls.borrow();
    assert_eq!(
        calls[0],
        Call::Mount {
            source: Some("tmpfs".into()),
            target: staging.path().join("newroot/tmp"),
            fstype: Some("tmpfs".into()),
            flags: MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            data: Some("mode=1777,size=4096".into()),
        }
    );
    assert!(
        matches!(&calls[1], Call::Mount { flags, .. } if *flags == MsFlags::MS_BIND | MsFlags::MS_REC)
    );
    assert!(matches!(&calls[2], Call::Setattr { recursive: true, set, .. } if *set == READ_ONLY));
}

#[test]
fn a_link_in_a_mount_target_is_refused_before_any_mount() {
    let rec = Recorder::default();
    let ops = [
        MountOp::Symlink {
            target: "/etc".into(),
            dest: "/work/out".into(),
        },
        MountOp::Tmpfs {
            dest: "/work/out/x".into(),
            mode: 0o755,
            size: None,
        },
    ];
    let (_staging, result) = run(&rec, &ops);
    match result {
        Err(MountError::Link { link, .. }) => assert_eq!(link, Path::new("/work/out")),
        other => panic!("{other:?}"),
    }
    assert!(rec.calls.borrow().is_empty());
}

#[test]
fn a_refused_sysfs_falls_back_to_the_hosts_read_only() {
    let rec = Recorder {
        refuse: vec!["sysfs"],
        ..Recorder::default()
    };
    let (staging, result) = run(
        &rec,
        &[MountOp::Sysfs {
            dest: "/sys".into(),
        }],
    );
    result.unwrap();
    let calls = rec.calls.borrow();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        matches!(&calls[0], Call::Mount { source: Some(s), target, .. }
        if s == Path::new("/sys") && *target == staging.path().join("newroot/sys"))
    );
    assert!(matches!(&calls[1], Call::Setattr { set, .. } if *set == READ_ONLY));
}

/// The network namespace made beside init is joined right before `sysfs` is mounted (sysfs
/// shows the namespace of the mounter), once; with no `sysfs` in the plan, after the last
/// operation; a failed join stops the build there.
#[test]
fn the_network_namespace_is_joined_once_before_sysfs() {
    let tmpfs = |dest: &str| MountOp::Tmpfs {
        dest: dest.into(),
        mode: 0o755,
        size: None,
    };
    let ops = [
        tmpfs("/tmp"),
        MountOp::Sysfs {
            dest: "/sys".into(),
        },
        tmpfs("/run"),
    ];
    for (ops, joined_after) in [(&ops[..], 1), (&ops[..1], 1)] {
        let rec = Recorder::default();
        let staging = tempfile::tempdir().unwrap();
        let layout = layout_in(&staging);
        let joins = RefCell::new(Vec::new());
        let join = || {
            joins.borrow_mut().push(rec.calls.borrow().len());
            Ok(())
        };
        Builder::new(&rec, layout)
            .run_joining(ops, Some(&join))
            .unwrap();
        assert_eq!(*joins.borrow(), [joined_after], "{ops:?}");
    }
    let rec = Recorder::default();
    let staging = tempfile::tempdir().unwrap();
    let layout = layout_in(&staging);
    let refused = || Err(Errno::EPERM);
    let e = Builder::new(&rec, layout)
        .run_joining(&ops, Some(&refused))
        .unwrap_err();
    assert!(matches!(e, MountError::Network(Errno::EPERM)), "{e}");
    assert_eq!(
        rec.calls.borrow().len(),
        1,
        "nothing mounted after the failed join"
    );
}

#[test]
fn generated_files_live_beside_the_new_root_and_are_bound_read_only() {
    let rec = Recorder::default();
    let ops = [MountOp::File {
        dest: "/proc/loadavg".into(),
        contents: "0.00 0.00 0.00 1/1 1\n".into(),
    }];
    let (staging, result) = run(&rec, &ops);
    result.unwrap();
    let written = staging.path().join("generated");
    let view = staging.path().join("generated-ro");
    assert_eq!(
        std::fs::read_to_string(written.join("0-proc_loadavg")).unwrap(),
        "0.00 0.00 0.00 1/1 1\n"
    );
    // The written directory is bound read-only once; each file is bound from that view
    // (inheriting its flags), with no mount_setattr of its own.
    let calls = rec.calls.borrow();
    assert_eq!(
        calls[..2],
        [
            Call::Mount {
                source: Some(written.clone()),
                target: view.clone(),
                fstype: None,
                flags: MsFlags::MS_BIND,
                data: None,
            },
            Call::Setattr {
                path: view.clone(),
                recursive: false,
                set: READ_ONLY,
                clear: 0,
            },
        ]
    );
    assert_eq!(
        calls[2..],
        [Call::Mount {
            source: Some(view.join("0-proc_loadavg")),
            target: staging.path().join("newroot/proc/loadavg"),
            fstype: None,
            flags: MsFlags::MS_BIND,
            data: None,
        }]
    );
}

/// Pinned files with the same contents (the three CPU lists of /sys) are one file written
/// once and bound at each destination; different contents each get a file of their own,
/// even where their flattened names would be the same (`/a_b` and `/a/b`), all mode 0444.
#[test]
fn generated_files_of_equal_contents_are_written_once_and_bound_at_each_destination() {
    let rec = Recorder::default();
    let file = |dest: &str, contents: &str| MountOp::File {
        dest: dest.into(),
        contents: contents.into(),
    };
    let ops = [
        file("/sys/devices/system/cpu/online", "0-1\n"),
        file("/sys/devices/system/cpu/possible", "0-1\n"),
        file("/proc/a_b", "one\n"),
        file("/proc/a/b", "two\n"),
        file("/sys/devices/system/cpu/present", "0-1\n"),
    ];
    let (staging, result) = run(&rec, &ops);
    result.unwrap();
    let written = staging.path().join("generated");
    let mut names: Vec<_> = std::fs::read_dir(&written)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "empty" && n != "null")
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "0-sys_devices_system_cpu_online",
            "1-proc_a_b",
            "2-proc_a_b"
        ]
    );
    for (name, contents) in [
        ("0-sys_devices_system_cpu_online", "0-1\n"),
        ("1-proc_a_b", "one\n"),
        ("2-proc_a_b", "two\n"),
    ] {
        let path = written.join(name);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), contents);
        let mode = std::os::unix::fs::PermissionsExt::mode(&path.metadata().unwrap().permissions());
        assert_eq!(mode & 0o7777, 0o444, "{name}");
    }
    let view = staging.path().join("generated-ro");
    let newroot = staging.path().join("newroot");
    let binds: Vec<_> = rec.calls.borrow()[2..]
        .iter()
        .map(|c| match c {
            Call::Mount {
                source: Some(s),
                target,
                flags,
                ..
            } if *flags == MsFlags::MS_BIND => (s.clone(), target.clone()),
            other => panic!("not a plain bind: {other:?}"),
        })
        .collect();
    let cpus = view.join("0-sys_devices_system_cpu_online");
    assert_eq!(
        binds,
        [
            (cpus.clone(), newroot.join("sys/devices/system/cpu/online")),
            (
                cpus.clone(),
                newroot.join("sys/devices/system/cpu/possible")
            ),
            (view.join("1-proc_a_b"), newroot.join("proc/a_b")),
            (view.join("2-proc_a_b"), newroot.join("proc/a/b")),
            (cpus, newroot.join("sys/devices/system/cpu/present")),
        ]
    );
}

/// A generated file is always a new one: a file already at its name is an error, not
/// truncated and rewritten (a bind made from it earlier would show the new contents).
#[test]
fn a_generated_file_is_never_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    super::write_new_file(&path, b"first\n", 0o444, 0o022, Path::new("/x")).unwrap();
    let err = super::write_new_file(&path, b"second\n", 0o444, 0o022, Path::new("/x"));
    assert!(
        matches!(
            err,
            Err(MountError::Op {
                errno: Errno::EEXIST,
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "first\n");
    // An empty file is made without a write, with its mode.
    let empty = dir.path().join("e");
    super::write_new_file(&empty, b"", 0o444, 0o077, Path::new("/y")).unwrap();
    let meta = empty.metadata().unwrap();
    assert_eq!(meta.len(), 0);
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
        0o444
    );
}

#[test]
fn masks_bind_an_empty_directory_and_the_null_device_from_one_read_only_view() {
    let rec = Recorder::default();
    let staging = tempfile::tempdir().unwrap();
    let layout = layout_in(&staging);
    let newroot = layout.newroot.clone();
    for dir in ["proc/acpi", "proc/scsi", "proc/self/fd"] {
        std::fs::create_dir_all(newroot.join(dir)).unwrap();
    }
    std::fs::write(newroot.join("proc/kcore"), "").unwrap();
    std::fs::write(newroot.join("proc/keys"), "").unwrap();
    let ops: Vec<_> = ["/proc/acpi", "/proc/kcore", "/proc/scsi", "/proc/keys"]
        .into_iter()
        .map(|d| MountOp::Mask { dest: d.into() })
        .collect();
    Builder::new(&rec, layout).run(&ops).unwrap();
    let view = staging.path().join("generated-ro");
    let calls = rec.calls.borrow();
    let binds: Vec<_> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Mount {
                source: Some(s),
                target,
                fstype: None,
                flags,
                ..
            } if *flags == MsFlags::MS_BIND => Some((s.clone(), target.clone())),
            _ => None,
        })
        .collect();
    let null = view.join("null");
    let empty = view.join("empty");
    let at = |d: &str| newroot.join(d);
    // The view, then one plain bind per mask; the null device is bound onto the view (from
    // this process's descriptor) before the first file's mask.
    assert_eq!(binds[0].1, view);
    assert_eq!(binds[1], (empty.clone(), at("proc/acpi")));
    assert_eq!(binds[2].1, null);
    assert!(binds[2].0.starts_with(newroot.join("proc/self/fd")));
    assert_eq!(
        binds[3..],
        [
            (null.clone(), at("proc/kcore")),
            (empty.clone(), at("proc/scsi")),
            (null.clone(), at("proc/keys")),
        ]
    );
    // Only the view and the null device get attributes; no tmpfs is mounted.
    let setattrs: Vec<_> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Setattr { path, set, .. } => Some((path.clone(), *set)),
            _ => None,
        })
        .collect();
    assert_eq!(setattrs, [(view.clone(), READ_ONLY), (null, READ_ONLY)]);
    assert!(!calls.iter().any(|c| matches!(
        c,
        Call::Mount {
            fstype: Some(_),
            ..
        }
    )));
    let empty_dir = staging.path().join("generated/empty");
    assert_eq!(std::fs::read_dir(&empty_dir).unwrap().count(), 0);
    let mode = |p: &Path| {
        std::os::unix::fs::PermissionsExt::mode(&p.metadata().unwrap().permissions()) & 0o777
    };
    assert_eq!(mode(&empty_dir), 0o555);
    assert_eq!(mode(&staging.path().join("generated")), 0o755);
}

#[test]
fn a_missing_mask_target_is_left_alone() {
    let rec = Recorder::default();
    let (_staging, result) = run(
        &rec,
        &[MountOp::Mask {
            dest: "/proc/not-on-this-kernel".into(),
        }],
    );
    result.unwrap();
    assert!(rec.calls.borrow().is_empty());
}

#[test]
fn a_root_built_in_place_is_bound_on_itself_and_made_private_before_anything_else() {
    let staging = tempfile::tempdir().unwrap();
    let rootfs = tempfile::tempdir().unwrap();
    let ops = [
        MountOp::RootBind {
            src: rootfs.path().to_path_buf(),
        },
        MountOp::Proc {
            dest: "/proc".into(),
        },
    ];
    for private_root in [false, true] {
        let rec = Recorder::default();
        let layout = Layout {
            staging: staging.path().to_path_buf(),
            oldroot: "/".into(),
            newroot: rootfs.path().to_path_buf(),
            private_root,
        };
        Builder::new(&rec, layout).run(&ops).unwrap();
        let calls = rec.calls.borrow();
        let Call::Mount { source, target, .. } = &calls[0] else {
            panic!("{calls:?}")
        };
        assert_eq!(
            (source.as_deref(), target.as_path()),
            (Some(rootfs.path()), rootfs.path())
        );
        let private = Call::Mount {
            source: None,
            target: rootfs.path().to_path_buf(),
            fstype: None,
            flags: MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            data: None,
        };
        assert_eq!(calls[1] == private, private_root, "{calls:?}");
        // The proc mount lands inside the bundle's root, not in a staging root.
        assert!(
            calls
                .iter()
                .any(|c| matches!(c, Call::Mount { target, fstype: Some(t), .. }
            if t == "proc" && target == &rootfs.path().join("proc"))),
            "{calls:?}"
        );
    }
}

/// An idmapped bind of `/usr` at `dest` with the flag words `flags`.
fn idmapped_bind(dest: &str, recursive: bool, flags: &[&str]) -> MountOp {
    MountOp::FlagBind {
        src: "/usr".into(),
        dest: dest.into(),
        recursive,
        flags: flags.iter().map(|f| f.to_string()).collect(),
        idmap: Some(crate::plan::mounts::MountIdmap {
            uid: vec![crate::plan::IdMap::new(0, 100000, 65536)],
            gid: Vec::new(),
            userns: None,
            recursive: false,
        }),
    }
}

/// A stand-in for a detached tree made by the creator.
fn tree(dest: &str) -> crate::sandbox::isolation::idmap::Tree {
    crate::sandbox::isolation::idmap::Tree {
        dest: dest.into(),
        fd: std::fs::File::open("/dev/null").unwrap().into(),
    }
}

#[test]
fn an_idmapped_bind_attaches_the_creators_tree_made_private() {
    let rec = Recorder::default();
    let staging = tempfile::tempdir().unwrap();
    let layout = layout_in(&staging);
    let ops = [
        idmapped_bind("/data", true, &["ro", "rslave"]),
        idmapped_bind("/more", false, &[]),
    ];
    Builder::new(&rec, layout)
        .with_trees(vec![tree("/data"), tree("/more")])
        .run(&ops)
        .unwrap();
    let (data, more) = (
        staging.path().join("newroot/data"),
        staging.path().join("newroot/more"),
    );
    assert!(
        data.is_dir(),
        "a directory as the mount point of a directory"
    );
    let private = |target: &PathBuf, flags| Call::Mount {
        source: None,
        target: target.clone(),
        fstype: None,
        flags,
        data: None,
    };
    assert_eq!(
        *rec.calls.borrow(),
        vec![
            Call::MoveMount {
                target: data.clone()
            },
            private(&data, MsFlags::MS_PRIVATE | MsFlags::MS_REC),
            Call::Setattr {
                path: data.clone(),
                recursive: true,
                set: crate::sys::MOUNT_ATTR_RDONLY,
                clear: 0,
            },
            private(&data, MsFlags::MS_SLAVE | MsFlags::MS_REC),
            Call::MoveMount {
                target: more.clone()
            },
            private(&more, MsFlags::MS_PRIVATE),
            Call::Setattr {
                path: more,
                recursive: false,
                set: 0,
                clear: 0,
            },
        ],
        "no plain bind: the tree is attached, then the bind's flags and propagation"
    );
}

#[test]
fn an_idmapped_bind_without_its_tree_is_refused_not_bound_plainly() {
    for trees in [Vec::new(), vec![tree("/elsewhere")]] {
        let rec = Recorder::default();
        let staging = tempfile::tempdir().unwrap();
        let layout = layout_in(&staging);
        let ops = [idmapped_bind("/data", false, &[])];
        let result = Builder::new(&rec, layout).with_trees(trees).run(&ops);
        match result {
            Err(e @ MountError::NoTree { .. }) => assert_eq!(
                e.to_string(),
                "idmapped mount on /data: no idmapped tree was made for it by the creator"
            ),
            other => panic!("{other:?}"),
        }
        assert!(rec.calls.borrow().is_empty());
    }
}
