//! What a study writes for other tools: SWE-bench's evaluation layout ([`swebench`]).

pub(crate) mod swebench;
