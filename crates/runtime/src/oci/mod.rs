//! OCI runtime: runc's command-line contract over reprorun's plan and executor. A bundle's
//! `config.json` resolves to the same [`crate::plan::Plan`] as `reprorun exec` flags do
//! ([`convert`]); the lifecycle commands, one per module ([`create`], [`start`], [`run`],
//! [`kill`], [`delete`], [`list`] (and `state`), [`ps`], [`exec`], [`features`],
//! [`write_spec`]), keep containers in a state root ([`state`]) between invocations; the
//! executor's OCI half is `sandbox::container`.

pub mod cli;
pub mod convert;
pub mod create;
pub mod delete;
pub mod exec;
pub mod features;
pub mod hooks;
pub mod kill;
pub mod list;
mod premake;
pub mod ps;
pub mod run;
pub mod spec;
pub mod start;
pub mod state;
pub(crate) mod transitions;
pub mod write_spec;

use std::path::{Path, PathBuf};

use thiserror::Error;

use state::{Saved, Status};

/// The runtime-spec version reprorun reports.
pub const OCI_VERSION: &str = "1.2.0";

#[derive(Debug, Error)]
pub enum OciError {
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error("read {path}: {source}; pass --bundle DIR holding config.json")]
    ReadConfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    ParseConfig { path: PathBuf, reason: String },
    #[error("config.json {0}")]
    Convert(#[from] convert::ConvertError),
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error(transparent)]
    Hook(#[from] hooks::HookError),
    #[error("container {id:?} is {status}; {hint}")]
    Status {
        id: String,
        status: state::Status,
        hint: &'static str,
    },
    #[error("signal {0:?}: expected a number, or a name such as KILL or SIGTERM")]
    Signal(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The caller's facts (CPUs, ids) could not be read.
    #[error(transparent)]
    Host(#[from] crate::plan::PlanError),
    /// A capability or limit named on the command line is not one.
    #[error(transparent)]
    Limit(#[from] crate::security::LimitError),
    #[error("{0}")]
    Usage(String),
}

impl crate::exit::ExitStatus for OciError {
    /// A program that could not be executed keeps the shell's 126/127; everything else is
    /// 125 (runc says 1; engines only compare to zero).
    fn status(&self) -> crate::exit::Status {
        match self {
            OciError::Sandbox(e) => e.status(),
            _ => crate::exit::Status::RuntimeError,
        }
    }
}

/// An I/O error while doing `what` to `path`.
fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> OciError {
    let path = path.to_path_buf();
    move |source| OciError::Io { what, path, source }
}

/// `p` made absolute against the current directory.
fn absolute(p: &Path) -> Result<PathBuf, OciError> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(io("current directory", Path::new(".")))?;
    Ok(cwd.join(p))
}

/// The state hooks read on stdin.
fn state_bytes(saved: &Saved, status: Status) -> Vec<u8> {
    serde_json::to_vec(&saved.oci_state(status)).expect("state serializes")
}

/// Reads and parses `config.json` of a bundle. Fields reprorun does not know are ignored, as
/// the runtime spec requires; with the annotation `org.reprorun.strict=true` the first one
/// is an error naming its path.
pub fn read_spec(bundle: &std::path::Path) -> Result<spec::Spec, OciError> {
    let path = bundle.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|source| OciError::ReadConfig {
        path: path.clone(),
        source,
    })?;
    let (spec, unknown) =
        parse_lenient::<spec::Spec>(&text).map_err(|reason| OciError::ParseConfig {
            path: path.clone(),
            reason,
        })?;
    let strict = spec
        .annotations
        .get(convert::STRICT_ANNOTATION)
        .is_some_and(|v| v == "true");
    if strict && !unknown.is_empty() {
        return Err(OciError::ParseConfig {
            path,
            reason: format!(
                "unknown fields {} (refused under {}=true)",
                unknown.join(", "),
                convert::STRICT_ANNOTATION
            ),
        });
    }
    Ok(spec)
}

/// Parses JSON into `T`, ignoring the fields `T` does not know; returns their paths too.
pub(crate) fn parse_lenient<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<(T, Vec<String>), String> {
    let mut unknown = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_ignored::deserialize(&mut de, |path| unknown.push(json_path(&path)))
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok((value, unknown))
}

/// A field's path as spec/oci.md writes it: `linux.resources.devices[0].futureField`.
fn json_path(path: &serde_ignored::Path) -> String {
    use serde_ignored::Path as P;
    match path {
        P::Root => String::new(),
        P::Seq { parent, index } => format!("{}[{index}]", json_path(parent)),
        P::Map { parent, key } => match json_path(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => {
            json_path(parent)
        }
    }
}

/// Parses a signal into its number: a number, a name with or without `SIG` in any case, or
/// a real-time one (`RTMIN`, `RTMIN+N`, `RTMAX-N`, or its number).
pub fn parse_signal(text: &str) -> Result<i32, OciError> {
    use std::str::FromStr;
    let bad = || OciError::Signal(text.to_string());
    // runc's numbers (RTMIN is 34), not the libc's (musl's SIGRTMIN is 35).
    let (min, max) = (crate::sys::SIGRT_FIRST, crate::sys::SIGRT_LAST);
    if let Ok(n) = text.parse::<i32>() {
        if (min..=max).contains(&n) {
            return Ok(n);
        }
        return nix::sys::signal::Signal::try_from(n)
            .map(|s| s as i32)
            .map_err(|_| bad());
    }
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let rt = |base: i32, rest: &str, sign: i32| -> Option<i32> {
        let n = if rest.is_empty() {
            base
        } else {
            base + sign
                * rest
                    .strip_prefix(if sign > 0 { '+' } else { '-' })?
                    .parse::<i32>()
                    .ok()?
        };
        (min..=max).contains(&n).then_some(n)
    };
    if let Some(rest) = name.strip_prefix("RTMIN") {
        return rt(min, rest, 1).ok_or_else(bad);
    }
    if let Some(rest) = name.strip_prefix("RTMAX") {
        return rt(max, rest, -1).ok_or_else(bad);
    }
    nix::sys::signal::Signal::from_str(&format!("SIG{name}"))
        .map(|s| s as i32)
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;

    #[test]
    fn signals_parse_as_runc_takes_them() {
        assert_eq!(parse_signal("9").unwrap(), Signal::SIGKILL as i32);
        assert_eq!(parse_signal("KILL").unwrap(), Signal::SIGKILL as i32);
        assert_eq!(parse_signal("SIGKILL").unwrap(), Signal::SIGKILL as i32);
        assert_eq!(parse_signal("term").unwrap(), Signal::SIGTERM as i32);
        // Real-time signals, by number or name.
        // As runc numbers them, whatever the libc (musl's SIGRTMIN is 35).
        assert_eq!(parse_signal("34").unwrap(), 34);
        assert_eq!(parse_signal("RTMIN").unwrap(), 34);
        assert_eq!(parse_signal("RTMIN+3").unwrap(), 37);
        assert_eq!(parse_signal("sigrtmax-1").unwrap(), 63);
        assert_eq!(parse_signal("64").unwrap(), 64);
        for bad in [
            "", "0x9", "FLY", "999", "-1", "RTMIN+99", "RTMIN-1", "RTMAX+1",
        ] {
            assert!(parse_signal(bad).is_err(), "{bad}");
        }
    }
}
