//! A run's environment, recorded with its verdict (`runs.env`): the commit its tree was
//! checked out at, the digests of the patches applied, and the digest of the `lock.json` of
//! the mirror it installed from (a mirror is named by its path, and a path can be pulled
//! again). `regrade` refuses to mix runs of one instance and arm whose environments differ
//! ([`mixed`]) unless told (`--allow-mixed`).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::input::Instance;
use super::store::RunRow;
use super::{Arm, Pin};
use reprorun_pipeline::store::sha256_hex;

/// A mirror's lock file and a cassette's index are the user's own, but read with a bound
/// all the same.
const LOCK_MAX: u64 = 64 << 20;

#[derive(Debug, Error)]
pub enum ProvenanceError {
    #[error("{path}: read {name} for the run's record: {source}")]
    Lock {
        path: PathBuf,
        name: &'static str,
        source: std::io::Error,
    },
    #[error("{path}: {name} is larger than {LOCK_MAX} bytes")]
    TooLarge { path: PathBuf, name: &'static str },
}

/// What a run was made from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Provenance {
    /// The commit the tree was checked out at (empty: a tree made before it was recorded).
    pub commit: String,
    /// The model patch's SHA-256 (`None` for a baseline, which applies none).
    pub model_patch_sha256: Option<String>,
    pub test_patch_sha256: String,
    /// The SHA-256 of the `lock.json` of the mirror the run installed from (`None`: no
    /// mirror).
    pub mirror_lock_sha256: Option<String>,
    /// A variation run's tests and command: run alone or the whole command (`select`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<super::select::Selection>,
    /// The digest of the image the run's root was (`sha256:…`; `None`: not an image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// The SHA-256 of the `index.json` of the cassette the run's network was answered from
    /// (`None`: no cassette). The index names every body by its SHA-256, so it digests the
    /// whole cassette.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cassette_sha256: Option<String>,
}

/// The cassette `arm` replays: the instance's, in every arm that keeps the shim's network
/// (not the host-like arms, not the shim without its network pin).
pub(crate) fn cassette_for(inst: &Instance, arm: Arm) -> Option<&Path> {
    match arm {
        Arm::NoShim | Arm::BaselineNoShim | Arm::ShimWithout(Pin::Network) => None,
        _ => inst.cassette.as_deref(),
    }
}

/// The mirror `arm` installs from: the instance's for the shim, `no_shim_mirror`
/// (`--no-shim-mirror`) for host-like runs and for the shim without its mirror pin.
pub(crate) fn mirror_for<'a>(
    inst: &'a Instance,
    arm: Arm,
    no_shim_mirror: Option<&'a Path>,
) -> Option<&'a Path> {
    match arm {
        Arm::NoShim | Arm::BaselineNoShim | Arm::ShimWithout(Pin::Mirror) => no_shim_mirror,
        _ => inst.mirror.as_deref(),
    }
}

/// The SHA-256 of `mirror/lock.json`.
pub(crate) fn lock_digest(mirror: &Path) -> Result<String, ProvenanceError> {
    digest_of(mirror, "lock.json")
}

