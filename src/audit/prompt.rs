//! (temporary stand-in)

pub(crate) struct PromptOptions {
    pub(crate) paper_file: Option<String>,
    pub(crate) repo_dir: String,
    pub(crate) out_file: String,
    pub(crate) order_instruction: bool,
    pub(crate) max_findings: usize,
}

pub(crate) fn prompt(opts: &PromptOptions) -> String {
    format!(
        "audit {} {:?} -> {} {} {}",
        opts.repo_dir, opts.paper_file, opts.out_file, opts.order_instruction, opts.max_findings
    )
}
