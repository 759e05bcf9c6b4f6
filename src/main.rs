//! The `dray` binary: the CLI and, with `dray serve`, the server. See `dray --help`.

fn main() -> std::process::ExitCode {
    dray::cli::main()
}
