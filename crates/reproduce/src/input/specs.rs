//! `--specs FILE`: SWE-bench's commands per repository and version (the shape of its own
//! `MAP_REPO_VERSION_TO_SPECS`, as JSON: `{"owner/name": {"VERSION": {"install": ...,
//! "test_cmd": ..., "python": ..., "eval_commands": [...], "env_vars": {...}}}}`), turned
//! into the test command of each instance that names its `repo` and `version` and carries
//! no `test_cmd` of its own. The command is the one SWE-bench's evaluation script runs
//! (`spec/reproduce.md`): for a Python repository (its spec names a `python` version), the
//! environment variables, `eval_commands`, `install`, then `test_cmd` followed by the test
//! files the instance's test patch touches; for the others (Go, JavaScript, ...: a
//! `docker_specs` and no `python`), as SWE-bench's common script, the `build` commands and
//! `test_cmd` as it is (their `install` runs when SWE-bench builds the image).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SpecsError {
    #[error("--specs {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--specs {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("--specs {path}: {repo} {version}: {reason}")]
    Entry {
        path: PathBuf,
        repo: String,
        version: String,
        reason: String,
    },
}

/// One repository version's commands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Spec {
    /// `test_cmd`: a string, or a list (run in turn; for Python, the test files follow the
    /// last).
    pub test_cmd: Vec<String>,
    /// `install`: a string (Python's) or a list (the other languages').
    pub install: Vec<String>,
    /// `build`: the other languages' commands run before the tests.
    pub build: Vec<String>,
    pub eval_commands: Vec<String>,
    pub env_vars: Vec<(String, String)>,
    /// `python`: the Python version SWE-bench's image has; recorded, not installed.
    pub python: Option<String>,
}

/// Every repository's versions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Specs {
    pub path: PathBuf,
    pub repos: BTreeMap<String, BTreeMap<String, Spec>>,
}

/// Files SWE-bench does not pass to the test command (its `NON_TEST_EXTS`).
const NON_TEST_EXTS: &[&str] = &[
    ".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml",
];

/// Reads and checks `path`.
pub(crate) fn read(path: &Path) -> Result<Specs, SpecsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

fn parse(path: &Path, text: &str) -> Result<Specs, SpecsError> {
    let file = |reason: String| SpecsError::File {
        path: path.to_path_buf(),
        reason,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| file(format!("not JSON: {e}")))?;
    let repos = v
        .as_object()
        .ok_or_else(|| file("not a JSON object {\"owner/name\": {\"VERSION\": {...}}}".into()))?;
    let mut out = Specs {
        path: path.to_path_buf(),
        repos: BTreeMap::new(),
    };
    for (repo, versions) in repos {
        let versions = versions
            .as_object()
            .ok_or_else(|| file(format!("{repo}: not an object of versions")))?;
        let mut map = BTreeMap::new();
        for (version, spec) in versions {
            let spec = entry(spec).map_err(|reason| SpecsError::Entry {
                path: path.to_path_buf(),
                repo: repo.clone(),
                version: version.clone(),
                reason,
            })?;
            map.insert(version.clone(), spec);
        }
        out.repos.insert(repo.clone(), map);
    }
    Ok(out)
}

fn entry(v: &Value) -> Result<Spec, String> {
    let obj = v.as_object().ok_or("not an object")?;
    let strings = |key: &str| -> Result<Vec<String>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("\"{key}\" holds a value that is not a string")),
            Some(_) => Err(format!("\"{key}\" is not a string or a list of strings")),
        }
    };
    let test_cmd = strings("test_cmd")?;
    if test_cmd.iter().all(|c| c.trim().is_empty()) {
        return Err("no \"test_cmd\"".into());
    }
    let python = match obj.get("python") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => return Err("\"python\" is not a version".into()),
    };
    let mut env_vars = Vec::new();
    match obj.get("env_vars") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!("\"env_vars\": {k:?} is not a variable name"));
                }
                let v = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => return Err(format!("\"env_vars\": {k} is not a string")),
                };
                env_vars.push((k.clone(), v));
            }
        }
        Some(_) => return Err("\"env_vars\" is not an object".into()),
    }
    Ok(Spec {
        test_cmd,
        install: strings("install")?,
        build: strings("build")?,
        eval_commands: strings("eval_commands")?,
        env_vars,
        python,
    })
}

