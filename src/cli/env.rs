//! Every environment variable Dray reads, in one place, and how the CLI reads them: an
//! empty value (`DRAY_SERVER=`) counts as unset.

/// The server URL for CLI commands.
pub const DRAY_SERVER: &str = "DRAY_SERVER";
/// The project for CLI commands.
pub const DRAY_PROJECT: &str = "DRAY_PROJECT";
/// The API token for CLI commands (`dray serve` writes the first one to
/// `<data-dir>/bootstrap-token`).
pub const DRAY_TOKEN: &str = "DRAY_TOKEN";
/// The CLI's saved contexts file (`dray login`, `dray config`); default
/// `$XDG_CONFIG_HOME/dray/config.yaml`, else `~/.config/dray/config.yaml`.
pub const DRAY_CONFIG: &str = "DRAY_CONFIG";
/// The base directory of user configuration files (XDG).
pub const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";
/// The user's home directory.
pub const HOME: &str = "HOME";
/// The log filter of `dray serve` (tracing's `EnvFilter` syntax, e.g. `info,dray=debug`).
pub const DRAY_LOG: &str = "DRAY_LOG";
/// Set (to anything non-empty) to make `dray` exit 0 once its command line parses, doing
/// nothing: the test that checks every documented command uses it.
pub const DRAY_PARSE_ONLY: &str = "DRAY_PARSE_ONLY";
/// Set (to anything) to turn colour off.
pub const NO_COLOR: &str = "NO_COLOR";

/// The value of the environment variable `name`, or `None` when it is unset, empty or
/// only blanks (so `DRAY_SERVER=` means "not given", as it does for kubectl's variables).
pub fn non_empty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
