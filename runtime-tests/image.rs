//! `reprorun image` and `exec --image`, on the busybox recipe's layout and on layouts made by
//! skopeo, umoci, a docker-save archive and hand-built malicious images.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::common::*;

/// The busybox recipe's OCI layout, built once per test run.
pub(crate) fn busybox_layout() -> &'static Path {
    static LAYOUT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &LAYOUT
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::set_permissions(
                dir.path(),
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )
            .unwrap();
            let out = dir.path().join("busybox");
            let recipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/busybox/build.sh");
            let o = Command::new(recipe)
                .arg(&out)
                .output()
                .expect("run images/busybox/build.sh");
            assert!(
                o.status.success(),
                "busybox recipe: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            (dir, out)
        })
        .1
}

/// The Python recipe's OCI layout (`images/python/build.sh`), built once per test run.
pub(crate) fn python_layout() -> &'static Path {
    static LAYOUT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &LAYOUT
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("python");
            let recipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/python/build.sh");
            let o = Command::new(recipe)
                .arg(&out)
                .output()
                .expect("run images/python/build.sh");
            assert!(
                o.status.success(),
                "python recipe: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            (dir, out)
        })
        .1
}

/// The Python recipe image has `/bin/sh` and a working `venv` (pip installed into it by
/// ensurepip, offline), and its programs (a glibc root of only what `ldd` lists, no
/// `libdl.so.2`) start under the fake clock.
#[test]
fn the_python_recipe_has_sh_and_a_working_venv() {
    require!(
        Need::Root,
        Need::Path("/usr/bin/python3.11", "Debian's python3.11"),
        Need::Path("/bin/busybox", "busybox-static")
    );
    let img = Images::new();
    img.import(python_layout(), &[]);
    let script = "python3 -c 'import time; print(time.strftime(\"%F\", time.gmtime()))'; \
        python3 -m venv /tmp/v && /tmp/v/bin/python -m pip --version | cut -d' ' -f1; \
        /tmp/v/bin/python -c 'import subprocess; print(subprocess.run(\"echo sh\", shell=True, capture_output=True, text=True).stdout.strip())'";
    let o = img.run(&[
        "exec",
        "--image",
        "python:3.11",
        "--date",
        "2001-02-03",
        "--",
        "/bin/sh",
        "-c",
        script,
    ]);
    assert_eq!(
        expect_code(&o, 0),
        "2001-02-03\npip\nsh\n",
        "{}",
        stderr(&o)
    );
}

/// A work directory with its own store.
struct Images {
    work: Work,
    store: tempfile::TempDir,
}

