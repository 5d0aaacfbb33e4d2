//! The `reprorun` command: its command line (`cli`) over the runtime and the pipelines.

mod cli;
mod help;

// musl's own allocator hands freed groups of small blocks back to the kernel at once: a
// start made about 130 mmap and munmap calls (each munmap a TLB flush) where glibc's made 28,
// which cost more than musl saved (issue 20). dlmalloc keeps freed memory until 2 MiB are
// free at the top. One lock for all threads: reprorun's threads allocate little.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn main() {
    std::process::exit(cli::main());
}
