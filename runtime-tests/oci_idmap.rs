//! OCI idmapped mounts: a bind with `uidMappings`/`gidMappings` (or the `idmap` option)
//! shows the source's owners through the mapping, and files made through it land on the
//! host with the mapped-back owners; mappings or filesystems the kernel refuses fail
//! `create` with one line naming the mount.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::oci::Bundle;

fn map(container: u32, host: u32, size: u32) -> serde_json::Value {
    serde_json::json!({"containerID": container, "hostID": host, "size": size})
}

/// A host directory `data` beside the bundle holding a file `f`, owned as given.
fn data_dir(bundle: &Bundle, dir_owner: u32, file_owner: u32) -> PathBuf {
    let data = bundle.work.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // The mount point: the root filesystem is the host root's, which a container root in a
    // user namespace cannot write.
    std::fs::create_dir(bundle.work.path().join("rootfs/data")).unwrap();
    std::fs::write(data.join("f"), "x").unwrap();
    let own = |p: &Path, id: u32| std::os::unix::fs::chown(p, Some(id), Some(id)).unwrap();
    own(&data, dir_owner);
    own(&data.join("f"), file_owner);
    data
}

fn owner(p: &Path) -> (u32, u32) {
    let m = std::fs::metadata(p).unwrap();
    (m.uid(), m.gid())
}

/// The container's user namespace: root is host uid and gid 100000.
fn user_namespace(c: &mut serde_json::Value) {
    c["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "user"}));
    c["linux"]["uidMappings"] = serde_json::json!([map(0, 100000, 65536)]);
    c["linux"]["gidMappings"] = serde_json::json!([map(0, 100000, 65536)]);
}

/// Adds a bind of the bundle's `data` at /data with `options` and, if given, `mapping` as
/// both its uid and gid mappings.
fn idmapped_data(c: &mut serde_json::Value, options: &[&str], mapping: Option<serde_json::Value>) {
    let mut m = serde_json::json!({
        "destination": "/data", "type": "bind", "source": "data", "options": options
    });
    if let Some(mapping) = mapping {
        m["uidMappings"] = mapping.clone();
        m["gidMappings"] = mapping;
    }
    c["mounts"].as_array_mut().unwrap().push(m);
}

const SHOW: &[&str] = &[
    "sh",
    "-c",
    "stat -c %u:%g /data /data/f; touch /data/new && echo made",
];

#[test]
fn oci_idmapped_bind_in_a_user_namespace() {
    require!(Need::Root);
    // The mount's own mapping: the directory of host uid 1000 is the container's root's
    // (host 100000), so its root may write there; what it makes is 1000's on the host.
    let b = Bundle::new(SHOW, |c| {
        user_namespace(c);
        idmapped_data(
            c,
            &["bind"],
            Some(serde_json::json!([map(1000, 100000, 1)])),
        );
    });
    let data = data_dir(&b, 1000, 1000);
    let out = expect_code(&b.run(&["run", "i1"]), 0);
    assert_eq!(out, "0:0\n0:0\nmade\n");
    assert_eq!(owner(&data.join("new")), (1000, 1000));
    // `idmap` without mappings: the container's own (0 -> 100000), so the host's ids show
    // as themselves inside and the container's root writes as the host's root.
    let b = Bundle::new(SHOW, |c| {
        user_namespace(c);
        idmapped_data(c, &["rbind", "idmap"], None);
    });
    let data = data_dir(&b, 0, 1000);
    let out = expect_code(&b.run(&["run", "i2"]), 0);
    assert_eq!(out, "0:0\n1000:1000\nmade\n");
    assert_eq!(owner(&data.join("new")), (0, 0));
    // The host's view of the directory is unchanged (no mount left there).
    assert_eq!(owner(&data), (0, 0));
}

#[test]
fn oci_idmapped_bind_without_a_user_namespace() {
    require!(Need::Root);
    // Host ids 0 and 1000 appear as 0 and 2000; the container's root writes as host 0.
    let b = Bundle::new(SHOW, |c| {
        idmapped_data(
            c,
            &["rbind", "ridmap", "nosuid"],
            Some(serde_json::json!([map(0, 0, 1), map(1000, 2000, 1)])),
        );
    });
    let data = data_dir(&b, 0, 1000);
    let out = expect_code(&b.run(&["run", "i3"]), 0);
    assert_eq!(out, "0:0\n2000:2000\nmade\n");
    assert_eq!(owner(&data.join("new")), (0, 0));
    assert_eq!(
        owner(&data.join("f")),
        (1000, 1000),
        "the source is not changed"
    );
}

/// A tmpfs mounted on the host (unmounted when dropped).
struct HostTmpfs(PathBuf);

impl Drop for HostTmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn oci_ridmap_maps_every_mount_of_an_rbind_and_idmap_only_its_top() {
    require!(Need::Root);
    for (option, sub_owner) in [("ridmap", "2000:2000"), ("idmap", "1000:1000")] {
        let b = Bundle::new(&["stat", "-c", "%u:%g", "/data/f", "/data/sub/g"], |c| {
            idmapped_data(
                c,
                &["rbind", option],
                Some(serde_json::json!([map(1000, 2000, 1)])),
            );
        });
        let data = data_dir(&b, 0, 1000);
        let sub = data.join("sub");
        std::fs::create_dir(&sub).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &sub,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some("mode=0755"),
        )
        .unwrap();
        let _guard = HostTmpfs(sub.clone());
        std::fs::write(sub.join("g"), "y").unwrap();
        std::os::unix::fs::chown(sub.join("g"), Some(1000), Some(1000)).unwrap();
        let out = expect_code(&b.run(&["run", "r1"]), 0);
        assert_eq!(out, format!("2000:2000\n{sub_owner}\n"), "{option}");
    }
}

