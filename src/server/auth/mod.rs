//! Who is calling (authentication) and whether they may (authorization), for every
//! `/api/v1` route. `/healthz` is open; `/webhooks/*` receivers check their own secrets.
//!
//! - [`authenticate`] is the middleware: `Authorization: Bearer <token>` is hashed and
//!   looked up in the [`TokenStore`]; the [`Caller`] (user, groups, cluster-wide roles) goes
//!   into the request's extensions. A missing or unknown token is a 401
//!   `unauthenticated`; so is an expired or a revoked one, naming its id and when it
//!   expired or was revoked ([`TokenRefusal`], worded as the UI's login page words it). Each use is
//!   recorded as the token's `lastUsedAt`, at most once a minute.
//!   Without that header, the web UI's session cookie (`dray_session`, see
//!   [`sessions`]) is accepted instead; a state-changing request made with the
//!   cookie must carry the session's CSRF token in `X-CSRF-Token` or is a 403.
//!   With `dray serve --auth none` every request is `anonymous` and may do anything.
//! - [`Caller::authorize`] is called by each handler with the verb, the resource (a kind's
//!   plural, or `tokens`), the project and the name: allowed when a cluster-wide binding's
//!   built-in role, or a `RoleBinding` of the project naming the user or one of their
//!   groups, has a rule for it. Otherwise a 403 `forbidden` that names user, verb and
//!   resource: ``user `ann` may not promote stages/prod in project `demo` ``.
//!
//! Pages that ask about many resources at once (the web UI's buttons, per Stage) take a
//! [`Permissions`] snapshot from [`Caller::permissions`]: one read of the project's
//! RoleBindings, then answers from memory.
//!
//! Tokens themselves (making them, the bootstrap token) are in [`super::tokens`]. Whoever
//! may create `rolebindings` in a project may give themselves any role there, as in
//! Kubernetes without its `escalate`/`bind` checks: grant it as you would `dray-admin`.
//!
//! OIDC: the web UI can log in through an OpenID provider (`dray serve --oidc-issuer …`,
//! see [`oidc`]). Such a session's [`Caller`] is the user and groups from the
//! verified ID token's claims; project `RoleBinding`s naming the user or one of the groups
//! (`kind: Group`) apply as for a token's user. Cluster-wide roles come only from the
//! cluster bindings `dray token create` records, by user or group name: an OIDC user has
//! none unless such a binding names them (user and group names are one namespace across
//! tokens and OIDC; a username not from a verified `email` is prefixed, `oidc:bob`, so it
//! cannot be taken for a token user's). The API
//! itself still takes only Dray's bearer tokens, not the provider's.
//!
//! The parts, one job each:
//! - `caller`: [`Caller`] (who, and RBAC: [`Caller::authorize`], [`Caller::permissions`]);
//! - `api_tokens`: whether a presented API token stands for anyone ([`check_token`],
//!   [`TokenRefusal`]);
//! - `middleware`: the `/api/v1` middleware ([`authenticate`]): a bearer token or a session
//!   cookie (with CSRF) to a [`Caller`];
//! - [`sessions`]: the web UI's login sessions, their cookie and CSRF token;
//! - [`login`]: logging in with an API token (a session for a valid token);
//! - [`oidc`]: logging in through an OpenID provider (discovery, the code flow, ID-token
//!   checks, the user and groups from the claims);
//! - [`kubernetes`]: Kubernetes mode ([`AuthMode::Kubernetes`]): a bearer token is a
//!   Kubernetes token, checked with a TokenReview, and every caller's RBAC questions
//!   (OIDC sessions' too) are SubjectAccessReviews ([`Authority::Kubernetes`]).
//!
//! The web UI (`src/ui`) draws the login pages on top of this; nothing here renders
//! a page or knows the UI.

mod api_tokens;
mod caller;
pub mod kubernetes;
pub mod login;
mod middleware;
pub mod oidc;
pub mod sessions;

use std::sync::Arc;

use crate::store::TokenStore;

pub use api_tokens::{TokenRefusal, check_token};
pub use caller::{Authority, Caller, Permissions};
pub use middleware::{authenticate, caller_for_session};

/// The user every request acts as under `--auth none`.
pub const ANONYMOUS: &str = "anonymous";

/// What the 401 answer tells the user to do.
const TOKEN_HINT: &str = "pass --token or set DRAY_TOKEN (create one with `dray token create`)";

/// How `dray serve` authenticates API requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AuthMode {
    /// Bearer API tokens (the default).
    #[default]
    Token,
    /// None: every request is `anonymous` with admin rights. Only when asked for.
    None,
    /// Kubernetes mode: bearer tokens are Kubernetes tokens (TokenReview), and RBAC is
    /// Kubernetes RBAC (SubjectAccessReview), for bearer tokens and UI sessions alike.
    Kubernetes(Arc<kubernetes::KubeAuth>),
}

impl PartialEq for kubernetes::KubeAuth {
    /// The same authority: the same value.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for kubernetes::KubeAuth {}

/// How requests are authenticated, and where tokens live.
pub struct Auth {
    /// Tokens or nothing.
    pub mode: AuthMode,
    /// The tokens and cluster-wide bindings.
    pub tokens: Arc<dyn TokenStore>,
    /// `<data-dir>/bootstrap-token`, removed when the token it holds is revoked; none
    /// when there is no such file to keep (Kubernetes mode).
    pub bootstrap_file: Option<std::path::PathBuf>,
}
