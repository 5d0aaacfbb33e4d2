//! The study's input: SWE-bench instances (JSON array or JSONL) and predictions (JSONL),
//! the recorded outcomes (a SWE-bench `report.json`, or a field per instance), and
//! reprorun's optional per-instance fields. Everything is checked before anything is
//! written, so bad input leaves nothing behind. Formats: `spec/reproduce.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use reprorun_pipeline::records::{string_field, Records, RecordsError};
use thiserror::Error;

pub(crate) mod images;
pub(crate) mod specs;
pub(crate) mod tasks;

#[derive(Debug, Error)]
pub enum InputError {
    /// Reading the file, a record of it, or the file as a whole (shared by every pipeline's
    /// input, `reprorun_pipeline::records`).
    #[error(transparent)]
    Records(#[from] RecordsError),
    #[error("instance {id}: {reason}")]
    Instance { id: String, reason: String },
    #[error(transparent)]
    Specs(#[from] specs::SpecsError),
    #[error(transparent)]
    Tasks(#[from] tasks::TasksError),
    #[error("--instance-ids: {ids} not in the instances file")]
    UnknownIds { ids: String },
    #[error("{0}: no instance has a prediction; nothing to run")]
    NothingToRun(PathBuf),
}

/// One instance, resolved: paths absolute, dates parsed, its prediction attached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    pub instance_id: String,
    /// `owner/name`, informational.
    pub repo: String,
    /// A local git repository (a directory) or bundle file.
    pub repo_path: PathBuf,
    pub base_commit: String,
    pub test_patch: String,
    pub model_patch: String,
    pub model_name: String,
    pub fail_to_pass: Vec<String>,
    pub pass_to_pass: Vec<String>,
    /// Run by `/bin/sh -c` in the checkout.
    pub test_cmd: String,
    /// The image to run on, pinned to its digest (`NAME@sha256:…`) once pulled or built
    /// (`images::prepare`).
    pub image: Option<String>,
    pub rootfs: Option<PathBuf>,
    /// The frozen mirror the shim arm installs from.
    pub mirror: Option<PathBuf>,
    /// The cassette the shim arm's network is answered from (`exec --net-replay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cassette: Option<PathBuf>,
    /// Unix seconds: `bench_date`, else `created_at`.
    pub bench_date: i64,
    pub recorded_resolved: bool,
}

/// The index file that makes a directory a cassette.
const CASSETTE_INDEX: &str = reprorun_runtime::net::cassette::INDEX;

/// What the caller adds to the files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Defaults {
    /// `--repos DIR`: where `repo` `owner/name` is found as `DIR/owner__name` or
    /// `DIR/owner/name` when an instance has no `repo_path`.
    pub repos: Option<PathBuf>,
    /// `--test-cmd`: for instances without `test_cmd`.
    pub test_cmd: Option<String>,
    /// `--recorded FILE`: a SWE-bench report.json.
    pub recorded: Option<PathBuf>,
    /// `--mirror DIR`: for instances without `mirror`.
    pub mirror: Option<PathBuf>,
    /// `--net-cassettes DIR`: `DIR/<instance_id>` for instances without `cassette`, when it
    /// holds a cassette.
    pub net_cassettes: Option<PathBuf>,
    /// `--store DIR`: the image store `image` is looked up in.
    pub store: Option<PathBuf>,
    /// `--specs FILE`: test commands per repo and version, for instances without
    /// `test_cmd`.
    pub specs: Option<PathBuf>,
    /// `--instance-ids`: only these instances (empty: all).
    pub instance_ids: Vec<String>,
    /// `--pull`: when a missing `image` is pulled.
    pub pull: images::PullPolicy,
    /// `--registries-conf FILE`: mirrors and registry locations for pulls.
    pub registries_conf: Option<PathBuf>,
    /// `--build-engine`: podman or docker for `dockerfile` (default: podman, else docker).
    pub build_engine: Option<reprorun_runtime::image::build::Engine>,
    /// `--build-runtime`: what runs a Dockerfile's `RUN` steps.
    pub build_runtime: images::BuildRuntime,
    /// `--task-environment`: a Harbor task's `environment/Dockerfile`, or the host's root.
    pub task_environment: tasks::TaskEnvironment,
}

/// The instances that have a prediction, in instance-id order, and the ids skipped for
/// having none.
#[derive(Debug)]
pub(crate) struct Input {
    pub instances: Vec<Instance>,
    pub without_prediction: Vec<String>,
    /// Predictions for instances not in the instances file (or not selected), skipped.
    pub unknown_predictions: usize,
}

/// Reads and checks everything.
pub(crate) fn load(
    instances: &Path,
    predictions: &Path,
    defaults: &Defaults,
) -> Result<Input, InputError> {
    let (base, raw) = if instances.is_dir() {
        (
            instances.to_path_buf(),
            tasks::read(instances, defaults.task_environment)?,
        )
    } else {
        let base = instances
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        (base, read_records(instances, "instances")?)
    };
    let gold = is_gold(predictions);
    let preds = if gold {
        gold_predictions(&raw)
    } else {
        read_records(predictions, "predictions")?
    };
    let recorded = match &defaults.recorded {
        Some(path) => Some(read_report(path)?),
        None => None,
    };
    let specs = defaults.specs.as_deref().map(specs::read).transpose()?;

    let mut by_id: BTreeMap<String, (usize, &serde_json::Map<String, Value>)> = BTreeMap::new();
    for (line, obj) in &raw {
        let id = string_field(obj, "instance_id").ok_or_else(|| RecordsError::Line {
            path: instances.to_path_buf(),
            line: *line,
            reason: "no \"instance_id\" string".into(),
        })?;
        if by_id.insert(id.clone(), (*line, obj)).is_some() {
            return Err(InputError::from(RecordsError::Line {
                path: instances.to_path_buf(),
                line: *line,
                reason: format!("instance {id:?} appears twice"),
            }));
        }
    }
    select(&mut by_id, &defaults.instance_ids)?;

    let mut patches: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut unknown = 0;
    for (line, obj) in &preds {
        let bad = |reason: String| RecordsError::Line {
            path: predictions.to_path_buf(),
            line: *line,
            reason,
        };
        let id = string_field(obj, "instance_id")
            .ok_or_else(|| bad("no \"instance_id\" string".into()))?;
        if !by_id.contains_key(&id) {
            // A predictions file often covers a whole benchmark; a study, part of it.
            unknown += 1;
            continue;
        }
        let patch = match obj.get("model_patch") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(_) => return Err(bad("\"model_patch\" is not a string".into()).into()),
        };
        let model = string_field(obj, "model_name_or_path").unwrap_or_default();
        if patches.insert(id.clone(), (patch, model)).is_some() {
            return Err(bad(format!("a second prediction for instance {id:?}")).into());
        }
    }
    if patches.is_empty() {
        return Err(InputError::NothingToRun(predictions.to_path_buf()));
    }