impl Images {
    fn new() -> Self {
        Images {
            work: Work::new(),
            store: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.work
            .cmd(args)
            .env("REPRORUN_STORE", self.store.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    fn import(&self, path: &Path, extra: &[&str]) -> String {
        let mut args = vec!["image", "import", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = expect_code(&self.run(&args), 0);
        out.trim().to_string()
    }

    fn listing(&self) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let meta = std::fs::symlink_metadata(e.path()).unwrap();
                let rel = e.path().strip_prefix(base).unwrap().display().to_string();
                out.push(format!(
                    "{rel} {}",
                    if meta.is_file() { meta.len() } else { 0 }
                ));
                if meta.is_dir() {
                    walk(&e.path(), base, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(self.store.path(), self.store.path(), &mut out);
        out
    }

    fn rootfs(&self, digest: &str) -> PathBuf {
        self.store
            .path()
            .join("images")
            .join(digest.trim_start_matches("sha256:"))
            .join("rootfs")
    }
}

fn tar_dir(dir: &Path, out: &Path) {
    let mut b = tar::Builder::new(std::fs::File::create(out).unwrap());
    b.follow_symlinks(false);
    b.append_dir_all(".", dir).unwrap();
    b.finish().unwrap();
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn import_ls_inspect_rm_directory_and_archive() {
    let img = Images::new();
    let line = img.import(busybox_layout(), &[]);
    let (digest, name) = line.split_once(' ').expect("DIGEST NAME");
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{line}"
    );
    assert_eq!(name, "busybox:latest");
    assert!(img.rootfs(digest).join("bin/busybox").is_file());

    let ls = expect_code(&img.run(&["image", "ls"]), 0);
    assert!(
        ls.lines()
            .any(|l| l.starts_with("busybox:latest") && l.contains(&digest[7..19])),
        "{ls}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&expect_code(&img.run(&["image", "ls", "--json"]), 0)).unwrap();
    assert_eq!(json[0]["digest"], digest);
    assert_eq!(json[0]["names"][0], "busybox:latest");
    for reference in ["busybox", "busybox:latest", digest, &digest[..19]] {
        let inspect: serde_json::Value =
            serde_json::from_str(&expect_code(&img.run(&["image", "inspect", reference]), 0))
                .unwrap();
        assert_eq!(inspect["digest"], digest, "{reference}");
        assert_eq!(inspect["config"]["Cmd"][0], "/bin/sh");
    }

    // The tar form of the same layout: same digest, another name.
    let archive = img.work.path().join("busybox.tar");
    tar_dir(busybox_layout(), &archive);
    let line = img.import(&archive, &["--name", "localhost/busybox:1"]);
    assert_eq!(line, format!("{digest} busybox:latest localhost/busybox:1"));

    expect_error(
        &img.run(&["image", "inspect", "nosuch"]),
        "not in the store",
    );
    expect_error(&img.run(&["image", "inspect", "Bad Name"]), "image name");
    let rm = expect_code(&img.run(&["image", "rm", "busybox"]), 0);
    assert_eq!(rm.trim(), "untagged busybox:latest");
    assert!(
        img.rootfs(digest).is_dir(),
        "still named localhost/busybox:1"
    );
    let rm = expect_code(&img.run(&["image", "rm", "localhost/busybox:1"]), 0);
    assert_eq!(
        rm,
        format!("untagged localhost/busybox:1\ndeleted {digest}\n")
    );
    assert!(!img.rootfs(digest).exists());
    assert_eq!(
        expect_code(&img.run(&["image", "ls", "--json"]), 0).trim(),
        "[]"
    );
    assert_eq!(
        std::fs::read_dir(img.store.path().join("blobs/sha256"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn exec_image_gets_a_fresh_overlay_per_run() {
    let img = Images::new();
    let line = img.import(busybox_layout(), &[]);
    let digest = line.split(' ').next().unwrap().to_string();
    let o = img.run(&[
        "exec",
        "--image",
        "busybox",
        "--",
        "sh",
        "-c",
        "echo hi > /x; cat /x",
    ]);
    assert_eq!(expect_code(&o, 0), "hi\n");
    let o = img.run(&[
        "exec",
        "--image",
        "busybox",
        "--",
        "sh",
        "-c",
        "test -e /x && echo leaked || echo fresh",
    ]);
    assert_eq!(expect_code(&o, 0), "fresh\n");

    // Deleting files inside changes nothing in the store.
    let o = img.run(&[
        "exec",
        "--image",
        &digest,
        "--",
        "/bin/busybox",
        "sh",
        "-c",
        "rm /bin/sh /etc/passwd && test ! -e /bin/sh && echo gone",
    ]);
    assert_eq!(expect_code(&o, 0), "gone\n");
    // Directories of the image can be renamed and removed (the overlay has `userxattr`).
    let o = img.run(&[
        "exec",
        "--image",
        &digest,
        "--",
        "/bin/busybox",
        "sh",
        "-c",
        "mv /etc /etc2 && mv /etc2 /etc && rm -rf /usr && test ! -e /usr && echo renamed",
    ]);
    assert_eq!(expect_code(&o, 0), "renamed\n");
    let rootfs = img.rootfs(&digest);
    assert!(std::fs::symlink_metadata(rootfs.join("bin/sh")).is_ok());
    assert!(rootfs.join("etc/passwd").is_file());
    assert!(!rootfs.join("x").exists());
    let o = img.run(&["exec", "--image", "busybox", "--", "sh", "-c", "echo ok"]);
    assert_eq!(expect_code(&o, 0), "ok\n");

    // The working directory is /work (the caller's), the pins hold, /etc is writable.
    std::fs::write(img.work.path().join("in-work"), "w\n").unwrap();
    let o = img.run(&[
        "exec",
        "--image",
        "busybox",
        "--",
        "sh",
        "-c",
        "pwd; cat in-work; echo $TZ; echo x >> /etc/group && echo etc-ok; cat /etc/ld.so.preload",
    ]);
    let out = expect_code(&o, 0);
    assert!(
        out.starts_with("/work\nw\nUTC\netc-ok\n/run/reprorun/"),
        "{out}"
    );

    // No command: the image's Cmd (/bin/sh, reading stdin).
    let o = with_stdin(
        {
            let mut c = img.work.cmd(&["exec", "--image", "busybox"]);
            c.env("REPRORUN_STORE", img.store.path());
            c
        },
        b"echo from-cmd\n",
    );
    assert_eq!(expect_code(&o, 0), "from-cmd\n");

    // --dry-run shows the overlay.
    let plan: serde_json::Value = serde_json::from_str(&expect_code(
        &img.run(&["exec", "--dry-run", "--image", "busybox", "--", "true"]),
        0,
    ))
    .unwrap();
    assert_eq!(plan["mounts"][0]["op"], "overlay");
    assert_eq!(plan["mounts"][0]["lower"], rootfs.display().to_string());
    assert_eq!(plan["mounts"][0]["dest"], "/");

    let r = img.work.path().display().to_string();
    expect_bad_input(
        &img.run(&["exec", "--image", "busybox", "--rootfs", &r, "--", "true"]),
        "cannot be used with",
    );
    expect_error(
        &img.run(&["exec", "--image", "nosuch", "--", "true"]),
        "not in the store",
    );
    expect_error(
        &img.run(&[
            "exec",
            "--isolation=none",
            "--image",
            "busybox",
            "--",
            "true",
        ]),
        "--image needs namespaces",
    );
}

#[test]
fn skopeo_and_umoci_layouts_import() {
    let img = Images::new();
    let line = img.import(busybox_layout(), &[]);
    let digest = line.split(' ').next().unwrap().to_string();

    let dst = img.work.path().join("copied");
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    let o = Command::new("skopeo")
        .args([
            "copy",
            "--quiet",
            &src,
            &format!("oci:{}:copied", dst.display()),
        ])
        .output()
        .expect("skopeo (run .ci/setup)");
    assert!(
        o.status.success(),
        "skopeo: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A tag-only ref name takes the layout's directory name.
    let line = img.import(&dst, &[]);
    assert!(line.ends_with(" copied:copied"), "{line}");
    let o = img.run(&[
        "exec",
        "--image",
        "copied:copied",
        "--",
        "sh",
        "-c",
        "echo skopeo",
    ]);
    assert_eq!(expect_code(&o, 0), "skopeo\n");

    let layout = img.work.path().join("umoci");
    let umoci = |args: &[&str]| {
        let o = Command::new("umoci")
            .args(args)
            .output()
            .expect("umoci (run .ci/setup)");
        assert!(
            o.status.success(),
            "umoci {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let l = layout.display().to_string();
    umoci(&["init", "--layout", &l]);
    umoci(&["new", "--image", &format!("{l}:latest")]);
    umoci(&[
        "insert",
        "--image",
        &format!("{l}:latest"),
        img.rootfs(&digest).to_str().unwrap(),
        "/",
    ]);
    umoci(&[
        "config",
        "--image",
        &format!("{l}:latest"),
        "--config.cmd",
        "/bin/echo",
        "--config.cmd",
        "from-umoci",
    ]);
    let line = img.import(&layout, &["--name", "umoci-made"]);
    assert!(line.ends_with(" umoci-made:latest"), "{line}");
    let o = img.run(&["exec", "--image", "umoci-made"]);
    assert_eq!(expect_code(&o, 0), "from-umoci\n");
}

#[test]
fn docker_save_archives_import() {
    let img = Images::new();
    let layout = busybox_layout();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let blob = |d: &str| {
        std::fs::read(
            layout
                .join("blobs/sha256")
                .join(d.trim_start_matches("sha256:")),
        )
        .unwrap()
    };
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(index["manifests"][0]["digest"].as_str().unwrap())).unwrap();
    let config = blob(manifest["config"]["digest"].as_str().unwrap());
    let mut layer = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(
            &blob(manifest["layers"][0]["digest"].as_str().unwrap())[..],
        ),
        &mut layer,
    )
    .unwrap();
    let config_name = format!("{}.json", sha(&config));
    let id = sha(&layer);
    let docker_manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": config_name, "RepoTags": ["saved/busybox:v1"], "Layers": [format!("{id}/layer.tar")],
    }]))
    .unwrap();
    let archive = img.work.path().join("saved.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&archive).unwrap());
    for (path, data) in [
        (format!("{id}/layer.tar"), &layer),
        (config_name.clone(), &config),
        ("manifest.json".into(), &docker_manifest),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, &data[..]).unwrap();
    }
    b.finish().unwrap();
    drop(b);
    let line = img.import(&archive, &[]);
    assert!(line.ends_with(" saved/busybox:v1"), "{line}");
    let o = img.run(&[
        "exec",
        "--image",
        "saved/busybox:v1",
        "--",
        "echo",
        "docker",
    ]);
    assert_eq!(expect_code(&o, 0), "docker\n");
}

/// One raw tar entry, written byte by byte so that any name can be expressed.
fn entry(
    b: &mut tar::Builder<Vec<u8>>,
    path: &str,
    kind: tar::EntryType,
    data: &[u8],
    mode: u32,
    link: &str,
) {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(kind);
    h.set_size(data.len() as u64);
    h.set_mode(mode);
    let bytes = h.as_mut_bytes();
    bytes[..path.len()].copy_from_slice(path.as_bytes());
    bytes[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h.set_cksum();
    b.append(&h, data).unwrap();
}

/// An OCI layout archive (tar) with one uncompressed layer made by `fill`.
fn layout_archive(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut tar::Builder<Vec<u8>>),
) -> PathBuf {
    let mut b = tar::Builder::new(Vec::new());
    fill(&mut b);
    layout_archive_of(dir, name, &b.into_inner().unwrap())
}

/// An OCI layout archive (tar) with the one uncompressed layer `layer`.
fn layout_archive_of(dir: &Path, name: &str, layer: &[u8]) -> PathBuf {
    let root = dir.join(name);
    let blobs = root.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let put = |bytes: &[u8]| {
        std::fs::write(blobs.join(sha(bytes)), bytes).unwrap();
        format!("sha256:{}", sha(bytes))
    };
    let config = serde_json::to_vec(&serde_json::json!({
        "os": "linux", "config": {"Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{}", sha(layer))]},
    }))
    .unwrap();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": put(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": put(layer), "size": layer.len()}],
    }))
    .unwrap();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": put(&manifest), "size": manifest.len(),
        "annotations": {"org.opencontainers.image.ref.name": "evil:latest"},
    }]});
    std::fs::write(root.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(root.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let archive = dir.join(format!("{name}.tar"));
    tar_dir(&root, &archive);
    archive
}

/// A root made by debootstrap holds `dev/console` and friends (and so do images built from
/// one): the import skips the device nodes with one warning naming how many and the first
/// few, and runs see the sandbox's own `/dev`.
#[test]
fn images_of_roots_with_device_nodes_import_without_them() {
    require!(Need::Root, Need::Tool("tar"), Need::Tool("mknod"));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    for d in ["bin", "dev", "etc"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
    for (name, major, minor) in [
        ("console", "5", "1"),
        ("null", "1", "3"),
        ("zero", "1", "5"),
        ("tty", "5", "0"),
    ] {
        let dev = root.join("dev").join(name);
        let o = Command::new("mknod")
            .arg(&dev)
            .args(["c", major, minor])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "mknod: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let layer = dir.path().join("layer.tar");
    let o = Command::new("tar")
        .args([
            "--sort=name",
            "-C",
            root.to_str().unwrap(),
            "-cf",
            layer.to_str().unwrap(),
            ".",
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let archive = layout_archive_of(dir.path(), "devroot", &std::fs::read(&layer).unwrap());
    let img = Images::new();
    let o = img.run(&[
        "image",
        "import",
        archive.to_str().unwrap(),
        "--name",
        "devroot",
    ]);
    let digest = expect_code(&o, 0)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(
        warnings,
        ["reprorun: warning: image devroot:latest: skipped 4 device nodes (dev/console, dev/null, dev/tty, …): the sandbox provides /dev"],
        "{}",
        stderr(&o)
    );
    let kept = img.rootfs(&digest);
    assert!(kept.join("bin/busybox").is_file());
    assert!(std::fs::symlink_metadata(kept.join("dev/console")).is_err());
    let inspect = expect_code(&img.run(&["image", "inspect", "devroot"]), 0);
    assert!(inspect.contains("\"count\": 4"), "{inspect}");
    let o = img.run(&[
        "exec",
        "--image",
        "devroot",
        "--",
        "/bin/sh",
        "-c",
        "echo ok > /dev/null && test -c /dev/null && echo ran",
    ]);
    assert_eq!(expect_code(&o, 0), "ran\n");
}

#[test]
fn malicious_images_are_refused_and_the_store_is_unchanged() {
    use tar::EntryType as T;
    let img = Images::new();
    img.import(busybox_layout(), &[]);
    let before = img.listing();
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("file"), "host").unwrap();
    let v = victim.display().to_string();
    type Fill = Box<dyn FnOnce(&mut tar::Builder<Vec<u8>>)>;
    let cases: Vec<(&str, &str, Fill)> = vec![
        (
            "traversal",
            "path traversal",
            Box::new(|b| {
                entry(
                    b,
                    "../../../../tmp/reprorun-pwned",
                    T::Regular,
                    b"x",
                    0o644,
                    "",
                )
            }),
        ),
        (
            "absolute-escape",
            "path traversal",
            Box::new(|b| entry(b, "/../reprorun-pwned", T::Regular, b"x", 0o644, "")),
        ),
        (
            "symlink-write",
            "is a symbolic link",
            Box::new({
                let v = v.clone();
                move |b| {
                    entry(b, "lnk", T::Symlink, b"", 0o777, &v);
                    entry(b, "lnk/file", T::Regular, b"pwned", 0o644, "");
                }
            }),
        ),
        (
            "symlink-relative",
            "is a symbolic link",
            Box::new(|b| {
                entry(b, "up", T::Symlink, b"", 0o777, "../../../../../../..");
                entry(b, "up/tmp/reprorun-pwned", T::Regular, b"x", 0o644, "");
            }),
        ),
        (
            "symlink-etc",
            "is a symbolic link",
            Box::new(|b| {
                entry(b, "etc", T::Symlink, b"", 0o777, "/etc");
                entry(b, "etc/reprorun-pwned", T::Regular, b"x", 0o644, "");
            }),
        ),
        (
            "hardlink-passwd",
            "hard link to /etc/passwd",
            Box::new(|b| entry(b, "passwd", T::Link, b"", 0o644, "/etc/passwd")),
        ),
        (
            "hardlink-outside",
            "outside the image",
            Box::new(|b| entry(b, "h", T::Link, b"", 0o644, "../../../../etc/passwd")),
        ),
        (
            "hardlink-through-link",
            "is a symbolic link",
            Box::new({
                let v = v.clone();
                move |b| {
                    entry(b, "out", T::Symlink, b"", 0o777, &v);
                    entry(b, "h", T::Link, b"", 0o644, "out/file");
                }
            }),
        ),
        (
            "whiteout-escape",
            "path traversal",
            Box::new(|b| entry(b, "../.wh.victim", T::Regular, b"", 0o644, "")),
        ),
    ];
    for (name, needle, fill) in cases {
        let archive = layout_archive(dir.path(), name, fill);
        let o = img.run(&["image", "import", archive.to_str().unwrap()]);
        expect_error(&o, needle);
        assert!(
            stderr(&o).contains("nothing was imported"),
            "{name}: {}",
            stderr(&o)
        );
        assert_eq!(img.listing(), before, "{name}: store changed");
    }
    assert_eq!(
        std::fs::read_to_string(victim.join("file")).unwrap(),
        "host"
    );
    assert_eq!(std::fs::metadata(victim.join("file")).unwrap().len(), 4);
    assert!(!Path::new("/tmp/reprorun-pwned").exists());
    assert!(!Path::new("/etc/reprorun-pwned").exists());

    // A layer whose bytes do not match its digest.
    let archive = layout_archive(dir.path(), "tampered", |b| {
        entry(b, "a", T::Regular, b"original", 0o644, "")
    });
    let root = dir.path().join("tampered");
    for e in std::fs::read_dir(root.join("blobs/sha256"))
        .unwrap()
        .flatten()
    {
        let mut bytes = std::fs::read(e.path()).unwrap();
        if let Some(i) = bytes.windows(8).position(|w| w == b"original") {
            bytes[i] = b'O';
            std::fs::write(e.path(), &bytes).unwrap();
        }
    }
    std::fs::remove_file(&archive).unwrap();
    let o = img.run(&["image", "import", root.to_str().unwrap()]);
    expect_error(&o, "the image is corrupt or was tampered with");
    assert_eq!(img.listing(), before);
}

#[test]
fn setuid_bits_and_file_capabilities_are_stripped_unless_kept() {
    use tar::EntryType as T;
    let img = Images::new();
    let dir = tempfile::tempdir().unwrap();
    let mut cap = Vec::new();
    for word in [0x0200_0001u32, 1 << 13, 0, 0, 0] {
        cap.extend_from_slice(&word.to_le_bytes());
    }
    let make = |name: &str| {
        let cap = cap.clone();
        layout_archive(dir.path(), name, move |b| {
            b.append_pax_extensions([("SCHILY.xattr.security.capability", &cap[..])])
                .unwrap();
            entry(b, "bin/ping", T::Regular, b"#!", 0o4755, "");
        })
    };
    let mode = |digest: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(img.rootfs(digest).join("bin/ping"))
            .unwrap()
            .mode()
            & 0o7777
    };
    let has_cap = |digest: &str| {
        use std::os::unix::ffi::OsStrExt;
        let path =
            std::ffi::CString::new(img.rootfs(digest).join("bin/ping").as_os_str().as_bytes())
                .unwrap();
        let mut buf = [0u8; 64];
        // SAFETY: both strings are NUL-terminated; the buffer's length is passed with it.
        let n = unsafe {
            libc::getxattr(
                path.as_ptr(),
                c"security.capability".as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        n > 0
    };
    let line = img.import(&make("plain"), &["--name", "plain"]);
    let digest = line.split(' ').next().unwrap().to_string();
    assert_eq!(mode(&digest), 0o755);
    assert!(!has_cap(&digest));
    img.run(&["image", "rm", &digest]);
    let line = img.import(
        &make("kept"),
        &["--name", "kept", "--keep-setuid", "--keep-caps"],
    );
    let digest = line.split(' ').next().unwrap().to_string();
    assert_eq!(mode(&digest), 0o4755);
    if skip::part_runs("--keep-caps case", &[Need::Root]) {
        assert!(has_cap(&digest), "--keep-caps kept the capability");
    }
}
