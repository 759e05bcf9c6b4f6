//! Every environment variable Dray reads, in one place.

/// The server URL for CLI commands.
pub const DRAY_SERVER: &str = "DRAY_SERVER";
/// The project for CLI commands.
pub const DRAY_PROJECT: &str = "DRAY_PROJECT";
/// The API token for CLI commands (`dray serve` writes the first one to
/// `<data-dir>/bootstrap-token`).
pub const DRAY_TOKEN: &str = "DRAY_TOKEN";
/// The log filter of `dray serve` (tracing's `EnvFilter` syntax, e.g. `info,dray=debug`).
pub const DRAY_LOG: &str = "DRAY_LOG";
/// Set (to anything) to turn colour off.
pub const NO_COLOR: &str = "NO_COLOR";
