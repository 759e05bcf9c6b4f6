//! The options of the commands that talk to the server ("Client options" in `--help`):
//! `--server`, `--token`, `--context` and `-p`. Only those commands take them: `serve`,
//! `controller`, `crds` and the other local commands do not. Each is global within its
//! command, so `dray get stages -p demo` and `dray get -p demo stages` both work. Given
//! before the command (`dray -p demo get stages`, as kubectl allows) they are still taken,
//! unlisted ([`LeadingClientArgs`]); a command that takes none refuses them there.

use super::server_url::{self, ServerUrl};

/// The heading client options are listed under in `--help`.
pub const CLIENT_OPTIONS: &str = "Client options";

/// How to reach the server: its URL, the token and the saved context.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConnectArgs {
    /// The Dray server's URL, with `http://` or `https://` [env: DRAY_SERVER] (default: the
    /// current context's, else http://127.0.0.1:7070).
    #[arg(long, global = true, value_name = "URL", value_parser = server_url::parse, help_heading = CLIENT_OPTIONS)]
    pub server: Option<ServerUrl>,
    /// The API token [env: DRAY_TOKEN] (default: the current context's; see `dray login`
    /// and `dray token create`; a new server's first one is in `<data-dir>/bootstrap-token`).
    #[arg(long, global = true, value_name = "TOKEN", help_heading = CLIENT_OPTIONS)]
    pub token: Option<String>,
    /// The saved context to use instead of the current one (`dray config get-contexts`).
    #[arg(long, global = true, value_name = "NAME", help_heading = CLIENT_OPTIONS)]
    pub context: Option<String>,
}

/// The client options of commands that work in a project.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClientArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The project [env: DRAY_PROJECT] (default: the current context's); may be omitted
    /// when only one project exists.
    #[arg(short = 'p', long, global = true, value_name = "PROJECT", help_heading = CLIENT_OPTIONS)]
    pub project: Option<String>,
}

/// A client command's own arguments and the client options.
#[derive(clap::Args, Debug)]
pub struct Client<A: clap::Args> {
    /// The command's own arguments.
    #[command(flatten)]
    pub args: A,
    /// The client options.
    #[command(flatten)]
    pub client: ClientArgs,
}

/// The client options given before the command (`dray -p demo get stages`): not listed in
/// `--help`, taken by client commands (the command's own win), refused by the others.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LeadingClientArgs {
    /// See [`ConnectArgs::server`].
    #[arg(long, hide = true, value_parser = server_url::parse)]
    pub server: Option<ServerUrl>,
    /// See [`ConnectArgs::token`].
    #[arg(long, hide = true)]
    pub token: Option<String>,
    /// See [`ConnectArgs::context`].
    #[arg(long, hide = true)]
    pub context: Option<String>,
    /// See [`ClientArgs::project`].
    #[arg(short = 'p', long, hide = true)]
    pub project: Option<String>,
}

impl LeadingClientArgs {
    /// Whether any was given.
    pub fn is_empty(&self) -> bool {
        self.server.is_none()
            && self.token.is_none()
            && self.context.is_none()
            && self.project.is_none()
    }

    /// `client` with each option it lacks taken from these.
    pub fn under(self, client: ClientArgs) -> ClientArgs {
        let project = client.project.or_else(|| self.project.clone());
        ClientArgs {
            connect: self.under_connect(client.connect),
            project,
        }
    }

    /// `connect` with each option it lacks taken from these.
    pub fn under_connect(self, connect: ConnectArgs) -> ConnectArgs {
        ConnectArgs {
            server: connect.server.or(self.server),
            token: connect.token.or(self.token),
            context: connect.context.or(self.context),
        }
    }
}
