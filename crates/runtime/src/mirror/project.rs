//! `mirror pull --project DIR`: the requirements a local project needs, read from its
//! `pyproject.toml` as pip, uv and build frontends read it: `[build-system] requires`,
//! `[project] dependencies`, the `[project.optional-dependencies]` extras named by
//! `--extras`, and the PEP 735 `[dependency-groups]` named by `--groups` (with their
//! `{include-group = ...}` entries). A requirement on the project itself (`name[extra]`, as
//! in `all = ["name[test,docs]"]`) brings in those extras instead.

use std::path::Path;

use toml::{Table, Value};

use super::MirrorError;

fn bad(dir: &Path, why: String) -> MirrorError {
    MirrorError::Pull(format!("--project {}: {why}", dir.display()))
}

/// PEP 503 normalized name: lowercase, runs of `-`, `_`, `.` as one `-`.
fn normalize(name: &str) -> String {
    let mut out = String::new();
    for part in name
        .split(['-', '_', '.'])
        .filter(|p| !p.is_empty())
        .map(str::to_ascii_lowercase)
    {
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&part);
    }
    out
}

/// The name of a requirement (`foo[bar]>=1; python_version>"3"` → `foo`) and its extras.
fn name_and_extras(req: &str) -> (String, Vec<String>) {
    let end = req
        .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
        .unwrap_or(req.len());
    let rest = req[end..].trim_start();
    let extras = rest
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .map(|(e, _)| e.split(',').map(|x| x.trim().to_string()).collect())
        .unwrap_or_default();
    (normalize(&req[..end]), extras)
}

/// The requirements of the project in `dir` with `extras` and `groups`, in file order,
/// without duplicates.
pub(crate) fn requirements(
    dir: &Path,
    extras: &[String],
    groups: &[String],
) -> Result<Vec<String>, MirrorError> {
    let path = dir.join("pyproject.toml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| bad(dir, format!("read pyproject.toml: {e}")))?;
    let doc: Table = text
        .parse()
        .map_err(|e: toml::de::Error| bad(dir, format!("pyproject.toml: {}", e.message())))?;
    let strings = |v: Option<&Value>, what: &str| -> Result<Vec<String>, MirrorError> {
        match v {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(bad(dir, format!("{what}: not a list of strings"))),
                })
                .collect(),
            Some(_) => Err(bad(dir, format!("{what}: not a list"))),
        }
    };
    fn table(v: Option<&Value>) -> Option<&Table> {
        v.and_then(Value::as_table)
    }
    let project = table(doc.get("project"));
    let own = project
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .map(normalize);
    let mut out: Vec<String> = Vec::new();
    let push = |r: String, out: &mut Vec<String>| {
        if !out.contains(&r) {
            out.push(r);
        }
    };
    let build = table(doc.get("build-system")).and_then(|b| b.get("requires"));
    for r in strings(build, "[build-system] requires")? {
        push(r, &mut out);
    }
    let optional = project.and_then(|p| table(p.get("optional-dependencies")));
    let mut pending: Vec<String> = extras.to_vec();
    let mut seen = std::collections::BTreeSet::new();
    let mut reqs = strings(
        project.and_then(|p| p.get("dependencies")),
        "[project] dependencies",
    )?;
    while let Some(extra) = pending.pop() {
        if !seen.insert(normalize(&extra)) {
            continue;
        }
        let found = optional.and_then(|o| {
            o.iter()
                .find(|(k, _)| normalize(k) == normalize(&extra))
                .map(|(_, v)| v)
        });
        let Some(list) = found else {
            let known: Vec<&str> =
                optional.map_or(Vec::new(), |o| o.keys().map(String::as_str).collect());
            return Err(bad(
                dir,
                format!("no extra {extra:?} (it has: {})", known.join(", ")),
            ));
        };
        reqs.extend(strings(Some(list), "[project.optional-dependencies]")?);
    }
    groups_into(dir, table(doc.get("dependency-groups")), groups, &mut reqs)?;
    // A requirement on the project itself stands for its extras.
    loop {
        let mut more = Vec::new();
        for r in reqs.drain(..) {
            let (name, extras) = name_and_extras(&r);
            if Some(&name) == own.as_ref() {
                more.extend(extras.into_iter().filter(|e| seen.insert(normalize(e))));
            } else {
                push(r, &mut out);
            }
        }
        if more.is_empty() {
            break;
        }
        for extra in more {
            let list = optional.and_then(|o| {
                o.iter()
                    .find(|(k, _)| normalize(k) == normalize(&extra))
                    .map(|(_, v)| v)
            });
            reqs.extend(strings(list, "[project.optional-dependencies]")?);
        }
    }
    Ok(out)
}

