//! Distribution file names (wheels and sdists) and project-name normalisation (PEP 503).

/// A distribution file's project and version, from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DistName {
    /// The normalised project name (PEP 503).
    pub(crate) project: String,
    pub(crate) version: String,
    pub(crate) kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A wheel with its tags: python, abi, platform (each possibly `a.b` compressed).
    Wheel {
        python: String,
        abi: String,
        platform: String,
    },
    Sdist,
}

/// PEP 503: lower case, runs of `-`, `_`, `.` as one `-`.
pub(crate) fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Parses `NAME-VER(-BUILD)?-PY-ABI-PLAT.whl`, `NAME-VER.tar.gz` or `NAME-VER.zip`.
pub(crate) fn parse(filename: &str) -> Option<DistName> {
    if filename.contains('/') || filename.contains('\0') || filename.starts_with('.') {
        return None;
    }
    if let Some(stem) = filename.strip_suffix(".whl") {
        let parts: Vec<&str> = stem.split('-').collect();
        let (name, version, tags) = match parts.len() {
            5 => (parts[0], parts[1], &parts[2..]),
            6 => (parts[0], parts[1], &parts[3..]),
            _ => return None,
        };
        if name.is_empty() || version.is_empty() || tags.iter().any(|t| t.is_empty()) {
            return None;
        }
        return Some(DistName {
            project: normalize(name),
            version: version.to_string(),
            kind: Kind::Wheel {
                python: tags[0].into(),
                abi: tags[1].into(),
                platform: tags[2].into(),
            },
        });
    }
    let stem = filename
        .strip_suffix(".tar.gz")
        .or_else(|| filename.strip_suffix(".zip"))?;
    // The version starts after the last '-' followed by a digit.
    let at = stem
        .char_indices()
        .rev()
        .find(|(i, c)| *c == '-' && stem[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
        .map(|(i, _)| i)?;
    let (name, version) = (&stem[..at], &stem[at + 1..]);
    if name.is_empty() || version.is_empty() {
        return None;
    }
    Some(DistName {
        project: normalize(name),
        version: version.to_string(),
        kind: Kind::Sdist,
    })
}

/// Whether a wheel runs on CPython `python` (e.g. "3.11") on `platform` (a tag prefix such as
/// `manylinux`, `linux_x86_64` or `any`; `None`: Linux x86-64).
pub(crate) fn wheel_fits(kind: &Kind, python: &str, platform: Option<&str>) -> bool {
    let Kind::Wheel {
        python: py,
        abi,
        platform: plat,
    } = kind
    else {
        return true;
    };
    let cp = format!("cp{}", python.replace('.', ""));
    let major = format!("py{}", python.split('.').next().unwrap_or("3"));
    let py_ok = py.split('.').any(|t| {
        t == cp
            || t == major
            || t == "py2.py3"
            || (t.starts_with("cp3") && abi.split('.').any(|a| a == "abi3"))
    });
    let abi_ok = abi
        .split('.')
        .any(|a| a == "none" || a == "abi3" || a == cp || a == format!("{cp}m"));
    let plat_ok = plat.split('.').any(|p| match platform {
        Some(want) => p == "any" || p.starts_with(want),
        None => {
            p == "any"
                || (p.ends_with("x86_64") && (p.starts_with("manylinux") || p.starts_with("linux")))
        }
    });
    py_ok && abi_ok && plat_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize_as_pep_503() {
        assert_eq!(normalize("Foo.Bar__baz-Qux"), "foo-bar-baz-qux");
        assert_eq!(normalize("pytest"), "pytest");
        assert_eq!(normalize("typing_extensions"), "typing-extensions");
    }

    #[test]
    fn wheel_and_sdist_names_parse() {
        let w = parse("typing_extensions-4.7.1-py3-none-any.whl").unwrap();
        assert_eq!(w.project, "typing-extensions");
        assert_eq!(w.version, "4.7.1");
        let b =
            parse("foo-1.0-1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl").unwrap();
        assert_eq!(b.version, "1.0");
        let s = parse("python-dateutil-2.8.2.tar.gz").unwrap();
        assert_eq!(
            (s.project.as_str(), s.version.as_str()),
            ("python-dateutil", "2.8.2")
        );
        assert_eq!(parse("pkg-2.0.zip").unwrap().kind, Kind::Sdist);
        for bad in [
            "foo.whl",
            "foo-1.0.whl",
            "../x-1.0.tar.gz",
            "noversion.tar.gz",
            "x-1.0.exe",
            "",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn wheels_fit_the_target() {
        let k = |f: &str| parse(f).unwrap().kind;
        let fits = |f: &str| wheel_fits(&k(f), "3.11", None);
        assert!(fits("a-1-py3-none-any.whl"));
        assert!(fits("a-1-py2.py3-none-any.whl"));
        assert!(fits("a-1-cp311-cp311-manylinux_2_17_x86_64.whl"));
        assert!(fits("a-1-cp38-abi3-manylinux2014_x86_64.whl"));
        assert!(!fits("a-1-cp310-cp310-manylinux_2_17_x86_64.whl"));
        assert!(!fits("a-1-cp311-cp311-win_amd64.whl"));
        assert!(!fits("a-1-cp311-cp311-macosx_11_0_arm64.whl"));
        assert!(!fits("a-1-cp311-cp311-manylinux_2_17_aarch64.whl"));
        assert!(wheel_fits(&k("a-1.tar.gz"), "3.11", None));
    }
}