/// The test files SWE-bench passes to `test_cmd`: the files the test patch touches, less
/// data files; Django's as module names.
pub(crate) fn test_directives(repo: &str, test_patch: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in test_patch.lines() {
        let Some(rest) = line.strip_prefix("diff --git a/") else {
            continue;
        };
        let Some((_, file)) = rest.split_once(" b/") else {
            continue;
        };
        if NON_TEST_EXTS.iter().any(|e| file.ends_with(e)) {
            continue;
        }
        let file = if repo == "django/django" {
            let f = file.strip_suffix(".py").unwrap_or(file);
            f.strip_prefix("tests/").unwrap_or(f).replace('/', ".")
        } else {
            file.to_string()
        };
        out.push(file);
    }
    out
}

/// Quotes `s` for `/bin/sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Specs {
    /// The spec of `repo` at `version`.
    pub(crate) fn get(&self, repo: &str, version: &str) -> Option<&Spec> {
        self.repos.get(repo)?.get(version)
    }

    /// The test command for an instance of `repo` at `version` with `test_patch`, or why
    /// there is none.
    pub(crate) fn command(
        &self,
        repo: &str,
        version: Option<&str>,
        test_patch: &str,
    ) -> Result<String, String> {
        let version = version.ok_or_else(|| {
            format!(
                "no \"version\": --specs {} is keyed by repo and version",
                self.path.display()
            )
        })?;
        let spec = self.get(repo, version).ok_or_else(|| {
            format!(
                "--specs {} has no entry for {repo:?} version {version:?}",
                self.path.display()
            )
        })?;
        let mut lines = Vec::new();
        for (k, v) in &spec.env_vars {
            lines.push(format!("export {k}={}", quote(v)));
        }
        if spec.python.is_none() {
            // SWE-bench's script for the other languages: no test files appended.
            lines.extend(spec.build.iter().cloned());
            lines.extend(spec.test_cmd.iter().cloned());
            return Ok(lines.join("\n"));
        }
        lines.extend(spec.eval_commands.iter().cloned());
        lines.extend(spec.install.iter().cloned());
        let directives: Vec<String> = test_directives(repo, test_patch)
            .iter()
            .map(|d| quote(d))
            .collect();
        let last = spec.test_cmd.len().saturating_sub(1);
        for (i, cmd) in spec.test_cmd.iter().enumerate() {
            if i == last && !directives.is_empty() {
                lines.push(format!("{cmd} {}", directives.join(" ")));
            } else {
                lines.push(cmd.clone());
            }
        }
        Ok(lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries as SWE-bench's own `MAP_REPO_VERSION_TO_SPECS` (swebench 4.1.0) has them,
    /// dumped with `json.dumps`.
    const SPECS: &str = r#"{
 "marshmallow-code/marshmallow": {"3.0": {"python": "3.9", "install": "python -m pip install -e '.[dev]'", "test_cmd": "pytest -rA"}},
 "django/django": {"3.0": {"python": "3.6", "packages": "requirements.txt", "install": "python -m pip install -e .", "eval_commands": ["sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen", "export LANG=en_US.UTF-8"], "test_cmd": "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"}},
 "caddyserver/caddy": {"6411": {"docker_specs": {"go_version": "1.23.8"}, "install": ["go mod tidy"], "test_cmd": ["go test -v . -run \"TestReplacerNew*\""]}},
 "redis/redis": {"13115": {"build": ["make distclean", "make"], "test_cmd": ["TERM=dumb ./runtest --durable --single unit/scripting"]}},
 "sympy/sympy": {"1.1": {"python": "3.9", "packages": "mpmath flake8", "pip_packages": ["mpmath==1.3.0", "flake8-comprehensions"], "install": "python -m pip install -e .", "test_cmd": "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose", "env_vars": {"PYTHONWARNINGS": "ignore::UserWarning"}}}
}"#;

    const TEST_PATCH: &str = "diff --git a/tests/test_x.py b/tests/test_x.py\n--- a/tests/test_x.py\n+++ b/tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/tests/data/x.json b/tests/data/x.json\n";

    #[test]
    fn swe_bench_specs_give_its_evaluation_command() {
        let s = parse(Path::new("s.json"), SPECS).unwrap();
        assert_eq!(
            s.command("marshmallow-code/marshmallow", Some("3.0"), TEST_PATCH)
                .unwrap(),
            "python -m pip install -e '.[dev]'\npytest -rA 'tests/test_x.py'"
        );
        assert_eq!(
            s.get("sympy/sympy", "1.1").unwrap().python.as_deref(),
            Some("3.9")
        );
        let sympy = s.command("sympy/sympy", Some("1.1"), "").unwrap();
        assert!(
            sympy.starts_with("export PYTHONWARNINGS='ignore::UserWarning'\npython -m pip"),
            "{sympy}"
        );
        let django = s
            .command(
                "django/django",
                Some("3.0"),
                TEST_PATCH
                    .replace("tests/test_x", "tests/auth_tests/test_x")
                    .as_str(),
            )
            .unwrap();
        assert!(
            django.ends_with("--parallel 1 'auth_tests.test_x'"),
            "{django}"
        );
        assert!(
            django.starts_with("sed -i"),
            "eval_commands first: {django}"
        );
    }

    /// SWE-bench's script for a repository that is not Python's: its `build` commands, then
    /// `test_cmd` as written (no test files after it: `go test -v x_test.go` would build
    /// that file alone), and not the `install` its image ran.
    #[test]
    fn other_languages_run_build_then_test_cmd_as_written() {
        let s = parse(Path::new("s.json"), SPECS).unwrap();
        let go_patch = TEST_PATCH.replace("tests/test_x.py", "replacer_test.go");
        assert_eq!(
            s.command("caddyserver/caddy", Some("6411"), &go_patch)
                .unwrap(),
            "go test -v . -run \"TestReplacerNew*\""
        );
        assert_eq!(
            s.command("redis/redis", Some("13115"), TEST_PATCH).unwrap(),
            "make distclean\nmake\nTERM=dumb ./runtest --durable --single unit/scripting"
        );
    }

    #[test]
    fn a_missing_entry_or_a_bad_file_is_one_line() {
        let s = parse(Path::new("s.json"), SPECS).unwrap();
        let e = s.command("a/b", Some("1.0"), "").unwrap_err();
        assert!(e.contains("no entry for \"a/b\" version \"1.0\""), "{e}");
        let e = s.command("sympy/sympy", None, "").unwrap_err();
        assert!(e.contains("no \"version\""), "{e}");
        for (bad, want) in [
            ("[]", "not a JSON object"),
            ("{\"a/b\": 3}", "a/b: not an object of versions"),
            (
                "{\"a/b\": {\"1\": {\"install\": \"x\"}}}",
                "a/b 1: no \"test_cmd\"",
            ),
            (
                "{\"a/b\": {\"1\": {\"test_cmd\": [\"x\", 3]}}}",
                "holds a value that is not a string",
            ),
            (
                "{\"a/b\": {\"1\": {\"test_cmd\": \"x\", \"env_vars\": {\"A B\": \"1\"}}}}",
                "is not a variable name",
            ),
            ("{", "not JSON"),
        ] {
            let e = parse(Path::new("s.json"), bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
            assert!(e.starts_with("--specs s.json: "), "{e}");
        }
    }
}
