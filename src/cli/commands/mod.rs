//! One module per subcommand.

pub mod abort;
pub mod apply;
pub mod approve;
pub mod audit;
pub mod crds;
pub mod delete;
pub mod freight;
pub mod get;
pub mod hold;
pub mod promote;
pub mod refresh;
pub mod serve;
pub mod token;
pub mod verify;
pub mod version;
