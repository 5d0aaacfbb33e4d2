//! `ps`: the processes of a container.

use super::state::{self, Root, Saved, Status};
use super::OciError;

/// Every pid of the container: its cgroup's processes, else those in init's pid namespace.
pub(super) fn pids(saved: &Saved) -> Vec<i32> {
    let mut out: Vec<i32> = Vec::new();
    for d in &saved.cgroup_dirs {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
    }
    if out.is_empty() && state::start_time(saved.pid) == Some(saved.pid_start) {
        use std::os::unix::fs::MetadataExt;
        let ns = |pid: &str| {
            std::fs::metadata(format!("/proc/{pid}/ns/pid"))
                .ok()
                .map(|m| m.ino())
        };
        let want = ns(&saved.pid.to_string());
        let mine = ns("self");
        if want.is_some() && want != mine {
            if let Ok(entries) = std::fs::read_dir("/proc") {
                for e in entries.flatten() {
                    let name = e.file_name();
                    let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
                        continue;
                    };
                    if ns(&pid.to_string()) == want {
                        out.push(pid);
                    }
                }
            }
        } else {
            out.push(saved.pid);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// `ps`: the container's processes, as a table or (`json`) a list of pids.
pub fn ps(root: &Root, id: &str, json: bool) -> Result<i32, OciError> {
    let dir = root.get(id)?;
    let saved = dir.load()?;
    let list = if dir.status(&saved) == Status::Stopped {
        Vec::new()
    } else {
        pids(&saved)
    };
    if json {
        println!("{}", serde_json::to_string(&list).expect("serializes"));
    } else {
        println!("PID\tCMD");
        for pid in list {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .trim_end_matches('\0')
                        .replace('\0', " ")
                })
                .unwrap_or_default();
            // The container's processes chose their command lines: escaped for the terminal.
            println!("{pid}\t{}", crate::util::printable(&cmd.replace('\n', " ")));
        }
    }
    Ok(0)
}
