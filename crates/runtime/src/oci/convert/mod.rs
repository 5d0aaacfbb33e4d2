//! An OCI bundle's `config.json` resolved into a [`Plan`] (the same value `reprorun exec`
//! resolves to) plus what only the lifecycle needs (hooks, cgroup path, annotations).
//! Pure: reads the bundle's files, changes nothing. Two steps: `validate` refuses every
//! field reprorun cannot honour, naming its JSON path, and parses the sections
//! (`annotations`, `process`, `mounts`, `linux`); `build` assembles the plan.

mod annotations;
mod cgroup_fields;
mod idmap;
mod joined;
mod linux;
mod mounts;
mod process;
mod sched;
mod systemd_cgroup;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use thiserror::Error;

use annotations::Determinism;
pub use annotations::STRICT_ANNOTATION;
pub(crate) use idmap::is_idmapped;
pub use process::{process_privilege, unraisable};
pub(crate) use sched::scheduling;
pub(crate) use systemd_cgroup::cgroupfs_path as systemd_cgroupfs_path;
pub use validate::check_process;

use super::spec::{self, Spec};
use crate::determinism::clock::{ClockPlan, DateChoice};
use crate::determinism::{EnvProfile, RandomMode};
use crate::plan::{MountOp, Namespace, Plan, ProcessUser};
use crate::security::Security;
use validate::{validate, Checked};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConvertError {
    #[error("{field}: {reason}")]
    Field { field: String, reason: String },
}

fn bad(field: impl Into<String>, reason: impl Into<String>) -> ConvertError {
    ConvertError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

fn unsupported(field: &str) -> ConvertError {
    bad(
        field,
        "not supported by reprorun; remove it from the config (see spec/oci.md)",
    )
}

/// A container resolved from its bundle.
#[derive(Debug, Clone)]
pub struct Container {
    pub plan: Plan,
    pub hooks: spec::Hooks,
    /// `linux.cgroupsPath`, when given.
    pub cgroups_path: Option<String>,
    pub annotations: BTreeMap<String, String>,
}

/// Resolves `spec` (read from `bundle`) into a container. `cpus_available` bounds the
/// `org.reprorun.cpus` annotation.
pub fn resolve(spec: &Spec, bundle: &Path, cpus_available: u32) -> Result<Container, ConvertError> {
    let checked = validate(spec, bundle, cpus_available)?;
    Ok(build(checked, spec, bundle))
}

/// A checked config as a container: the plan's mounts in the order the executor performs
/// them, the determinism layer's pins, and the environment.
fn build(c: Checked<'_>, spec: &Spec, bundle: &Path) -> Container {
    let det = &c.det;
    let mut namespaces = c.namespaces;
    let time_joined = c.join.iter().any(|j| j.ns == Namespace::Time);
    if det.enabled && !namespaces.contains(&Namespace::Time) && !time_joined {
        // The workload's uptime clocks start at a pinned value (a joined time namespace
        // keeps its own offsets).
        namespaces.push(Namespace::Time);
    }
    let seeded = det.seeded();
    let mut identity = crate::plan::pinned_identity(det.cpus, &c.hostname, &c.domainname);
    // The pinned `uname` says what the kernel says in the config's execution domain.
    identity.uname.machine = linux::machine_in(c.personality, &identity.uname.machine);
    let clock = match (det.enabled, det.date) {
        (false, _) | (true, DateChoice::Now) => None,
        (true, DateChoice::Pinned(epoch)) => Some(ClockPlan {
            epoch,
            mode: det.clock,
        }),
    };

    let mut mounts = vec![MountOp::RootBind {
        src: c.rootfs.clone(),
    }];
    mounts.extend(c.mounts);
    mounts.extend(mounts::default_devices(det.seeded_dev(), c.dev_tmpfs));
    mounts.extend(c.devices);
    mounts.extend(c.sysctls);
    if det.enabled {
        mounts.extend(
            identity
                .files(
                    clock.map_or(0, |c| c.epoch - crate::plan::UPTIME_START_SECS),
                    det.seed,
                    seeded,
                )
                .into_iter()
                .map(|(dest, contents)| MountOp::File {
                    dest: dest.into(),
                    contents,
                }),
        );
        if clock.is_some() || seeded {
            let seed = seeded.then_some(det.seed);
            mounts.extend(mounts::runtime_mounts(&c.rootfs, clock, det.clock, seed));
        }
    }
    if det.egress.as_ref().is_some_and(|e| e.terminates_tls()) {
        // `net.record`, `net.replay`: the host's CAs and the run's, as `exec` binds them (the
        // text is written at `create`, when the run's CA is made: `sandbox::container`).
        mounts.push(MountOp::File {
            dest: crate::net::intercept::CA_BUNDLE.into(),
            contents: String::new(),
        });
    }
    mounts.extend(c.masked);
    mounts.extend(c.readonly);
    mounts.extend(c.propagation);
    if c.root_readonly {
        mounts.push(MountOp::ReadonlyRoot);
    }

    let plan = Plan {
        namespaces,
        mounts,
        hostname: c.hostname,
        domainname: c.domainname,
        cwd: PathBuf::from(&c.process.cwd),
        host_workdir: bundle.to_path_buf(),
        env: environment(det, clock, &c.env),
        umask: c.process.user.umask.unwrap_or(0o022),
        clock,
        seed: det.seed,
        random: if det.enabled {
            det.random
        } else {
            RandomMode::Real
        },
        identity,
        security: Security {
            seccomp: c.seccomp,
            cap_add: Vec::new(),
            preserve_fds: 0,
            rlimits: c.rlimits,
            caps: Some(c.caps),
            refuse_setid: false,
        },
        resources: c.resources,
        process_user: Some(ProcessUser {
            uid: c.process.user.uid,
            gid: c.process.user.gid,
            additional_gids: c.process.user.additional_gids.clone(),
        }),
        join: c.join,
        oom_score_adj: c.process.oom_score_adj,
        scheduling: c.scheduling,
        personality: c.personality,
        terminal: c.process.terminal,
        parent_maps: c.parent_maps,
        intercept: det.enabled,
        egress: det.egress.clone(),
        net_log: det.net_log.clone(),
        ..Plan::base(c.rootfs, c.process.args.clone())
    };
    Container {
        plan,
        hooks: c.hooks,
        cgroups_path: c.cgroups_path,
        annotations: spec.annotations.clone(),
    }
}

/// The environment: the config's, with reprorun's pins filling what it leaves unset.
fn environment(
    det: &Determinism,
    clock: Option<ClockPlan>,
    config: &[(String, String)],
) -> Vec<String> {
    let mut env = if det.enabled {
        let epoch = clock.map_or_else(
            || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64)
            },
            |c| c.epoch,
        );
        EnvProfile::pinned(epoch, det.seed)
    } else {
        EnvProfile::empty()
    };
    if det.egress.is_some() {
        for (k, v) in crate::plan::proxy_env() {
            let _ = env.set(k, &v);
        }
    }
    for (k, v) in config {
        // Checked by validation: names the environment can hold.
        let _ = env.set(k, v);
    }
    if det.egress.as_ref().is_some_and(|e| e.terminates_tls()) {
        // Last, as `exec` does: an image's own SSL_CERT_FILE would not trust the run's CA.
        for (k, v) in crate::net::intercept::ca_env() {
            let _ = env.set(k, v);
        }
    }
    env.to_vec()
}

/// A path given in the config relative to the bundle.
fn bundle_path(bundle: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        bundle.join(p)
    }
}

#[cfg(test)]
mod tests;
