//! The `org.reprorun.*` annotations: the determinism layer a container asks for.

use std::collections::BTreeMap;

use super::{bad, ConvertError};
use crate::determinism::clock::{self, ClockMode, DateChoice};
use crate::determinism::{RandomMode, DEFAULT_EPOCH};

/// Annotation keys reprorun reads (all under this prefix).
pub(super) const ANNOTATION_PREFIX: &str = "org.reprorun.";
/// `true`: `config.json` fields reprorun does not know are refused (read by
/// [`crate::oci::read_spec`]; default: ignored, as the runtime spec requires).
pub const STRICT_ANNOTATION: &str = "org.reprorun.strict";

/// The determinism settings a container asked for through annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Determinism {
    pub enabled: bool,
    pub date: DateChoice,
    pub clock: ClockMode,
    pub seed: u64,
    pub random: RandomMode,
    pub cpus: u32,
    /// `org.reprorun.net.allow` (comma-separated patterns) and `org.reprorun.net.add-host`
    /// (comma-separated NAME:ADDRESS): the container's only way out is the egress proxy;
    /// `org.reprorun.net.record` / `net.replay` (a host directory): its cassette.
    pub egress: Option<crate::net::Egress>,
    /// `org.reprorun.net.log`: the host file the monitor's proxy appends JSON lines to.
    pub net_log: Option<std::path::PathBuf>,
    /// `org.reprorun.no-new-privileges=true`: no_new_privs whatever
    /// `process.noNewPrivileges` says.
    pub force_no_new_privs: bool,
    /// `org.reprorun.dev-urandom=seeded`: `/dev/random` and `/dev/urandom` are the seeded
    /// stream (FIFOs) instead of the host's character devices.
    pub seeded_dev_urandom: bool,
}

impl Default for Determinism {
    fn default() -> Self {
        Determinism {
            enabled: true,
            date: DateChoice::Pinned(DEFAULT_EPOCH),
            clock: ClockMode::StartAt,
            seed: 0,
            random: RandomMode::Seeded,
            cpus: crate::determinism::identity::DEFAULT_CPUS,
            egress: None,
            net_log: None,
            force_no_new_privs: false,
            seeded_dev_urandom: false,
        }
    }
}

impl Determinism {
    /// Whether getrandom and AT_RANDOM are seeded.
    pub(crate) fn seeded(&self) -> bool {
        self.enabled && self.random == RandomMode::Seeded
    }

    /// Whether /dev/random and /dev/urandom are the seeded FIFOs (opt-in).
    pub(crate) fn seeded_dev(&self) -> bool {
        self.seeded() && self.seeded_dev_urandom
    }
}

/// Variables of the container's environment (`process.env`) read as pins, each with the
/// annotation it stands for: engines that pass no annotations (Docker before 24) still choose
/// the pins per container (`docker run -e REPRORUN_DATE=2020-01-01`). An annotation of the
/// same pin wins. The network's and the host's settings (`net.*`, `no-new-privileges`) are
/// annotations only: an image's `ENV` reaches `process.env` too, and must not widen them.
pub(super) const ENV_PINS: &[(&str, &str)] = &[
    ("REPRORUN_DETERMINISM", "determinism"),
    ("REPRORUN_DATE", "date"),
    ("REPRORUN_CLOCK", "clock"),
    ("REPRORUN_SEED", "seed"),
    ("REPRORUN_RANDOM", "random"),
    ("REPRORUN_DEV_URANDOM", "dev-urandom"),
];

/// The pins asked for: the `org.reprorun.*` annotations over the [`ENV_PINS`] of `env`,
/// each with the field it came from.
fn pins<'a>(
    annotations: &'a BTreeMap<String, String>,
    env: &'a [String],
) -> BTreeMap<&'a str, (String, &'a str)> {
    let mut pins = BTreeMap::new();
    for entry in env {
        let Some((var, value)) = entry.split_once('=') else {
            continue;
        };
        if let Some((_, name)) = ENV_PINS.iter().find(|(v, _)| *v == var) {
            pins.insert(*name, (format!("process.env.{var}"), value));
        }
    }
    for (key, value) in annotations {
        if let Some(name) = key.strip_prefix(ANNOTATION_PREFIX) {
            pins.insert(name, (format!("annotations.{key}"), value.as_str()));
        }
    }
    pins
}

