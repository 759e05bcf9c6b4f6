//! One module per subcommand.

pub mod abort;
pub mod apply;
pub mod approve;
pub mod audit;
pub mod completion;
pub mod config;
pub mod controller;
pub mod crds;
pub mod delete;
pub mod freight;
pub mod get;
pub mod hold;
pub mod login;
pub mod promote;
pub mod promote_downstream;
pub mod refresh;
pub mod serve;
pub mod token;
pub mod verify;
pub mod version;

/// Which Freight a command is about: `--freight ID` or `--alias A`, exactly one.
#[derive(clap::Args, Debug)]
pub struct FreightChoice {
    /// The Freight, by id.
    #[arg(long, conflicts_with = "alias", required_unless_present = "alias")]
    pub freight: Option<String>,
    /// The Freight, by alias.
    #[arg(long)]
    pub alias: Option<String>,
}
