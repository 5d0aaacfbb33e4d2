//! TODO (being written on branch reproduce-stats)
use super::InstanceRuns;
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub k: u32,
}
pub fn summarize(_i: &[InstanceRuns], k: u32) -> Summary {
    Summary { k }
}