    let mut out = Vec::new();
    let mut without = Vec::new();
    let mut sources = Vec::new();
    for (id, (_, obj)) in &by_id {
        let Some((patch, model)) = patches.remove(id) else {
            without.push(id.clone());
            continue;
        };
        let (inst, source) = instance(
            id,
            obj,
            patch,
            model,
            &base,
            defaults,
            (recorded.as_ref(), specs.as_ref(), gold),
        )?;
        if let Some(s) = source {
            sources.push((out.len(), s));
        }
        out.push(inst);
    }
    // Everything else checked: now the images are pulled or built, each once.
    images::prepare(&mut out, sources, defaults)?;
    Ok(Input {
        instances: out,
        without_prediction: without,
        unknown_predictions: unknown,
    })
}

/// Keeps the instances `ids` names (all when it is empty); an id not there is an error.
fn select(
    by_id: &mut BTreeMap<String, (usize, &serde_json::Map<String, Value>)>,
    ids: &[String],
) -> Result<(), InputError> {
    if ids.is_empty() {
        return Ok(());
    }
    let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|id| !by_id.contains_key(*id))
        .collect();
    if !missing.is_empty() {
        return Err(InputError::UnknownIds {
            ids: missing.join(", "),
        });
    }
    by_id.retain(|id, _| wanted.contains(id.as_str()));
    Ok(())
}

