//! `state` and `list`: the state of one container, or of every container in the root.

use std::io::Write;
use std::path::Path;

use super::state::Root;
use super::{io, OciError};

/// `state`: the OCI state of container `id` as JSON.
pub fn state(root: &Root, id: &str) -> Result<i32, OciError> {
    let dir = root.get(id)?;
    let saved = dir.load()?;
    let st = saved.oci_state(dir.status(&saved));
    println!(
        "{}",
        serde_json::to_string_pretty(&st).expect("state serializes")
    );
    Ok(0)
}

/// `list`: every container of the root (ids only with `quiet`, JSON with `json`).
pub fn list(root: &Root, json: bool, quiet: bool) -> Result<i32, OciError> {
    let mut rows = Vec::new();
    for id in root.ids()? {
        let Ok(dir) = root.get(&id) else { continue };
        let Ok(saved) = dir.load() else { continue };
        rows.push(saved.oci_state(dir.status(&saved)));
    }
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| io("write", Path::new("stdout"))(e);
    if quiet {
        for r in &rows {
            writeln!(out, "{}", r.id).map_err(w)?;
        }
    } else if json {
        writeln!(out, "{}", serde_json::to_string(&rows).expect("serializes")).map_err(w)?;
    } else {
        writeln!(out, "ID\tPID\tSTATUS\tBUNDLE\tCREATED\tOWNER").map_err(w)?;
        for r in &rows {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}",
                r.id,
                r.pid,
                r.status,
                r.bundle.display(),
                r.created,
                r.owner
            )
            .map_err(w)?;
        }
    }
    Ok(0)
}
