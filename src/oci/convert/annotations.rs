//! The `org.reprorun.*` annotations: the determinism layer a container asks for.

use std::collections::BTreeMap;

use super::{bad, ConvertError};
use crate::determinism::clock::{self, ClockMode, DateChoice};
use crate::determinism::{RandomMode, DEFAULT_EPOCH};

/// Annotation keys reprorun reads (all under this prefix).
pub const ANNOTATION_PREFIX: &str = "org.reprorun.";

/// The determinism settings a container asked for through annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Determinism {
    pub enabled: bool,
    pub date: DateChoice,
    pub clock: ClockMode,
    pub seed: u64,
    pub random: RandomMode,
    pub cpus: u32,
    /// `org.reprorun.net.allow` (comma-separated patterns) and `org.reprorun.net.add-host`
    /// (comma-separated NAME:ADDRESS): the container's only way out is the egress proxy.
    pub egress: Option<crate::net::Egress>,
    /// `org.reprorun.net.log`: the host file the monitor's proxy appends JSON lines to.
    pub net_log: Option<std::path::PathBuf>,
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
        }
    }
}

impl Determinism {
    /// Whether /dev/urandom is the seeded FIFO.
    pub(crate) fn seeded(&self) -> bool {
        self.enabled && self.random == RandomMode::Seeded
    }
}

/// Reads the `org.reprorun.*` annotations; an unknown key under the prefix is an error (a
/// typo would otherwise silently leave a pin at its default).
pub fn determinism(annotations: &BTreeMap<String, String>) -> Result<Determinism, ConvertError> {
    let mut d = Determinism::default();
    for (key, value) in annotations {
        let Some(name) = key.strip_prefix(ANNOTATION_PREFIX) else {
            continue;
        };
        let field = format!("annotations.{key}");
        match name {
            "determinism" => {
                d.enabled = match value.as_str() {
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
                d.random = match value.as_str() {
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
            "net.log" => {
                if !value.starts_with('/') {
                    return Err(bad(field, "expected an absolute host path"));
                }
                d.net_log = Some(value.into());
            }
            _ => return Err(bad(
                field,
                "unknown reprorun annotation; known: determinism, date, clock, seed, random, cpus, net.allow, net.add-host, net.log",
            )),
        }
    }
    if d.net_log.is_some() && d.egress.is_none() {
        return Err(bad(
            format!("annotations.{ANNOTATION_PREFIX}net.log"),
            "needs org.reprorun.net.allow (the log is the egress proxy's)",
        ));
    }
    Ok(d)
}