/// The SHA-256 of `dir/name`, read up to [`LOCK_MAX`] bytes.
fn digest_of(mirror: &Path, name: &'static str) -> Result<String, ProvenanceError> {
    let path = mirror.join(name);
    let err = |source| ProvenanceError::Lock {
        path: mirror.to_path_buf(),
        name,
        source,
    };
    let file = std::fs::File::open(&path).map_err(err)?;
    let mut bytes = Vec::new();
    file.take(LOCK_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    if bytes.len() as u64 > LOCK_MAX {
        return Err(ProvenanceError::TooLarge {
            path: mirror.to_path_buf(),
            name,
        });
    }
    Ok(sha256_hex(&bytes))
}

/// The provenance of a run of `arm` on a tree checked out at `commit`.
pub(crate) fn of_run(
    inst: &Instance,
    arm: Arm,
    no_shim_mirror: Option<&Path>,
    commit: &str,
) -> Result<Provenance, ProvenanceError> {
    Ok(Provenance {
        commit: commit.to_string(),
        model_patch_sha256: (!arm.is_baseline()).then(|| sha256_hex(inst.model_patch.as_bytes())),
        test_patch_sha256: sha256_hex(inst.test_patch.as_bytes()),
        mirror_lock_sha256: mirror_for(inst, arm, no_shim_mirror)
            .map(lock_digest)
            .transpose()?,
        selection: None,
        image_digest: inst
            .image
            .as_deref()
            .and_then(|i| i.rsplit_once('@'))
            .map(|(_, d)| d.to_string()),
        cassette_sha256: cassette_for(inst, arm)
            .map(|c| digest_of(c, "index.json"))
            .transpose()?,
    })
}

/// The tests a recorded run ran alone (its record's `selection`); `None` for a run of the
/// whole command or one recorded without a provenance.
pub(crate) fn ran_alone(r: &RunRow) -> Option<Vec<String>> {
    let env: Provenance = serde_json::from_str(r.env.as_deref()?).ok()?;
    let s = env.selection?;
    s.alone().then_some(s.tests)
}

/// Runs of one instance and arm made in different environments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Mixed {
    pub instance_id: String,
    pub arm: String,
    /// What differs: `commit`, `model_patch`, `test_patch` or `mirror lock.json`.
    pub what: Vec<&'static str>,
    /// How many environments the runs show.
    pub environments: usize,
}

