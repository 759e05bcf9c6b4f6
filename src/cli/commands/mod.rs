//! One module per subcommand.

pub mod abort;
pub mod apply;
pub mod approve;
pub mod audit;
pub mod board;
pub mod completion;
pub mod config;
pub mod controller;
pub mod convert;
pub mod crds;
pub mod delete;
pub mod durations;
pub mod freeze;
pub mod freight;
pub mod freight_diff;
pub mod freight_names;
pub mod get;
pub mod hold;
pub mod listing_filters;
pub mod login;
pub mod promote;
pub mod promote_downstream;
pub mod promote_preview;
pub mod refresh;
pub mod reject;
pub mod serve;
pub mod signoff;
pub mod stage_order;
pub mod token;
pub mod verify;
pub mod version;
pub mod watch;

/// Which Freight a command is about: `--freight NAME` or `--alias NAME`, exactly one; each
/// takes the full id, a unique id prefix (7 characters or more) or the alias — the server
/// resolves either the same way (`server::freight_names`).
#[derive(clap::Args, Debug)]
pub struct FreightChoice {
    /// The Freight: its id, a unique id prefix (7+ characters) or its alias.
    #[arg(long, conflicts_with = "alias", required_unless_present = "alias")]
    pub freight: Option<String>,
    /// The Freight, named the same ways as `--freight` (usually by its alias).
    #[arg(long)]
    pub alias: Option<String>,
}
