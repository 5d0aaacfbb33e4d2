use super::*;

#[test]
fn os_release_names_the_distribution() {
    let debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n";
    assert_eq!(
        distribution(debian).as_deref(),
        Some("Debian GNU/Linux 12 (bookworm)")
    );
    assert_eq!(
        distribution("NAME=Alpine\nVERSION_ID=3.20.1\n").as_deref(),
        Some("Alpine 3.20.1")
    );
    assert_eq!(distribution("ID=x\n"), None);
}

const STATUS: &str = "Package: a\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0\n\n\
Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 2\n\n\
Package: b\nStatus: install ok installed\nArchitecture: all\nVersion: 3:2.1-1\nDescription: x\n y\n";

#[test]
fn dpkg_lists_installed_packages_only() {
    assert_eq!(dpkg_lines(STATUS), ["a:amd64=1.0", "b:all=3:2.1-1"]);
    assert_eq!(
        apk_lines("P:musl\nV:1.2.5-r0\nA:x86_64\n\nP:busybox\nV:1.36\nA:x86_64\n"),
        ["musl:x86_64=1.2.5-r0", "busybox:x86_64=1.36"]
    );
}

#[test]
fn a_root_is_described_by_its_release_and_package_digest() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::fs::create_dir_all(r.join("usr/lib")).unwrap();
    std::fs::create_dir_all(r.join("var/lib/dpkg")).unwrap();
    // An absolute link resolves inside the root, not on the host.
    std::fs::write(r.join("usr/lib/os-release"), "PRETTY_NAME=\"Test 1\"\n").unwrap();
    std::os::unix::fs::symlink("/usr/lib/os-release", r.join("etc/os-release")).unwrap();
    std::fs::write(r.join("var/lib/dpkg/status"), STATUS).unwrap();
    let d = Described::of(r);
    assert_eq!(d.distribution.as_deref(), Some("Test 1"));
    let p = d.packages.clone().unwrap();
    assert_eq!((p.manager, p.count), ("dpkg", 2));
    // One more package (a host install between two runs) changes the digest.
    let more =
        format!("{STATUS}\nPackage: locales-all\nStatus: install ok installed\nVersion: 1\n");
    std::fs::write(r.join("var/lib/dpkg/status"), more).unwrap();
    let after = Described::of(r).packages.unwrap();
    assert_eq!(after.count, 3);
    assert_ne!(after.digest, p.digest);
    // No database, no release file: both null.
    let empty = tempfile::tempdir().unwrap();
    let e = Described::of(empty.path());
    assert_eq!((e.distribution, e.packages), (None, None));
}
