//! Records as users keep them, for every pipeline's input files: a JSON array of objects,
//! or JSON Lines (blank lines skipped), each with its line number.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use thiserror::Error;

/// Each record with its line number (its position, for an array).
pub type Records = Vec<(usize, Map<String, Value>)>;

/// Why a file of records could not be read; each pipeline's input error takes these over
/// as its own variants (`From`).
#[derive(Debug, Error)]
pub enum RecordsError {
    #[error("read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {reason}")]
    Line {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
}

/// Reads the records of `path` (`what` names the file in an error). An empty file or `[]`
/// is no records.
pub fn read_records(path: &Path, what: &'static str) -> Result<Records, RecordsError> {
    let text = std::fs::read_to_string(path).map_err(|source| RecordsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    parse_records(path, &text)
}

/// The records of `text`, read from `path`.
pub(crate) fn parse_records(path: &Path, text: &str) -> Result<Records, RecordsError> {
    let line_err = |line: usize, reason: String| RecordsError::Line {
        path: path.to_path_buf(),
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
                _ => Err(RecordsError::File {
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
pub fn string_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
