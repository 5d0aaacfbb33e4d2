//! `spec`: a default config.json written into a bundle.

use std::path::Path;

use super::{io, spec, OciError};

/// `spec`: writes a default config.json into `bundle`.
pub fn write_spec(bundle: &Path, rootless: bool) -> Result<i32, OciError> {
    let path = bundle.join("config.json");
    if path.exists() {
        return Err(OciError::Usage(format!(
            "{} exists already; remove it first",
            path.display()
        )));
    }
    let text = serde_json::to_string_pretty(&spec::default_spec(rootless)).expect("serializes");
    std::fs::write(&path, text + "\n").map_err(io("write", &path))?;
    Ok(0)
}
