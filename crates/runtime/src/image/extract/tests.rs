//! Unpacking, whiteouts, and every malicious-layer case. Layers are built here with raw tar
//! headers, so names the `tar` crate's builder would refuse (`..`) can be written.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;

/// One layer under construction.
struct Layer {
    builder: tar::Builder<Vec<u8>>,
}

impl Layer {
    fn new() -> Self {
        Layer {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    fn header(
        path: &str,
        kind: tar::EntryType,
        size: u64,
        mode: u32,
        link: Option<&str>,
    ) -> tar::Header {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(mode);
        h.set_mtime(1_700_000_000);
        let bytes = h.as_mut_bytes();
        bytes[..100].fill(0);
        bytes[..path.len()].copy_from_slice(path.as_bytes());
        if let Some(link) = link {
            bytes[157..257].fill(0);
            bytes[157..157 + link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_cksum();
        h
    }

    fn add(
        mut self,
        path: &str,
        kind: tar::EntryType,
        data: &[u8],
        mode: u32,
        link: Option<&str>,
    ) -> Self {
        let h = Self::header(path, kind, data.len() as u64, mode, link);
        self.builder.append(&h, data).unwrap();
        self
    }

    fn file(self, path: &str, data: &str) -> Self {
        self.add(path, tar::EntryType::Regular, data.as_bytes(), 0o644, None)
    }

    fn file_mode(self, path: &str, mode: u32) -> Self {
        self.add(path, tar::EntryType::Regular, b"x", mode, None)
    }

    fn dir(self, path: &str) -> Self {
        self.add(path, tar::EntryType::Directory, b"", 0o755, None)
    }

    fn dir_mode(self, path: &str, mode: u32) -> Self {
        self.add(path, tar::EntryType::Directory, b"", mode, None)
    }

    fn symlink(self, path: &str, target: &str) -> Self {
        self.add(path, tar::EntryType::Symlink, b"", 0o777, Some(target))
    }

    fn hardlink(self, path: &str, target: &str) -> Self {
        self.add(path, tar::EntryType::Link, b"", 0o644, Some(target))
    }

    fn pax(mut self, key: &str, value: &[u8]) -> Self {
        self.builder.append_pax_extensions([(key, value)]).unwrap();
        self
    }

    fn bytes(self) -> Vec<u8> {
        self.builder.into_inner().unwrap()
    }
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        Fixture { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    fn unpack_with(
        &self,
        layers: Vec<Vec<u8>>,
        opts: Options,
        limits: Limits,
    ) -> Result<(), ExtractError> {
        self.unpack_devices(layers, opts, limits).map(drop)
    }

    /// Unpacks, returning the device nodes skipped.
    fn unpack_devices(
        &self,
        layers: Vec<Vec<u8>>,
        opts: Options,
        limits: Limits,
    ) -> Result<SkippedDevices, ExtractError> {
        let mut x = Extractor::new(&self.root(), opts, limits)?;
        for layer in layers {
            x.layer(&layer[..])?;
        }
        x.finish()
    }

    fn unpack(&self, layers: Vec<Vec<u8>>) -> Result<(), ExtractError> {
        self.unpack_with(layers, Options::default(), Limits::default())
    }

    /// Every path below the fixture (root and outside), for "nothing else changed" checks.
    fn listing(&self) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            let mut names: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
            names.sort_by_key(|e| e.file_name());
            for e in names {
                let p = e.path();
                let meta = std::fs::symlink_metadata(&p).unwrap();
                out.push(format!(
                    "{} {:o}",
                    p.strip_prefix(base).unwrap().display(),
                    meta.mode()
                ));
                if meta.is_dir() {
                    walk(&p, base, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), self.dir.path(), &mut out);
        out
    }
}

#[track_caller]
fn refused(result: Result<(), ExtractError>, needle: &str) -> ExtractError {
    let err = result.expect_err("the layer must be refused");
    assert!(err.to_string().contains(needle), "{needle:?} not in {err}");
    err
}

#[test]
fn files_dirs_links_and_fifos_unpack_with_modes_and_times() {
    let f = Fixture::new();
    let layer = Layer::new()
        .dir("usr/")
        .dir("usr/bin/")
        .file("usr/bin/tool", "#!/bin/sh\n")
        .symlink("bin", "usr/bin")
        .hardlink("usr/bin/tool2", "usr/bin/tool")
        .add("run.fifo", tar::EntryType::Fifo, b"", 0o600, None)
        .file("implicit/parent/file", "x")
        .dir_mode("ro/", 0o555)
        .file("ro/inside", "y")
        .bytes();
    f.unpack(vec![layer]).unwrap();
    let root = f.root();
    assert_eq!(
        std::fs::read_to_string(root.join("usr/bin/tool")).unwrap(),
        "#!/bin/sh\n"
    );
    assert_eq!(
        std::fs::read_link(root.join("bin")).unwrap(),
        Path::new("usr/bin")
    );
    let a = std::fs::metadata(root.join("usr/bin/tool")).unwrap();
    let b = std::fs::metadata(root.join("usr/bin/tool2")).unwrap();
    assert_eq!(a.ino(), b.ino());
    assert_eq!(a.mtime(), 1_700_000_000);
    assert!(std::fs::symlink_metadata(root.join("run.fifo"))
        .unwrap()
        .file_type()
        .is_fifo_like());
    assert_eq!(
        std::fs::read_to_string(root.join("implicit/parent/file")).unwrap(),
        "x"
    );
    let ro = std::fs::metadata(root.join("ro")).unwrap();
    assert_eq!(ro.permissions().mode() & 0o7777, 0o555);
    assert_eq!(ro.mtime(), 1_700_000_000);
    std::fs::set_permissions(root.join("ro"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for std::fs::FileType {
    fn is_fifo_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_fifo(self)
    }
}

#[test]
fn later_layers_replace_and_whiteouts_remove() {
    let f = Fixture::new();
    let lower = Layer::new()
        .file("etc/keep", "1")
        .file("etc/gone", "1")
        .file("data/a", "1")
        .file("data/sub/b", "1")
        .file("tree/x/y", "1")
        .file("swap", "file")
        .bytes();
    let upper = Layer::new()
        .file("etc/.wh.gone", "")
        .dir("data/")
        .file("data/.wh..wh..opq", "")
        .file("data/new", "2")
        .file(".wh.tree", "")
        .dir("swap/")
        .file("swap/inside", "dir now")
        .file(".wh.never-existed", "")
        .file("etc/keep", "2")
        .bytes();
    f.unpack(vec![lower, upper]).unwrap();
    let root = f.root();
    assert_eq!(std::fs::read_to_string(root.join("etc/keep")).unwrap(), "2");
    assert!(!root.join("etc/gone").exists());
    assert!(!root.join("etc/.wh.gone").exists());
    assert!(!root.join("data/a").exists());
    assert!(!root.join("data/sub").exists());
    assert_eq!(std::fs::read_to_string(root.join("data/new")).unwrap(), "2");
    assert!(!root.join("data/.wh..wh..opq").exists());
    assert!(!root.join("tree").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("swap/inside")).unwrap(),
        "dir now"
    );
}

#[test]
fn opaque_marker_keeps_this_layers_entries_whatever_their_order() {
    let f = Fixture::new();
    let lower = Layer::new()
        .file("d/old", "1")
        .file("d/sub/old", "1")
        .bytes();
    // The layer's own entries come before the marker; the lower `d/sub/old` still goes.
    let upper = Layer::new()
        .dir("d/")
        .file("d/sub/new", "2")
        .file("d/.wh..wh..opq", "")
        .bytes();
    f.unpack(vec![lower, upper]).unwrap();
    let root = f.root();
    assert!(!root.join("d/old").exists());
    assert!(!root.join("d/sub/old").exists());
    assert!(root.join("d/sub/new").exists());
}

#[test]
fn whiteout_in_the_same_layer_hides_lower_layers_only() {
    let f = Fixture::new();
    let layer = Layer::new().file("a", "mine").file(".wh.a", "").bytes();
    f.unpack(vec![layer]).unwrap();
    assert!(f.root().join("a").exists());
}

#[test]
fn parent_traversal_is_refused() {
    for path in [
        "../evil",
        "a/../../evil",
        "./../evil",
        "/../evil",
        "a/b/../../../evil",
    ] {
        let f = Fixture::new();
        let before = f.listing();
        let layer = Layer::new().file(path, "pwned").bytes();
        refused(f.unpack(vec![layer]), "path traversal");
        assert!(!f.dir.path().join("evil").exists(), "{path}");
        assert_eq!(f.listing(), before, "{path}");
    }
}

#[test]
fn absolute_paths_stay_inside_the_root() {
    let f = Fixture::new();
    let layer = Layer::new()
        .file("/etc/from-abs", "x")
        .file("//twice", "y")
        .bytes();
    f.unpack(vec![layer]).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.root().join("etc/from-abs")).unwrap(),
        "x"
    );
    assert_eq!(
        std::fs::read_to_string(f.root().join("twice")).unwrap(),
        "y"
    );
}

#[test]
fn writes_through_a_relative_symlink_are_refused() {
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    let layer = Layer::new()
        .symlink("escape", "../outside")
        .file("escape/pwned", "x")
        .bytes();
    refused(f.unpack(vec![layer]), "escape is a symbolic link");
    assert!(!f.outside().join("pwned").exists());
}

#[test]
fn writes_through_a_dotdot_symlink_deep_in_the_tree_are_refused() {
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    let layer = Layer::new()
        .dir("a/")
        .dir("a/b/")
        .symlink("a/b/up", "../../../outside")
        .file("a/b/up/pwned", "x")
        .bytes();
    refused(f.unpack(vec![layer]), "a/b/up is a symbolic link");
    assert!(!f.outside().join("pwned").exists());
}

#[test]
fn symlink_to_etc_then_a_file_under_it_is_refused() {
    let f = Fixture::new();
    let layer = Layer::new()
        .symlink("etc2", "/etc")
        .file("etc2/reprorun-pwned", "x")
        .bytes();
    refused(f.unpack(vec![layer]), "etc2 is a symbolic link");
    assert!(!Path::new("/etc/reprorun-pwned").exists());
}

#[test]
fn a_symlink_from_an_earlier_layer_is_not_written_through_either() {
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    let lower = Layer::new()
        .symlink("usr", &f.outside().display().to_string())
        .bytes();
    let upper = Layer::new().file("usr/pwned", "x").bytes();
    refused(f.unpack(vec![lower, upper]), "usr is a symbolic link");
    assert!(!f.outside().join("pwned").exists());
}

#[test]
fn a_file_over_a_symlink_replaces_the_link_not_its_target() {
    let f = Fixture::new();
    std::fs::write(f.outside(), "host file").unwrap();
    let layer = Layer::new()
        .symlink("x", &f.outside().display().to_string())
        .file("x", "image file")
        .bytes();
    f.unpack(vec![layer]).unwrap();
    assert_eq!(std::fs::read_to_string(f.outside()).unwrap(), "host file");
    assert_eq!(
        std::fs::read_to_string(f.root().join("x")).unwrap(),
        "image file"
    );
    assert!(!std::fs::symlink_metadata(f.root().join("x"))
        .unwrap()
        .is_symlink());
}

#[test]
fn hardlink_to_host_etc_passwd_is_refused() {
    let f = Fixture::new();
    let layer = Layer::new().hardlink("passwd", "/etc/passwd").bytes();
    let err = refused(f.unpack(vec![layer]), "does not exist in the image");
    assert!(matches!(err, ExtractError::Hardlink { .. }), "{err}");
    assert!(!f.root().join("passwd").exists());
}

#[test]
fn hardlink_outside_the_root_is_refused() {
    let f = Fixture::new();
    std::fs::write(f.outside(), "host").unwrap();
    let layer = Layer::new().hardlink("h", "../outside").bytes();
    refused(f.unpack(vec![layer]), "outside the image");
    assert!(!f.root().join("h").exists());
    assert_eq!(std::fs::metadata(f.outside()).unwrap().nlink(), 1);
}

#[test]
fn hardlink_through_a_symlink_is_refused() {
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    std::fs::write(f.outside().join("secret"), "host").unwrap();
    let layer = Layer::new()
        .symlink("out", &f.outside().display().to_string())
        .hardlink("h", "out/secret")
        .bytes();
    refused(f.unpack(vec![layer]), "out is a symbolic link");
    assert_eq!(
        std::fs::metadata(f.outside().join("secret"))
            .unwrap()
            .nlink(),
        1
    );
}

/// A debootstrap root's `dev/console` and the like: skipped, counted, the first few named;
/// never created, and a lower layer's file at the path is hidden all the same.
#[test]
fn device_nodes_are_skipped_and_counted() {
    let f = Fixture::new();
    let lower = Layer::new().file("dev/sdb", "lower").bytes();
    let mut upper = Layer::new().dir("dev");
    for name in ["console", "null", "sda", "sdb"] {
        let kind = match name {
            "sda" | "sdb" => tar::EntryType::Block,
            _ => tar::EntryType::Char,
        };
        upper = upper.add(&format!("dev/{name}"), kind, b"", 0o666, None);
    }
    let upper = upper.file("etc/hostname", "x\n").bytes();
    let skipped = f
        .unpack_devices(vec![lower, upper], Options::default(), Limits::default())
        .unwrap();
    assert_eq!(skipped.count, 4);
    assert_eq!(skipped.first, ["dev/console", "dev/null", "dev/sda"]);
    assert_eq!(
        skipped.warning().unwrap(),
        "skipped 4 device nodes (dev/console, dev/null, dev/sda, …): the sandbox provides /dev"
    );
    for name in ["console", "null", "sda", "sdb"] {
        assert!(std::fs::symlink_metadata(f.root().join("dev").join(name)).is_err());
    }
    assert_eq!(
        std::fs::read(f.root().join("etc/hostname")).unwrap(),
        b"x\n"
    );
    // One device: its name, no ellipsis; none: no warning.
    let one = SkippedDevices {
        count: 1,
        first: vec!["dev/console".into()],
    };
    assert_eq!(
        one.warning().unwrap(),
        "skipped 1 device node (dev/console): the sandbox provides /dev"
    );
    assert_eq!(SkippedDevices::default().warning(), None);
}

#[test]
fn setuid_and_setgid_are_stripped_unless_kept() {
    let layer = || {
        Layer::new()
            .file_mode("suid", 0o4755)
            .file_mode("sgid", 0o2755)
            .dir_mode("shared", 0o2775)
            .bytes()
    };
    let mode =
        |root: &Path, name: &str| std::fs::metadata(root.join(name)).unwrap().mode() & 0o7777;
    let f = Fixture::new();
    f.unpack(vec![layer()]).unwrap();
    assert_eq!(mode(&f.root(), "suid"), 0o755);
    assert_eq!(mode(&f.root(), "sgid"), 0o755);
    // Directories keep setgid: it only picks the group of new files.
    assert_eq!(mode(&f.root(), "shared"), 0o2775);

    let f = Fixture::new();
    let keep = Options {
        keep_setuid: true,
        keep_caps: false,
    };
    f.unpack_with(vec![layer()], keep, Limits::default())
        .unwrap();
    assert_eq!(mode(&f.root(), "suid"), 0o4755);
    assert_eq!(mode(&f.root(), "sgid"), 0o2755);
}

/// A version-2 `security.capability` value granting CAP_NET_RAW, effective.
fn cap_net_raw() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&(0x0200_0000u32 | 1).to_le_bytes());
    v.extend_from_slice(&(1u32 << 13).to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v
}

fn get_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let cpath = CString::new(path.as_os_str().as_bytes()).unwrap();
    let cname = CString::new(name).unwrap();
    let mut buf = vec![0u8; 256];
    // SAFETY: both strings are NUL-terminated and the buffer's length is passed with it.
    let n = unsafe {
        libc::getxattr(
            cpath.as_ptr(),
            cname.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    (n >= 0).then(|| {
        buf.truncate(n as usize);
        buf
    })
}

#[test]
fn file_capabilities_are_stripped_unless_kept() {
    let layer = || {
        Layer::new()
            .pax("SCHILY.xattr.security.capability", &cap_net_raw())
            .file_mode("ping", 0o755)
            .bytes()
    };
    let f = Fixture::new();
    f.unpack(vec![layer()]).unwrap();
    assert_eq!(
        get_xattr(&f.root().join("ping"), "security.capability"),
        None
    );

    if !nix::unistd::geteuid().is_root() {
        crate::util::skip_test(
            "image extract --keep-caps half",
            "setting file capabilities needs root",
        );
        return;
    }
    let f = Fixture::new();
    let keep = Options {
        keep_setuid: false,
        keep_caps: true,
    };
    f.unpack_with(vec![layer()], keep, Limits::default())
        .unwrap();
    assert_eq!(
        get_xattr(&f.root().join("ping"), "security.capability"),
        Some(cap_net_raw())
    );
}

#[test]
fn whiteouts_may_not_escape() {
    let f = Fixture::new();
    std::fs::write(f.outside(), "host").unwrap();
    let layer = Layer::new().file("../.wh.outside", "").bytes();
    refused(f.unpack(vec![layer]), "path traversal");
    assert!(f.outside().exists());

    let layer = Layer::new().file("a/.wh...", "").bytes();
    refused(Fixture::new().unpack(vec![layer]), "bad whiteout");

    // Through a symlink: the whiteout's directory is never resolved through a link.
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    std::fs::write(f.outside().join("victim"), "host").unwrap();
    let lower = Layer::new()
        .symlink("lnk", &f.outside().display().to_string())
        .bytes();
    let upper = Layer::new().file("lnk/.wh.victim", "").bytes();
    refused(
        f.unpack(vec![lower.clone(), upper]),
        "lnk is a symbolic link",
    );
    assert!(f.outside().join("victim").exists());

    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    std::fs::write(f.outside().join("victim"), "host").unwrap();
    let lower = Layer::new()
        .symlink("lnk", &f.outside().display().to_string())
        .bytes();
    let upper = Layer::new().file("lnk/.wh..wh..opq", "").bytes();
    refused(f.unpack(vec![lower, upper]), "lnk is a symbolic link");
    assert!(f.outside().join("victim").exists());
}

#[test]
fn whiteout_of_a_symlink_removes_the_link_only() {
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    std::fs::write(f.outside().join("keep"), "host").unwrap();
    let lower = Layer::new()
        .symlink("lnk", &f.outside().display().to_string())
        .bytes();
    let upper = Layer::new().file(".wh.lnk", "").bytes();
    f.unpack(vec![lower, upper]).unwrap();
    assert!(std::fs::symlink_metadata(f.root().join("lnk")).is_err());
    assert!(f.outside().join("keep").exists());
}

#[test]
fn a_directory_over_a_symlink_replaces_the_link() {
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    let layer = Layer::new()
        .symlink("d", &f.outside().display().to_string())
        .dir("d/")
        .file("d/x", "inside")
        .bytes();
    f.unpack(vec![layer]).unwrap();
    assert!(std::fs::symlink_metadata(f.root().join("d"))
        .unwrap()
        .is_dir());
    assert!(!f.outside().join("x").exists());
}

#[test]
fn limits_cap_entries_and_bytes() {
    let f = Fixture::new();
    let layer = Layer::new()
        .file("a", "1")
        .file("b", "2")
        .file("c", "3")
        .bytes();
    let limits = Limits {
        max_bytes: 1 << 20,
        max_entries: 2,
    };
    refused(
        f.unpack_with(vec![layer], Options::default(), limits),
        "more than 2 entries",
    );

    let f = Fixture::new();
    let big = "x".repeat(64 * 1024);
    let layer = Layer::new().file("big", &big).bytes();
    let limits = Limits {
        max_bytes: 16 * 1024,
        max_entries: 100,
    };
    refused(
        f.unpack_with(vec![layer], Options::default(), limits),
        "bytes unpacked",
    );
}

#[test]
fn remove_tree_does_not_follow_links_and_handles_read_only_dirs() {
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    std::fs::write(f.outside().join("keep"), "host").unwrap();
    let root = f.root();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::os::unix::fs::symlink(f.outside(), root.join("a/link")).unwrap();
    std::fs::set_permissions(root.join("a/b"), std::fs::Permissions::from_mode(0o500)).unwrap();
    remove_tree(&root).unwrap();
    assert!(!root.exists());
    assert!(f.outside().join("keep").exists());
}

// The extractor keeps the directory it resolved last open: a directory replaced by a link,
// a file or a whiteout between two entries must not be written into through that descriptor.

#[test]
fn a_directory_replaced_by_a_link_is_not_written_through_its_kept_descriptor() {
    let f = Fixture::new();
    std::fs::create_dir(f.outside()).unwrap();
    let layer = Layer::new()
        .dir("a")
        .file("a/one", "1")
        .symlink("a", &f.outside().display().to_string())
        .file("a/two", "2")
        .bytes();
    refused(f.unpack(vec![layer]), "a is a symbolic link");
    assert!(!f.outside().join("two").exists());
    assert!(std::fs::symlink_metadata(f.root().join("a"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_directory_replaced_by_a_file_refuses_entries_below_it() {
    let f = Fixture::new();
    let layer = Layer::new()
        .file("a/one", "1")
        .file("a", "now a file")
        .file("a/two", "2")
        .bytes();
    refused(f.unpack(vec![layer]), "a is not a directory");
    assert_eq!(
        std::fs::read_to_string(f.root().join("a")).unwrap(),
        "now a file"
    );
}

#[test]
fn a_directory_whited_out_and_made_again_holds_only_the_new_entries() {
    let f = Fixture::new();
    let lower = Layer::new().file("a/b/old", "old").bytes();
    let upper = Layer::new()
        .file("a/.wh.b", "")
        .file("a/b/new", "new")
        .bytes();
    f.unpack(vec![lower, upper]).unwrap();
    assert!(!f.root().join("a/b/old").exists());
    assert_eq!(
        std::fs::read_to_string(f.root().join("a/b/new")).unwrap(),
        "new"
    );
}

#[test]
fn files_in_many_directories_unpack_whatever_the_order() {
    let f = Fixture::new();
    let mut layer = Layer::new();
    for i in 0..40 {
        // Back and forth between directories, deep and shallow, created on the way.
        layer = layer
            .file(&format!("d{}/x/y/f{i}", i % 3), "x")
            .file(&format!("top{i}"), "t");
    }
    f.unpack(vec![layer.bytes()]).unwrap();
    for i in 0..40 {
        assert!(f.root().join(format!("d{}/x/y/f{i}", i % 3)).is_file());
        assert!(f.root().join(format!("top{i}")).is_file());
    }
}
