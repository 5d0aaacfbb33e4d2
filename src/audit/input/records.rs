//! Records as users keep them: a JSON array of objects, or JSON Lines.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::InputError;

/// Each record with its line number (its position, for an array).
pub(super) type Records = Vec<(usize, Map<String, Value>)>;

pub(super) fn read_records(path: &Path, what: &'static str) -> Result<Records, InputError> {
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    parse_records(path, &text)
}

/// A JSON array of objects, or JSON Lines (blank lines skipped). An empty file or `[]` is
/// no records (a repository without issues).
pub(super) fn parse_records(path: &Path, text: &str) -> Result<Records, InputError> {
    let line_err = |line: usize, reason: String| InputError::Line {
        path: PathBuf::from(path),
        line,
        reason,
    };
    if text.trim_start().starts_with('[') {
        let v: Vec<Value> = serde_json::from_str(text)
            .map_err(|e| line_err(e.line(), format!("not a JSON array of objects: {e}")))?;
        return v
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Object(o) => Ok((i + 1, o)),
                _ => Err(InputError::File {
                    path: path.to_path_buf(),
                    reason: format!("element {} of the array is not an object", i + 1),
                }),
            })
            .collect();
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => out.push((i + 1, o)),
            Ok(_) => return Err(line_err(i + 1, "not a JSON object".into())),
            Err(e) => return Err(line_err(i + 1, format!("malformed JSON: {e}"))),
        }
    }
    Ok(out)
}

/// A non-empty string field.
pub(super) fn string_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
