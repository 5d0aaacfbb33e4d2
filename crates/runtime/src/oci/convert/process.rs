//! `process`: the environment, capabilities and rlimits of the container's process (for
//! `create` and `exec --process`).

use super::{bad, ConvertError};
use crate::determinism::EnvProfile;
use crate::oci::spec;
use crate::security::{CapSets, Rlimit};

/// `process.env` as pairs, in order; an entry without `=` or with a name the environment
/// cannot hold is refused.
pub(crate) fn env(process: &spec::Process) -> Result<Vec<(String, String)>, ConvertError> {
    let mut check = EnvProfile::empty();
    let mut pairs = Vec::new();
    for (i, entry) in process.env.iter().enumerate() {
        let (k, v) = entry
            .split_once('=')
            .ok_or_else(|| bad(format!("process.env[{i}]"), "expected KEY=VALUE"))?;
        check
            .set(k, v)
            .map_err(|e| bad(format!("process.env[{i}]"), e.to_string()))?;
        pairs.push((k.to_string(), v.to_string()));
    }
    Ok(pairs)
}

/// The capability sets and rlimits `process` asks for, checked (for `create` and
/// `exec --process`): the sets as given (runc's behaviour; the device cgroup keeps
/// CAP_MKNOD harmless), no_new_privs as `process.noNewPrivileges` says or `force_nnp`.
pub fn process_privilege(
    process: &spec::Process,
    force_nnp: bool,
) -> Result<(CapSets, Vec<Rlimit>), ConvertError> {
    let mut caps = match &process.capabilities {
        None => CapSets::default(),
        Some(c) => {
            let names = |list: &[String], set: &str| -> Result<Vec<String>, ConvertError> {
                list.iter()
                    .map(|n| {
                        crate::security::capability(n).map_err(|_| {
                            bad(
                                format!("process.capabilities.{set}"),
                                format!("{n:?}: unknown capability"),
                            )
                        })
                    })
                    .collect()
            };
            CapSets {
                bounding: names(&c.bounding, "bounding")?,
                effective: names(&c.effective, "effective")?,
                permitted: names(&c.permitted, "permitted")?,
                inheritable: names(&c.inheritable, "inheritable")?,
                ambient: names(&c.ambient, "ambient")?,
                allow_new_privs: false,
            }
        }
    };
    caps.allow_new_privs = !(process.no_new_privileges || force_nnp);
    Ok((caps, rlimits(process)?))
}

/// The first capability of the effective, permitted, inheritable or ambient set that is not
/// among `held` (the caller's permitted set): the process could not be given it, so create
/// refuses, naming it (without a new user namespace, where the process has every one).
pub fn unraisable(caps: &CapSets, held: &[String]) -> Result<(), ConvertError> {
    for (set, names) in [
        ("effective", &caps.effective),
        ("permitted", &caps.permitted),
        ("inheritable", &caps.inheritable),
        ("ambient", &caps.ambient),
    ] {
        if let Some(name) = names.iter().find(|n| !held.contains(n)) {
            return Err(bad(
                format!("process.capabilities.{set}"),
                format!("{name} cannot be raised: the caller of reprorun does not have it"),
            ));
        }
    }
    Ok(())
}

/// `process.rlimits`, by reprorun's names; `u64::MAX` is unlimited.
fn rlimits(process: &spec::Process) -> Result<Vec<Rlimit>, ConvertError> {
    let mut rlimits = Vec::new();
    for (i, r) in process.rlimits.iter().enumerate() {
        let name = r
            .kind
            .strip_prefix("RLIMIT_")
            .map(|n| n.to_ascii_lowercase())
            .filter(|n| crate::security::rlimit(&format!("{n}=0")).is_ok())
            .ok_or_else(|| {
                bad(
                    format!("process.rlimits[{i}].type"),
                    format!("{:?}: unknown rlimit", r.kind),
                )
            })?;
        if r.soft > r.hard {
            return Err(bad(
                format!("process.rlimits[{i}]"),
                "soft limit above the hard limit",
            ));
        }
        let value = |v: u64| (v != u64::MAX).then_some(v);
        rlimits.push(Rlimit {
            name,
            soft: value(r.soft),
            hard: value(r.hard),
        });
    }
    Ok(rlimits)
}