fn instance(
    id: &str,
    obj: &serde_json::Map<String, Value>,
    model_patch: String,
    model_name: String,
    base: &Path,
    defaults: &Defaults,
    (recorded, specs, gold): (Option<&BTreeMap<String, bool>>, Option<&specs::Specs>, bool),
) -> Result<(Instance, Option<images::Source>), InputError> {
    let bad = |reason: String| InputError::Instance {
        id: id.to_string(),
        reason,
    };
    let text = |key: &str| -> Result<Option<String>, InputError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(format!("\"{key}\" is not a string"))),
        }
    };
    let path = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            p
        } else {
            base.join(p)
        }
    };
    let repo = text("repo")?.unwrap_or_default();
    let repo_path = match text("repo_path")? {
        Some(p) => path(p),
        None => {
            find_repo(&repo, defaults).ok_or_else(|| {
                bad("no repository: add \"repo_path\" (a local git repository or bundle) or pass --repos DIR holding owner__name".into())
            })?
        }
    };
    if !repo_path.exists() {
        return Err(bad(format!(
            "repository {} does not exist: fix \"repo_path\" (relative paths are read from the instances file's directory)",
            repo_path.display()
        )));
    }
    let base_commit = text("base_commit")?
        .filter(|c| !c.is_empty())
        .ok_or_else(|| bad("no \"base_commit\"".into()))?;
    if base_commit.starts_with('-') || base_commit.contains(char::is_whitespace) {
        return Err(bad(format!(
            "\"base_commit\" {base_commit:?} is not a revision"
        )));
    }
    let test_patch = text("test_patch")?.unwrap_or_default();
    let test_cmd = match (text("test_cmd")?, specs) {
        (Some(c), _) => Some(c),
        (None, Some(s)) => match s.command(&repo, version(obj).as_deref(), &test_patch) {
            Ok(c) => Some(c),
            Err(_) if defaults.test_cmd.is_some() => defaults.test_cmd.clone(),
            Err(e) => return Err(bad(format!("{e}; or pass --test-cmd"))),
        },
        (None, None) => defaults.test_cmd.clone(),
    }
    .filter(|c| !c.trim().is_empty())
    .ok_or_else(|| {
        bad("no test command: add \"test_cmd\", pass --specs FILE or --test-cmd".into())
    })?;
    let date = |key: &str| -> Result<Option<i64>, InputError> {
        text(key)?
            .map(|t| {
                parse_when(&t).ok_or_else(|| {
                    bad(format!(
                        "\"{key}\" {t:?} is not a date (2023-05-10 or 2023-05-10T12:00:00Z)"
                    ))
                })
            })
            .transpose()
    };
    let bench_date = match date("bench_date")? {
        Some(d) => d,
        None => date("created_at")?.ok_or_else(|| {
            bad(
                "no \"bench_date\" or \"created_at\": the shim's clock needs the benchmark date"
                    .into(),
            )
        })?,
    };
    let recorded_resolved = recorded_outcome(id, obj, recorded, gold).map_err(&bad)?;
    let source = images::Source::of(
        text("image")?,
        text("dockerfile")?.map(path),
        text("context")?.map(path),
    )
    .map_err(&bad)?;
    let rootfs = text("rootfs")?.map(path);
    if source.is_some() && rootfs.is_some() {
        return Err(bad(
            "\"image\" (or \"dockerfile\") and \"rootfs\" cannot both be set".into(),
        ));
    }
    if let Some(r) = &rootfs {
        if !r.is_dir() {
            return Err(bad(format!("rootfs {} is not a directory", r.display())));
        }
    }
    let mirror = text("mirror")?
        .map(path)
        .or_else(|| defaults.mirror.clone());
    if let Some(m) = mirror.as_deref().filter(|m| !m.join("lock.json").is_file()) {
        return Err(bad(format!(
            "mirror {} has no lock.json: make it with `reprorun mirror pull` or `mirror add`",
            m.display()
        )));
    }
    let cassette = match text("cassette")?.map(path) {
        Some(c) if !c.join(CASSETTE_INDEX).is_file() => {
            return Err(bad(format!(
            "cassette {} has no {CASSETTE_INDEX}: record one with `reprorun exec --net-record DIR`",
            c.display()
        )))
        }
        Some(c) => Some(c),
        None => defaults
            .net_cassettes
            .as_ref()
            .map(|d| d.join(id))
            .filter(|c| c.join(CASSETTE_INDEX).is_file()),
    };
    let inst = Instance {
        instance_id: id.to_string(),
        repo,
        repo_path,
        base_commit,
        test_patch,
        model_patch,
        model_name,
        fail_to_pass: test_list(obj, "FAIL_TO_PASS").map_err(&bad)?,
        pass_to_pass: test_list(obj, "PASS_TO_PASS").map_err(&bad)?,
        test_cmd,
        // Set, pinned to its digest, once the image is ready (`images::prepare`).
        image: None,
        rootfs,
        mirror,
        cassette,
        bench_date,
        recorded_resolved,
    };
    Ok((inst, source))
}

