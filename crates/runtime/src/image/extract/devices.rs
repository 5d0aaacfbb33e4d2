//! The device nodes an image's layers held, which the extractor skips.

/// The device nodes (character and block) the layers held, which are not unpacked: the
/// sandbox provides its own `/dev`. A debootstrap root, and images made from one, hold
/// `dev/console` and the like.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkippedDevices {
    /// How many.
    pub count: u64,
    /// The first [`SkippedDevices::SHOWN`] paths, in layer order.
    pub first: Vec<String>,
}

impl SkippedDevices {
    /// How many paths are kept.
    pub const SHOWN: usize = 3;

    pub(super) fn add(&mut self, path: &str) {
        self.count += 1;
        if self.first.len() < Self::SHOWN {
            self.first.push(path.to_string());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The one warning line (without the program's prefix), or None when none was skipped.
    pub fn warning(&self) -> Option<String> {
        let more = if self.count > self.first.len() as u64 {
            ", …"
        } else {
            ""
        };
        (self.count > 0).then(|| {
            format!(
                "skipped {} device node{} ({}{more}): the sandbox provides /dev",
                self.count,
                if self.count == 1 { "" } else { "s" },
                self.first.join(", ")
            )
        })
    }
}
