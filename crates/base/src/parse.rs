//! Parsers for the values users pass on the command line: durations, bind specs, env entries,
//! identities. Pure functions; every failure is a [`ParseError`] naming the value.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("invalid duration {0:?}: expected a number with a unit such as 500ms, 90s, 10m or 2h (ns, us, ms, s, m, h, d)")]
    Duration(String),
    #[error("invalid bind spec {0:?}: expected SRC:DST[:ro|rw] with an absolute DST")]
    Bind(String),
    #[error("invalid mount target {0:?}: it must be an absolute path without '..' components, other than /")]
    Target(String),
    #[error("invalid environment entry {0:?}: expected KEY=VALUE with a non-empty KEY without '=' or NUL")]
    Env(String),
    #[error("{file}:{line}: {reason}")]
    EnvFile {
        file: String,
        line: usize,
        reason: String,
    },
    #[error("invalid --user {0:?}: expected UID:GID as two numbers")]
    User(String),
    #[error("invalid hostname {0:?}: 1 to 64 characters of letters, digits, '-' and '.'")]
    Hostname(String),
}

/// Parses `90s`, `10m`, `1h`, `500ms`, `1.5s` or a bare number of seconds.
pub fn duration(text: &str) -> Result<Duration, ParseError> {
    let err = || ParseError::Duration(text.to_string());
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() || num.starts_with('.') || num.ends_with('.') || num.matches('.').count() > 1
    {
        return Err(err());
    }
    let value: f64 = num.parse().map_err(|_| err())?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(err()),
    };
    let secs = value * scale;
    // A zero or absurd duration is almost certainly a mistake; refuse rather than guess
    // (after rounding: 0.1ns is zero nanoseconds).
    if secs.is_nan() || secs <= 0.0 || secs > 1.0e9 {
        return Err(err());
    }
    let d = Duration::from_secs_f64(secs);
    if d.is_zero() {
        return Err(err());
    }
    Ok(d)
}

/// Checks a path inside the sandbox used as a mount target.
pub fn target(text: &str) -> Result<PathBuf, ParseError> {
    let p = PathBuf::from(text);
    let bad = !p.is_absolute()
        || p.components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        || p.components().count() < 2
        || text.contains('\0');
    if bad {
        return Err(ParseError::Target(text.to_string()));
    }
    Ok(normalize(&p))
}

/// Removes `.` components and duplicate slashes (no `..` handling: callers reject those).
pub fn normalize(p: &std::path::Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindSpec {
    pub src: PathBuf,
    pub dest: PathBuf,
    pub readonly: bool,
}

/// Parses `SRC:DST[:ro|rw]`. SRC is returned as given; the planner makes it absolute.
pub fn bind(text: &str) -> Result<BindSpec, ParseError> {
    let err = || ParseError::Bind(text.to_string());
    let parts: Vec<&str> = text.split(':').collect();
    let (src, dest, readonly) = match parts.as_slice() {
        [s, d] => (*s, *d, false),
        [s, d, "ro"] => (*s, *d, true),
        [s, d, "rw"] => (*s, *d, false),
        _ => return Err(err()),
    };
    if src.is_empty() || src.contains('\0') {
        return Err(err());
    }
    let dest = target(dest).map_err(|_| err())?;
    Ok(BindSpec {
        src: PathBuf::from(src),
        dest,
        readonly,
    })
}

/// Parses one `KEY=VALUE` environment entry.
pub fn env_entry(text: &str) -> Result<(String, String), ParseError> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() && !text.contains('\0') => Ok((k.to_string(), v.to_string())),
        _ => Err(ParseError::Env(text.to_string())),
    }
}

/// Parses an env file: `KEY=VALUE` lines, blank lines and `#` comments ignored, an optional
/// leading `export `, and values optionally wrapped in matching single or double quotes.
pub fn env_file(name: &str, content: &str) -> Result<Vec<(String, String)>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in content.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let (k, v) = env_entry(line).map_err(|_| ParseError::EnvFile {
            file: name.to_string(),
            line: i + 1,
            reason: format!("expected KEY=VALUE, found {raw:?}"),
        })?;
        if k.contains(char::is_whitespace) {
            return Err(ParseError::EnvFile {
                file: name.to_string(),
                line: i + 1,
                reason: format!("variable name {k:?} contains whitespace"),
            });
        }
        let v = unquote(&v).to_string();
        out.push((k, v));
    }
    Ok(out)
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// Parses `UID:GID`.
pub fn user(text: &str) -> Result<(u32, u32), ParseError> {
    let err = || ParseError::User(text.to_string());
    let (u, g) = text.split_once(':').ok_or_else(err)?;
    Ok((u.parse().map_err(|_| err())?, g.parse().map_err(|_| err())?))
}

pub fn hostname(text: &str) -> Result<String, ParseError> {
    let ok = !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if ok {
        Ok(text.to_string())
    } else {
        Err(ParseError::Hostname(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(duration("7").unwrap(), Duration::from_secs(7));
        for bad in [
            "",
            "s",
            "10x",
            "-1s",
            "0s",
            "1..2s",
            ".5s",
            "5.s",
            "ten",
            "1e3s",
            "5 m",
            // Positive, but zero once rounded to nanoseconds (found by fuzzing).
            "0.1ns",
            "0.0000000001",
        ] {
            assert!(duration(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn binds() {
        assert_eq!(
            bind("/a:/b").unwrap(),
            BindSpec {
                src: "/a".into(),
                dest: "/b".into(),
                readonly: false
            }
        );
        assert!(bind("/a:/b:ro").unwrap().readonly);
        assert!(!bind("rel:/b:rw").unwrap().readonly);
        assert_eq!(bind("/a:/b//c/./d").unwrap().dest, PathBuf::from("/b/c/d"));
        for bad in [
            "/a",
            "/a:b",
            "/a:/b:rx",
            ":/b",
            "/a:/",
            "/a:/x/../y",
            "/a:/b:ro:x",
        ] {
            assert!(bind(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn env_entries_and_files() {
        assert_eq!(env_entry("A=b=c").unwrap(), ("A".into(), "b=c".into()));
        assert_eq!(env_entry("A=").unwrap(), ("A".into(), "".into()));
        assert!(env_entry("=x").is_err());
        assert!(env_entry("novalue").is_err());
        let parsed = env_file("f", "# c\n\nA=1\nexport B=\"two words\"\nC='x'\n").unwrap();
        assert_eq!(
            parsed,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "x".into())
            ]
        );
        let err = env_file("f.env", "A=1\nbroken line\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f.env:2: expected KEY=VALUE, found \"broken line\""
        );
    }

    #[test]
    fn users_and_hostnames() {
        assert_eq!(user("1000:100").unwrap(), (1000, 100));
        assert!(user("1000").is_err());
        assert!(user("a:b").is_err());
        assert!(hostname("build-1.example").is_ok());
        assert!(hostname("").is_err());
        assert!(hostname("bad host").is_err());
        assert!(hostname(&"x".repeat(65)).is_err());
    }
}