/// The PEP 735 groups named, with their `{include-group = ...}` entries, into `reqs`.
fn groups_into(
    dir: &Path,
    table: Option<&Table>,
    groups: &[String],
    reqs: &mut Vec<String>,
) -> Result<(), MirrorError> {
    let mut pending: Vec<String> = groups.iter().rev().cloned().collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(group) = pending.pop() {
        if !seen.insert(normalize(&group)) {
            continue;
        }
        let items = table
            .and_then(|t| t.iter().find(|(k, _)| normalize(k) == normalize(&group)))
            .and_then(|(_, v)| v.as_array());
        let Some(items) = items else {
            let known: Vec<&str> =
                table.map_or(Vec::new(), |t| t.keys().map(String::as_str).collect());
            return Err(bad(
                dir,
                format!(
                    "no dependency group {group:?} (it has: {})",
                    known.join(", ")
                ),
            ));
        };
        for item in items {
            match item {
                Value::String(s) => reqs.push(s.clone()),
                Value::Table(t) => match t.get("include-group").and_then(Value::as_str) {
                    Some(g) => pending.push(g.to_string()),
                    None => return Err(bad(dir, format!("[dependency-groups] {group}: an entry is neither a requirement nor {{include-group = ...}}"))),
                },
                _ => return Err(bad(dir, format!("[dependency-groups] {group}: not a list of requirements"))),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(toml: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("pyproject.toml"), toml).unwrap();
        d
    }

    const PYPROJECT: &str = r#"
[build-system]
requires = ["setuptools>=61", "wheel"]

[project]
name = "My_Pkg"
dependencies = ["attrs>=23", "six"]

[project.optional-dependencies]
docs = ["sphinx"]
test = ["pytest>=8", "hypothesis"]
all = ["my-pkg[docs,test]"]

[dependency-groups]
lint = ["ruff"]
dev = [{include-group = "lint"}, "coverage", "six"]
"#;

    #[test]
    fn build_requires_dependencies_extras_and_groups() {
        let d = project(PYPROJECT);
        let none: Vec<String> = vec![];
        assert_eq!(
            requirements(d.path(), &none, &none).unwrap(),
            ["setuptools>=61", "wheel", "attrs>=23", "six"]
        );
        let got = requirements(d.path(), &["all".into()], &["dev".into()]).unwrap();
        for r in ["sphinx", "pytest>=8", "hypothesis", "ruff", "coverage"] {
            assert!(got.contains(&r.to_string()), "{r} missing: {got:?}");
        }
        // The self-reference is expanded, never passed on; duplicates appear once.
        assert!(!got.iter().any(|r| r.starts_with("my-pkg")), "{got:?}");
        assert_eq!(got.iter().filter(|r| *r == "six").count(), 1);
    }

    #[test]
    fn unknown_extras_and_groups_are_named_with_the_known_ones() {
        let d = project(PYPROJECT);
        let err = requirements(d.path(), &["tests".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no extra \"tests\" (it has: all, docs, test)"),
            "{err}"
        );
        let err = requirements(d.path(), &[], &["docs".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no dependency group \"docs\" (it has: dev, lint)"),
            "{err}"
        );
        let empty = tempfile::tempdir().unwrap();
        let err = requirements(empty.path(), &[], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("read pyproject.toml"), "{err}");
        let broken = project("[project\n");
        assert!(requirements(broken.path(), &[], &[]).is_err());
    }
}
