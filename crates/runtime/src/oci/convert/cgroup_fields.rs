//! `linux.resources` `blockIO`, `hugepageLimits`, `network`, `rdma` and `unified` as cgroup
//! files, as runc writes them: each on the hierarchy the container's cgroup ends up on. A
//! controller the host lacks fails `create` naming it (and so the field), as runc fails;
//! `unified` on a v1 cgroup is refused, as runc refuses it.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{bad, ConvertError};
use crate::oci::spec;
use crate::security::{CgroupFile, Resources};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BlockIo {
    weight: Option<u16>,
    #[serde(default)]
    weight_device: Vec<WeightDevice>,
    #[serde(default)]
    throttle_read_bps_device: Vec<Throttle>,
    #[serde(default)]
    throttle_write_bps_device: Vec<Throttle>,
    #[serde(default)]
    throttle_read_iops_device: Vec<Throttle>,
    #[serde(default)]
    throttle_write_iops_device: Vec<Throttle>,
}

#[derive(Deserialize)]
struct WeightDevice {
    major: i64,
    minor: i64,
    weight: Option<u16>,
}

#[derive(Deserialize)]
struct Throttle {
    major: i64,
    minor: i64,
    rate: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HugepageLimit {
    page_size: String,
    limit: u64,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Network {
    #[serde(rename = "classID")]
    class_id: Option<u32>,
    #[serde(default)]
    priorities: Vec<Priority>,
}

#[derive(Deserialize)]
struct Priority {
    name: String,
    priority: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rdma {
    hca_handles: Option<u32>,
    hca_objects: Option<u32>,
}

fn parse<T: serde::de::DeserializeOwned>(
    v: &Option<serde_json::Value>,
    field: &str,
) -> Result<Option<T>, ConvertError> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| bad(format!("linux.resources.{field}"), e.to_string())),
    }
}

fn pair(v1: Option<(&str, String)>, v2: Option<(&str, String)>) -> CgroupFile {
    CgroupFile {
        v1: v1.map(|(n, v)| (n.to_string(), v)),
        v2: v2.map(|(n, v)| (n.to_string(), v)),
    }
}

/// Adds the files of the fields this module covers to `out`.
pub(super) fn add(r: &spec::Resources, out: &mut Resources) -> Result<(), ConvertError> {
    if let Some(b) = parse::<BlockIo>(&r.block_io, "blockIO")? {
        if let Some(w) = b.weight.filter(|w| *w > 0) {
            out.files.push(pair(
                Some(("blkio.weight", w.to_string())),
                Some(("io.weight", format!("default {w}"))),
            ));
        }
        for d in &b.weight_device {
            if let Some(w) = d.weight.filter(|w| *w > 0) {
                let dev = format!("{}:{}", d.major, d.minor);
                out.files.push(pair(
                    Some(("blkio.weight_device", format!("{dev} {w}"))),
                    Some(("io.weight", format!("{dev} {w}"))),
                ));
            }
        }
        for (list, v1, key) in [
            (&b.throttle_read_bps_device, "read_bps_device", "rbps"),
            (&b.throttle_write_bps_device, "write_bps_device", "wbps"),
            (&b.throttle_read_iops_device, "read_iops_device", "riops"),
            (&b.throttle_write_iops_device, "write_iops_device", "wiops"),
        ] {
            for t in list {
                let dev = format!("{}:{}", t.major, t.minor);
                out.files.push(CgroupFile {
                    v1: Some((format!("blkio.throttle.{v1}"), format!("{dev} {}", t.rate))),
                    v2: Some(("io.max".into(), format!("{dev} {key}={}", t.rate))),
                });
            }
        }
    }
    for h in parse::<Vec<HugepageLimit>>(&r.hugepage_limits, "hugepageLimits")?.unwrap_or_default()
    {
        out.files.push(CgroupFile {
            v1: Some((
                format!("hugetlb.{}.limit_in_bytes", h.page_size),
                h.limit.to_string(),
            )),
            v2: Some((format!("hugetlb.{}.max", h.page_size), h.limit.to_string())),
        });
    }
    if let Some(n) = parse::<Network>(&r.network, "network")? {
        // v1 only (runc writes nothing for them on v2).
        if let Some(id) = n.class_id {
            out.files
                .push(pair(Some(("net_cls.classid", id.to_string())), None));
        }
        for p in &n.priorities {
            let line = format!("{} {}", p.name, p.priority);
            out.files
                .push(pair(Some(("net_prio.ifpriomap", line)), None));
        }
    }
    let rdma = parse::<BTreeMap<String, Rdma>>(&r.rdma, "rdma")?.unwrap_or_default();
    for (device, limit) in rdma {
        let mut line = device;
        if let Some(h) = limit.hca_handles {
            line.push_str(&format!(" hca_handle={h}"));
        }
        if let Some(o) = limit.hca_objects {
            line.push_str(&format!(" hca_object={o}"));
        }
        out.files.push(pair(
            Some(("rdma.max", line.clone())),
            Some(("rdma.max", line)),
        ));
    }
    if let Some(u) = &r.unified {
        for key in u.keys() {
            if key.contains('/') || key.starts_with('.') || !key.contains('.') {
                return Err(bad(
                    format!("linux.resources.unified.{key}"),
                    "not a cgroup v2 file name",
                ));
            }
        }
        out.unified = u.clone();
    }
    Ok(())
}