#[test]
fn oci_refused_idmapped_mounts_fail_create_with_one_line() {
    require!(Need::Root);
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|c| {
                idmapped_data(
                    c,
                    &["bind"],
                    Some(serde_json::json!([map(0, 100000, 10), map(5, 200000, 10)])),
                )
            }),
            "uidMappings[0] and uidMappings[1]: their containerID ranges overlap",
        ),
        (
            Box::new(|c| idmapped_data(c, &["bind", "idmap"], None)),
            "the container has no user namespace",
        ),
        // sysfs takes no id mapping: refused by the kernel at create, not at start.
        (
            Box::new(|c| {
                c["mounts"].as_array_mut().unwrap().push(serde_json::json!({
                    "destination": "/data", "type": "bind", "source": "/sys/kernel",
                    "options": ["bind"], "uidMappings": [map(0, 1000, 1)],
                    "gidMappings": [map(0, 1000, 1)]
                }))
            }),
            "id mapping of /sys/kernel (mount_setattr MOUNT_ATTR_IDMAP): EINVAL",
        ),
    ];
    for (edit, needle) in cases {
        let b = Bundle::new(&["true"], |c| edit(c));
        std::fs::create_dir(b.work.path().join("data")).unwrap();
        let o = b.run(&["create", "bad"]);
        let err = stderr(&o);
        assert_ne!(o.status.code(), Some(0), "{o:?}");
        // The test's bind is the config's last mount.
        let config: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(b.work.path().join("config.json")).unwrap(),
        )
        .unwrap();
        let at = format!(
            "mounts[{}]: ",
            config["mounts"].as_array().unwrap().len() - 1
        );
        assert!(
            err.contains(&at) && err.contains(needle),
            "{at}{needle}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert_eq!(stdout(&b.run(&["list", "-q"])), "", "nothing created");
    }
}

