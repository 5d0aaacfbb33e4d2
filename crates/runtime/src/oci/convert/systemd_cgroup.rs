//! `--systemd-cgroup`: engines on systemd hosts (podman's default cgroup manager, Docker's
//! on cgroup v2, kubelet's recommendation) name the container's cgroup in systemd's form,
//! `linux.cgroupsPath = "slice:prefix:name"`. reprorun speaks no D-Bus to systemd; it makes
//! the cgroup where systemd would put that unit and writes it through cgroupfs, as runc's
//! cgroupfs drivers lay the same path out: the slice expanded into its parents
//! (`a-b.slice` → `/a.slice/a-b.slice`, an empty slice `system.slice`) and the unit
//! `prefix-name.scope` (or `name` itself when it is a slice). Pure: strings in, a path out.

use super::{bad, ConvertError};

const FIELD: &str = "linux.cgroupsPath";

/// The slice a path without one goes into (runc's default for a rootful caller).
const DEFAULT_SLICE: &str = "system.slice";

/// The cgroupfs path (absolute, from the hierarchy's root) of systemd's `slice:prefix:name`.
pub(crate) fn cgroupfs_path(path: &str) -> Result<String, ConvertError> {
    let parts: Vec<&str> = path.split(':').collect();
    let [slice, prefix, name] = parts[..] else {
        return Err(bad(
            FIELD,
            format!("{path:?}: with --systemd-cgroup, expected systemd's slice:prefix:name (such as system.slice:docker:ID)"),
        ));
    };
    let slice = if slice.is_empty() {
        DEFAULT_SLICE
    } else {
        slice
    };
    let parent = expand_slice(slice)
        .ok_or_else(|| bad(FIELD, format!("{path:?}: {slice:?} is not a systemd slice name (NAME.slice, its parts joined by single '-')")))?;
    if name.is_empty() || !unit_word(name) || !unit_word(prefix) {
        return Err(bad(
            FIELD,
            format!("{path:?}: the prefix and name must be non-empty unit name words (no '/', not '.' or '..')"),
        ));
    }
    let unit = if name.ends_with(".slice") {
        name.to_string()
    } else {
        format!("{prefix}-{name}.scope")
    };
    Ok(format!("{}/{unit}", parent.trim_end_matches('/')))
}

/// Whether `word` may stand in a unit's name (`prefix` may be empty, as runc allows).
fn unit_word(word: &str) -> bool {
    !word.contains('/') && word != "." && word != ".."
}

/// systemd's path of a slice: `a-b-c.slice` → `/a.slice/a-b.slice/a-b-c.slice`; `-.slice`
/// is the root. `None` for a name systemd refuses.
fn expand_slice(slice: &str) -> Option<String> {
    let stem = slice.strip_suffix(".slice")?;
    if stem == "-" {
        return Some("/".into());
    }
    if stem.is_empty()
        || stem.contains('/')
        || stem.starts_with('-')
        || stem.ends_with('-')
        || stem.contains("--")
    {
        return None;
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for part in stem.split('-') {
        if !prefix.is_empty() {
            prefix.push('-');
        }
        prefix.push_str(part);
        path.push('/');
        path.push_str(&prefix);
        path.push_str(".slice");
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engines_paths_map_as_runc_lays_them_out() {
        for (given, path) in [
            // Docker with the systemd driver, podman's default, kubelet's pods.
            ("system.slice:docker:abc", "/system.slice/docker-abc.scope"),
            ("machine.slice:libpod:abc", "/machine.slice/libpod-abc.scope"),
            (
                "kubepods-besteffort-pod1.slice:cri-containerd:abc",
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-abc.scope",
            ),
            (":reprorun:abc", "/system.slice/reprorun-abc.scope"),
            ("-.slice:x:abc", "/x-abc.scope"),
            ("user.slice::abc", "/user.slice/-abc.scope"),
            ("machine.slice:x:inner.slice", "/machine.slice/inner.slice"),
        ] {
            assert_eq!(cgroupfs_path(given).unwrap(), path, "{given}");
        }
    }

    #[test]
    fn paths_not_in_systemds_form_are_refused_naming_the_field() {
        for given in [
            "/docker/abc",
            "a:b",
            "a:b:c:d",
            "system:docker:abc",
            "a--b.slice:x:abc",
            "-a.slice:x:abc",
            "a/b.slice:x:abc",
            ".slice:x:abc",
            "system.slice:x:",
            "system.slice:x:a/b",
            "system.slice:..:abc",
            "system.slice:x:..",
        ] {
            let e = cgroupfs_path(given).unwrap_err().to_string();
            assert!(e.starts_with("linux.cgroupsPath: "), "{given}: {e}");
        }
        assert_eq!(
            cgroupfs_path("/docker/abc").unwrap_err().to_string(),
            "linux.cgroupsPath: \"/docker/abc\": with --systemd-cgroup, expected systemd's slice:prefix:name (such as system.slice:docker:ID)"
        );
    }
}
