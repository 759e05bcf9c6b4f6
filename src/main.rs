//! The `dray` binary: the CLI and, with `dray serve`, the server. See `dray --help`.

/// mimalloc rather than glibc's malloc: the server frees thousands of small JSON values per
/// large answer, and glibc made the next request pay to consolidate them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    dray::cli::main()
}