/// `--predictions gold`, as SWE-bench's `--predictions_path gold`: each instance's own
/// `patch` is its prediction.
pub(crate) fn is_gold(predictions: &Path) -> bool {
    predictions.as_os_str() == "gold"
}

/// The gold predictions of `raw`: `model_name_or_path` `gold`, `model_patch` its `patch`
/// (empty when it has none).
fn gold_predictions(raw: &Records) -> Records {
    raw.iter()
        .map(|(line, obj)| {
            let mut p = serde_json::Map::new();
            for (key, value) in [
                ("instance_id", obj.get("instance_id")),
                ("model_patch", obj.get("patch")),
            ] {
                p.insert(key.into(), value.cloned().unwrap_or(Value::Null));
            }
            p.insert("model_name_or_path".into(), Value::String("gold".into()));
            (*line, p)
        })
        .collect()
}

/// What `load` reads from `path` (the instances file, a directory of tasks, or `gold`),
/// digested: the cluster plan's record of its input.
pub(crate) fn digest(path: &Path) -> Result<String, InputError> {
    use reprorun_pipeline::store::sha256_hex;
    if is_gold(path) {
        return Ok(sha256_hex(b"gold"));
    }
    if path.is_dir() {
        return Ok(tasks::digest(path)?);
    }
    let bytes = std::fs::read(path).map_err(|source| RecordsError::Read {
        what: "input",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(sha256_hex(&bytes))
}

/// SWE-bench's `version`: a string, or a number as JSON writes it.
fn version(obj: &serde_json::Map<String, Value>) -> Option<String> {
    match obj.get("version")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `--repos DIR`'s repository for `owner/name`: `DIR/owner__name`, its bundle
/// `DIR/owner__name.bundle`, `DIR/owner/name` or `DIR/name`.
fn find_repo(repo: &str, defaults: &Defaults) -> Option<PathBuf> {
    let dir = defaults.repos.as_ref()?;
    [
        dir.join(repo.replace('/', "__")),
        dir.join(format!("{}.bundle", repo.replace('/', "__"))),
        dir.join(repo),
        dir.join(repo.rsplit('/').next().unwrap_or("")),
    ]
    .into_iter()
    .find(|p| !repo.is_empty() && p.exists())
}

/// The instance's recorded outcome: `--recorded`'s, else its `recorded_resolved`, else its
/// `recorded`.
fn recorded_outcome(
    id: &str,
    obj: &serde_json::Map<String, Value>,
    recorded: Option<&BTreeMap<String, bool>>,
    gold: bool,
) -> Result<bool, String> {
    match (recorded.and_then(|r| r.get(id)), obj.get("recorded_resolved"), obj.get("recorded")) {
        // The benchmark's own validation: its lists are what the gold patch resolves.
        (None, None, None) if gold => Ok(true),
        (Some(r), _, _) => Ok(*r),
        (None, Some(Value::Bool(b)), _) => Ok(*b),
        (None, None, Some(v)) => recorded_value(v)
            .ok_or_else(|| "\"recorded\" must be true/false, \"resolved\"/\"unresolved\" or {\"resolved\": bool}".into()),
        (None, Some(_), _) => Err("\"recorded_resolved\" is not true or false".into()),
        (None, None, None) => Err(
            "no recorded outcome: add \"recorded_resolved\" or pass --recorded report.json".into(),
        ),
    }
}

/// SWE-bench writes the test lists either as JSON arrays or as strings holding one.
fn test_list(obj: &serde_json::Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    let strings = |v: &Vec<Value>| {
        v.iter()
            .map(|t| t.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("\"{key}\" holds a value that is not a string"))
    };
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(v)) => strings(v),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Vec::new()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(v)) => strings(&v),
            _ => Err(format!(
                "\"{key}\" is a string but not a JSON array of test names"
            )),
        },
        Some(_) => Err(format!("\"{key}\" is not a list of test names")),
    }
}