#[test]
fn oci_features_announce_idmapped_mounts() {
    let w = Work::new();
    let f: serde_json::Value =
        serde_json::from_str(&expect_code(&w.run(&["features"]), 0)).unwrap();
    assert_eq!(f["linux"]["mountExtensions"]["idmap"]["enabled"], true);
    let options = f["mountOptions"].as_array().unwrap();
    assert!(options.contains(&"idmap".into()) && options.contains(&"ridmap".into()));
}

#[test]
fn oci_idmapped_bind_in_a_root_built_in_place() {
    require!(Need::Root, Need::Tool("unshare"));
    // No mount namespace of the container's own: the tree is attached in the caller's
    // (a private copy of the host's, so that nothing stays on the host).
    let b = Bundle::new(SHOW, |c| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != "mount");
        let linux = c["linux"].as_object_mut().unwrap();
        linux.remove("maskedPaths");
        linux.remove("readonlyPaths");
        idmapped_data(
            c,
            &["bind"],
            Some(serde_json::json!([map(0, 0, 1), map(1000, 2000, 1)])),
        );
    });
    let data = data_dir(&b, 0, 1000);
    let o = b.run_under(
        &["unshare", "--mount", "--propagation", "private"],
        &["run", "p1"],
    );
    assert_eq!(expect_code(&o, 0), "0:0\n2000:2000\nmade\n");
    assert_eq!(owner(&data.join("new")), (0, 0));
}

#[test]
fn oci_idmapped_bind_in_a_joined_user_namespace() {
    require!(Need::Root);
    // A: holds a user namespace whose root is host 100000.
    let a = Bundle::new(&["sleep", "1000"], user_namespace);
    let a_pid_file = a.work.path().join("pid");
    expect_code(
        &a.run(&["create", "--pid-file", a_pid_file.to_str().unwrap(), "ja"]),
        0,
    );
    let a_pid = std::fs::read_to_string(&a_pid_file).unwrap();
    let user = format!("/proc/{a_pid}/ns/user");
    let joining = |c: &mut serde_json::Value| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user", "path": user}));
    };
    // B joins it; a bare `idmap` takes the joined namespace's mapping (0 -> 100000), so the
    // host's ids show as themselves and B's root writes as the host's root.
    let b = Bundle::new(SHOW, |c| {
        joining(c);
        idmapped_data(c, &["rbind", "idmap"], None);
    });
    let data = data_dir(&b, 0, 1000);
    let bare = b.run(&["run", "jb"]);
    let bare_owner = std::fs::metadata(data.join("new"))
        .ok()
        .map(|m| (m.uid(), m.gid()));
    // C joins it with the mount's own mapping: host 1000's directory is C's root's.
    let c = Bundle::new(SHOW, |c| {
        joining(c);
        idmapped_data(
            c,
            &["bind"],
            Some(serde_json::json!([map(1000, 100000, 1)])),
        );
    });
    let data_c = data_dir(&c, 1000, 1000);
    let own = c.run(&["run", "jc"]);
    let own_owner = std::fs::metadata(data_c.join("new"))
        .ok()
        .map(|m| (m.uid(), m.gid()));
    // D joins it with a plain bind: the host's root shows as the overflow id there, which
    // is what the idmap above changes.
    let d = Bundle::new(&["stat", "-c", "%u:%g", "/data"], |c| {
        joining(c);
        idmapped_data(c, &["rbind"], None);
    });
    data_dir(&d, 0, 0);
    let plain = d.run(&["run", "jd"]);
    let _ = a.run(&["delete", "--force", "ja"]);
    assert_eq!(expect_code(&plain, 0), "65534:65534\n");
    assert_eq!(expect_code(&bare, 0), "0:0\n1000:1000\nmade\n");
    assert_eq!(bare_owner, Some((0, 0)));
    assert_eq!(expect_code(&own, 0), "0:0\n0:0\nmade\n");
    assert_eq!(own_owner, Some((1000, 1000)));
    assert_eq!(owner(&data), (0, 0), "the host's view is unchanged");
}
