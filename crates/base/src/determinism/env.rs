//! The sandbox environment: it starts empty (`env -i`) and holds exactly the documented pins
//! plus what the user adds with `--env` / `--env-file`.

use std::collections::BTreeMap;

use thiserror::Error;

/// The frozen `PATH` every sandbox starts with.
pub const FROZEN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// `HOME` inside the sandbox: a private, empty, writable directory.
pub const HOME_DIR: &str = "/home/reprorun";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum EnvError {
    #[error("environment variable {0:?} cannot be set: its name is empty or holds '=' or NUL")]
    BadName(String),
}

/// The pinned variables and the user's additions, in a stable (sorted) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvProfile {
    vars: BTreeMap<String, String>,
}

impl EnvProfile {
    /// The pins: frozen PATH, HOME, TZ=UTC, C.UTF-8 locale, SOURCE_DATE_EPOCH, and the
    /// language runtimes' hash-seed knobs driven by `seed` (Python takes it modulo 2^32;
    /// Perl reads it as hex).
    pub fn pinned(source_date_epoch: i64, seed: u64) -> Self {
        let mut vars = BTreeMap::new();
        for (k, v) in [
            ("PATH", FROZEN_PATH),
            ("HOME", HOME_DIR),
            ("TZ", "UTC"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C.UTF-8"),
            ("PERL_PERTURB_KEYS", "NO"),
            ("SWIFT_DETERMINISTIC_HASHING", "1"),
        ] {
            vars.insert(k.to_string(), v.to_string());
        }
        vars.insert("SOURCE_DATE_EPOCH".into(), source_date_epoch.to_string());
        vars.insert("PYTHONHASHSEED".into(), (seed & 0xffff_ffff).to_string());
        vars.insert("PERL_HASH_SEED".into(), format!("{seed:x}"));
        EnvProfile { vars }
    }

    /// No variables at all (an OCI container with the determinism layer off).
    pub fn empty() -> Self {
        EnvProfile {
            vars: BTreeMap::new(),
        }
    }

    /// Sets (or overrides) one variable; the user's word wins over a pin.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), EnvError> {
        if key.is_empty() || key.contains('=') || key.contains('\0') || value.contains('\0') {
            return Err(EnvError::BadName(key.to_string()));
        }
        self.vars.insert(key.to_string(), value.to_string());
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    /// `KEY=VALUE` strings in sorted order, as handed to `execve`.
    pub fn to_vec(&self) -> Vec<String> {
        self.vars.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_set_is_exact_and_sorted() {
        let env = EnvProfile::pinned(42, 0).to_vec();
        assert_eq!(
            env,
            vec![
                "HOME=/home/reprorun",
                "LANG=C.UTF-8",
                "LC_ALL=C.UTF-8",
                format!("PATH={FROZEN_PATH}").as_str(),
                "PERL_HASH_SEED=0",
                "PERL_PERTURB_KEYS=NO",
                "PYTHONHASHSEED=0",
                "SOURCE_DATE_EPOCH=42",
                "SWIFT_DETERMINISTIC_HASHING=1",
                "TZ=UTC",
            ]
        );
        let seeded = EnvProfile::pinned(0, (1 << 32) + 255);
        assert_eq!(seeded.get("PYTHONHASHSEED"), Some("255"));
        assert_eq!(seeded.get("PERL_HASH_SEED"), Some("1000000ff"));
    }

    #[test]
    fn user_values_override_and_bad_names_fail() {
        let mut env = EnvProfile::pinned(0, 0);
        env.set("TZ", "Europe/Paris").unwrap();
        env.set("EXTRA", "1").unwrap();
        assert_eq!(env.get("TZ"), Some("Europe/Paris"));
        assert_eq!(env.get("EXTRA"), Some("1"));
        assert!(env.set("A=B", "x").is_err());
        assert!(env.set("", "x").is_err());
    }
}