fn recorded_value(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "resolved" => Some(true),
        Value::String(s) if s == "unresolved" => Some(false),
        Value::Object(o) => o.get("resolved").and_then(Value::as_bool),
        _ => None,
    }
}

/// Dates as SWE-bench writes them: RFC 3339, `2023-05-10 12:00:00`, or a plain date.
pub(crate) fn parse_when(text: &str) -> Option<i64> {
    use reprorun_runtime::determinism::date::parse_date;
    let t = text.trim();
    parse_date(t)
        .ok()
        .or_else(|| parse_date(&format!("{}Z", t.replacen(' ', "T", 1))).ok())
        .or_else(|| t.get(..10).and_then(|d| parse_date(d).ok()))
}

/// A SWE-bench report: `{"ID": {"resolved": bool, ...}, ...}` (per-instance report.json
/// files merged) or the run summary `{"resolved_ids": [...], "unresolved_ids": [...], ...}`.
fn read_report(path: &Path) -> Result<BTreeMap<String, bool>, InputError> {
    let bad = |reason: &str| RecordsError::File {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let text = std::fs::read_to_string(path).map_err(|source| RecordsError::Read {
        what: "--recorded",
        path: path.to_path_buf(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(&format!("not JSON: {e}")))?;
    let obj = v.as_object().ok_or_else(|| bad("not a JSON object"))?;
    let mut out = BTreeMap::new();
    if obj.contains_key("resolved_ids") {
        for (key, resolved) in [
            ("resolved_ids", true),
            ("unresolved_ids", false),
            ("error_ids", false),
            ("empty_patch_ids", false),
        ] {
            for id in obj.get(key).and_then(Value::as_array).into_iter().flatten() {
                let id = id
                    .as_str()
                    .ok_or_else(|| bad(&format!("\"{key}\" holds a non-string")))?;
                out.insert(id.to_string(), resolved);
            }
        }
        return Ok(out);
    }
    for (id, entry) in obj {
        let resolved = entry
            .get("resolved")
            .and_then(Value::as_bool)
            .ok_or_else(|| bad(&format!("entry {id:?} has no \"resolved\" true/false")))?;
        out.insert(id.clone(), resolved);
    }
    Ok(out)
}

/// The records of `path`, at least one.
fn read_records(path: &Path, what: &'static str) -> Result<Records, InputError> {
    let out = reprorun_pipeline::records::read_records(path, what)?;
    if out.is_empty() {
        return Err(InputError::from(RecordsError::File {
            path: path.to_path_buf(),
            reason: "no records (expected JSON Lines or a JSON array of objects)".into(),
        }));
    }
    Ok(out)
}

/// Every test the SWE-bench rule looks at.
impl Instance {
    pub fn listed_tests(&self) -> BTreeSet<&str> {
        self.fail_to_pass
            .iter()
            .chain(&self.pass_to_pass)
            .map(String::as_str)
            .collect()
    }
}

#[cfg(test)]
mod tests;
