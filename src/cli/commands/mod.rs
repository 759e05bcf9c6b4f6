//! One module per subcommand.

pub mod apply;
pub mod crds;
pub mod delete;
pub mod get;
pub mod serve;
pub mod version;