/// The instances and arms whose runs were made in more than one environment. Runs recorded
/// without an environment (before it was recorded) are left out of the comparison.
pub(crate) fn mixed(rows: &[RunRow]) -> Vec<Mixed> {
    let mut groups: BTreeMap<(&str, String), Vec<Provenance>> = BTreeMap::new();
    for r in rows {
        let Some(env) = r.env.as_deref().and_then(|e| serde_json::from_str(e).ok()) else {
            continue;
        };
        let list = groups.entry((&r.instance_id, r.arm.name())).or_default();
        if !list.contains(&env) {
            list.push(env);
        }
    }
    groups
        .into_iter()
        .filter(|(_, envs)| envs.len() > 1)
        .map(|((id, arm), envs)| {
            let differs =
                |f: fn(&Provenance) -> Option<&str>| envs.iter().any(|e| f(e) != f(&envs[0]));
            let mut what = Vec::new();
            for (name, f) in [
                (
                    "commit",
                    (|e: &Provenance| Some(e.commit.as_str())) as fn(&Provenance) -> Option<&str>,
                ),
                ("model_patch", |e| e.model_patch_sha256.as_deref()),
                ("test_patch", |e| Some(e.test_patch_sha256.as_str())),
                ("mirror lock.json", |e| e.mirror_lock_sha256.as_deref()),
                ("image", |e| e.image_digest.as_deref()),
                ("cassette", |e| e.cassette_sha256.as_deref()),
            ] {
                if differs(f) {
                    what.push(name);
                }
            }
            Mixed {
                instance_id: id.to_string(),
                arm,
                what,
                environments: envs.len(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(mirror: Option<PathBuf>) -> Instance {
        Instance {
            instance_id: "i".into(),
            repo: String::new(),
            repo_path: "/repo".into(),
            base_commit: "abc".into(),
            test_patch: "T".into(),
            model_patch: "P".into(),
            model_name: String::new(),
            fail_to_pass: vec![],
            pass_to_pass: vec![],
            test_cmd: "pytest".into(),
            image: None,
            rootfs: None,
            mirror,
            cassette: None,
            bench_date: 0,
            recorded_resolved: true,
        }
    }

    #[test]
    fn a_run_records_its_commit_patches_and_mirror_lock() {
        let dir = tempfile::tempdir().unwrap();
        let (ours, live) = (dir.path().join("m"), dir.path().join("live"));
        for (m, text) in [(&ours, "{\"a\": 1}"), (&live, "{\"a\": 2}")] {
            std::fs::create_dir(m).unwrap();
            std::fs::write(m.join("lock.json"), text).unwrap();
        }
        let i = inst(Some(ours.clone()));
        let c = Some(live.as_path());
        let p = of_run(&i, Arm::Shim, c, "c0ffee").unwrap();
        assert_eq!(p.commit, "c0ffee");
        assert_eq!(p.model_patch_sha256, Some(sha256_hex(b"P")));
        assert_eq!(p.test_patch_sha256, sha256_hex(b"T"));
        assert_eq!(p.mirror_lock_sha256, Some(sha256_hex(b"{\"a\": 1}")));
        assert_eq!(p.image_digest, None);
        let mut on_image = inst(None);
        on_image.image = Some("busybox:latest@sha256:0123".into());
        let p = of_run(&on_image, Arm::Shim, None, "c").unwrap();
        assert_eq!(p.image_digest.as_deref(), Some("sha256:0123"));
        assert_eq!(p.cassette_sha256, None);
        // A cassette: its index's digest, in the arms that replay it only.
        let cas = dir.path().join("cas");
        std::fs::create_dir(&cas).unwrap();
        std::fs::write(cas.join("index.json"), "{\"entries\": []}").unwrap();
        let mut replayed = inst(None);
        replayed.cassette = Some(cas);
        let want = Some(sha256_hex(b"{\"entries\": []}"));
        for arm in [Arm::Shim, Arm::BaselineShim, Arm::ShimWithout(Pin::Clock)] {
            assert_eq!(
                of_run(&replayed, arm, None, "c").unwrap().cassette_sha256,
                want
            );
        }
        for arm in [Arm::NoShim, Arm::ShimWithout(Pin::Network)] {
            assert_eq!(
                of_run(&replayed, arm, None, "c").unwrap().cassette_sha256,
                None
            );
        }
        let p = of_run(&i, Arm::BaselineNoShim, c, "c0ffee").unwrap();
        assert_eq!(
            p.model_patch_sha256, None,
            "a baseline applies no model patch"
        );
        assert_eq!(p.mirror_lock_sha256, Some(sha256_hex(b"{\"a\": 2}")));
        let p = of_run(&i, Arm::ShimWithout(Pin::Mirror), c, "c").unwrap();
        assert_eq!(p.mirror_lock_sha256, Some(sha256_hex(b"{\"a\": 2}")));
        std::fs::remove_file(ours.join("lock.json")).unwrap();
        let e = of_run(&i, Arm::Shim, c, "c").unwrap_err().to_string();
        assert!(e.contains("read lock.json for the run's record"), "{e}");
    }

    fn row(arm: Arm, idx: u32, env: Option<&Provenance>) -> RunRow {
        RunRow {
            instance_id: "i".into(),
            arm,
            idx,
            resolved: true,
            infra: None,
            exit_code: 0,
            wall_ms: 1,
            started_at: 0,
            signature: String::new(),
            evidence: vec![],
            apply: String::new(),
            tests: "{}".into(),
            stdout_sha256: String::new(),
            stderr_sha256: String::new(),
            junit_sha256: None,
            error: None,
            env: env.map(|e| serde_json::to_string(e).unwrap()),
        }
    }

    #[test]
    fn runs_of_one_arm_in_different_environments_are_found() {
        let a = Provenance {
            commit: "c".into(),
            model_patch_sha256: Some("p".into()),
            test_patch_sha256: "t".into(),
            mirror_lock_sha256: Some("m1".into()),
            selection: None,
            image_digest: None,
            cassette_sha256: None,
        };
        let b = Provenance {
            mirror_lock_sha256: Some("m2".into()),
            ..a.clone()
        };
        let other_arm = Provenance {
            model_patch_sha256: None,
            ..a.clone()
        };
        let rows = [
            row(Arm::Shim, 0, Some(&a)),
            row(Arm::Shim, 1, Some(&a)),
            row(Arm::Shim, 2, None),
            row(Arm::BaselineShim, 0, Some(&other_arm)),
        ];
        assert!(
            mixed(&rows).is_empty(),
            "arms differ by design; old runs are left out"
        );
        let rows = [row(Arm::Shim, 0, Some(&a)), row(Arm::Shim, 1, Some(&b))];
        assert_eq!(
            mixed(&rows),
            [Mixed {
                instance_id: "i".into(),
                arm: "shim".into(),
                what: vec!["mirror lock.json"],
                environments: 2,
            }]
        );
        // An image pulled again under the same name, at another digest.
        let c = Provenance {
            image_digest: Some("sha256:1".into()),
            ..a.clone()
        };
        let rows = [row(Arm::Shim, 0, Some(&a)), row(Arm::Shim, 1, Some(&c))];
        assert_eq!(mixed(&rows)[0].what, vec!["image"]);
    }
}