/// Reads the `org.reprorun.*` annotations and the pins of `env` ([`ENV_PINS`]); an unknown
/// key under the prefix is an error (a typo would otherwise silently leave a pin at its
/// default).
pub(super) fn determinism(
    annotations: &BTreeMap<String, String>,
    env: &[String],
) -> Result<Determinism, ConvertError> {
    let mut d = Determinism::default();
    for (name, (field, value)) in pins(annotations, env) {
        match name {
            "determinism" => {
                d.enabled = match value {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    _ => return Err(bad(field, "expected on or off")),
                }
            }
            "date" => {
                d.date = clock::parse_date_choice(value).map_err(|e| bad(&field, e.to_string()))?
            }
            "clock" => {
                d.clock = clock::parse_clock_mode(value).map_err(|e| bad(&field, e.to_string()))?
            }
            "seed" => {
                d.seed = value
                    .parse()
                    .map_err(|_| bad(&field, "expected a non-negative integer"))?
            }
            "random" => {
                d.random = match value {
                    "seeded" => RandomMode::Seeded,
                    "real" => RandomMode::Real,
                    _ => return Err(bad(field, "expected seeded or real")),
                }
            }
            "cpus" => {
                d.cpus = value
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(&field, "expected a positive number of CPUs"))?
            }
            "net.allow" => {
                let egress = d.egress.get_or_insert_with(Default::default);
                for pattern in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let rule =
                        crate::net::Rule::parse(pattern).map_err(|e| bad(&field, e.to_string()))?;
                    egress.rules.push(rule);
                }
            }
            "net.add-host" => {
                let egress = d.egress.get_or_insert_with(Default::default);
                for entry in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let host = crate::net::allow::parse_add_host(entry)
                        .map_err(|e| bad(&field, e.to_string()))?;
                    egress.hosts.push(host);
                }
            }
            "net.log" => d.net_log = Some(host_path(value, &field)?),
            // The cassette's directory is made or read at `create`, no link followed (the
            // host-path rule, `spec/security.md`); either implies the egress proxy.
            "net.record" => {
                d.egress.get_or_insert_with(Default::default).record =
                    Some(host_path(value, &field)?);
            }
            "net.replay" => {
                d.egress.get_or_insert_with(Default::default).replay =
                    Some(host_path(value, &field)?);
            }
            // The upstreams of a recorded container's TLS are verified against this file's
            // CAs (`--upstream-ca`), read at `create`.
            "net.upstream-ca" => {
                let path = host_path(value, &field)?;
                // The host-path rule: no link in any component (a run could have planted one).
                crate::plan::refuse_link(&path, false, "org.reprorun.net.upstream-ca")
                    .map_err(|e| bad(field.as_str(), e.to_string()))?;
                d.egress.get_or_insert_with(Default::default).upstream_ca = Some(path);
            }
            "strict" => {
                bool_value(value, &field)?;
            }
            "no-new-privileges" => d.force_no_new_privs = bool_value(value, &field)?,
            "dev-urandom" => {
                d.seeded_dev_urandom = match value {
                    "seeded" => true,
                    "device" => false,
                    _ => return Err(bad(field, "expected seeded or device")),
                }
            }
            _ => return Err(bad(
                field,
                "unknown reprorun annotation; known: determinism, date, clock, seed, random, dev-urandom, cpus, net.allow, net.add-host, net.log, net.record, net.replay, net.upstream-ca, no-new-privileges, strict",
            )),
        }
    }
    if d.net_log.is_some() && d.egress.is_none() {
        return Err(bad(
            format!("annotations.{ANNOTATION_PREFIX}net.log"),
            "needs org.reprorun.net.allow (the log is the egress proxy's)",
        ));
    }
    if d.egress
        .as_ref()
        .is_some_and(|e| e.upstream_ca.is_some() && e.record.is_none())
    {
        return Err(bad(
            format!("annotations.{ANNOTATION_PREFIX}net.upstream-ca"),
            "verifies the upstreams of a recording: needs org.reprorun.net.record",
        ));
    }
    if d.egress
        .as_ref()
        .is_some_and(|e| e.record.is_some() && e.replay.is_some())
    {
        return Err(bad(
            format!("annotations.{ANNOTATION_PREFIX}net.replay"),
            "a container records a cassette (net.record) or replays one (net.replay): pass one",
        ));
    }
    Ok(d)
}

/// An absolute host path named by an annotation.
fn host_path(value: &str, field: &str) -> Result<std::path::PathBuf, ConvertError> {
    if !value.starts_with('/') {
        return Err(bad(field, "expected an absolute host path"));
    }
    Ok(value.into())
}

fn bool_value(value: &str, field: &str) -> Result<bool, ConvertError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(field, "expected true or false")),
    }
}
