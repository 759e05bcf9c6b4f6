//! One module per subcommand.

pub mod apply;
pub mod crds;
pub mod delete;
pub mod freight;
pub mod get;
pub mod refresh;
pub mod serve;
pub mod version;
