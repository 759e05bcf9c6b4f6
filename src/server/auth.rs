//! Who is calling (authentication) and whether they may (authorization), for every
//! `/api/v1` route. `/healthz` is open; `/webhooks/*` receivers check their own secrets.
//!
//! - [`authenticate`] is the middleware: `Authorization: Bearer <token>` is hashed and
//!   looked up in the [`TokenStore`]; the [`Caller`] (user, groups, cluster-wide roles) goes
//!   into the request's extensions. A missing or unknown token is a 401
//!   `unauthenticated`; so is an expired or a revoked one, naming its id and when it
//!   expired or was revoked ([`TokenRefusal`], worded as the UI's login page words it). Each use is
//!   recorded as the token's `lastUsedAt`, at most once a minute ([`LAST_USED_EVERY`]).
//!   Without that header, the web UI's session cookie (`dray_session`, see
//!   [`crate::ui::session`]) is accepted instead; a state-changing request made with the
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
//! see [`crate::ui::oidc`]). Such a session's [`Caller`] is the user and groups from the
//! verified ID token's claims; project `RoleBinding`s naming the user or one of the groups
//! (`kind: Group`) apply as for a token's user. Cluster-wide roles come only from the
//! cluster bindings `dray token create` records, by user or group name: an OIDC user has
//! none unless such a binding names them (user and group names are one namespace across
//! tokens and OIDC; a username not from a verified `email` is prefixed, `oidc:bob`, so it
//! cannot be taken for a token user's). The API
//! itself still takes only Dray's bearer tokens, not the provider's.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::{Actor, Kind, ObjectKey, Role, RoleBinding, SubjectKind, Verb};
use crate::pipeline::door::{AuthorizeError, Authorizer};
use crate::store::{Store, StoreError, TokenInfo, TokenStore};
use crate::ui::session::{self, Identity, Session};

use super::AppState;
use super::error::ApiError;
use super::tokens;

/// The user every request acts as under `--auth none`.
pub const ANONYMOUS: &str = "anonymous";

/// What the 401 answer tells the user to do.
const TOKEN_HINT: &str = "pass --token or set DRAY_TOKEN (create one with `dray token create`)";

/// How `dray serve` authenticates API requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthMode {
    /// Bearer API tokens (the default).
    #[default]
    Token,
    /// None: every request is `anonymous` with admin rights. Only when asked for.
    None,
}

/// How requests are authenticated, and where tokens live.
pub struct Auth {
    /// Tokens or nothing.
    pub mode: AuthMode,
    /// The tokens and cluster-wide bindings.
    pub tokens: Arc<dyn TokenStore>,
}

/// The authenticated user of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The user's name, recorded as the actor of what they do.
    pub user: String,
    /// The groups the user belongs to.
    pub groups: Vec<String>,
    /// The built-in roles the user holds in every project.
    cluster_roles: Vec<String>,
    /// Set under `--auth none`: everything is allowed.
    unrestricted: bool,
}

impl Caller {
    /// The caller under `--auth none`.
    pub fn anonymous() -> Self {
        Caller {
            user: ANONYMOUS.to_owned(),
            groups: Vec::new(),
            cluster_roles: Vec::new(),
            unrestricted: true,
        }
    }

    /// Ok when the caller may `verb` the `resource` (a kind's plural or `tokens`) named
    /// `name` in `project`; otherwise a 403 naming all of them.
    pub async fn authorize(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), ApiError> {
        if self.may(store, verb, resource, project, name).await? {
            return Ok(());
        }
        Err(self.forbidden(verb, resource, project, name))
    }

    /// Whether the caller may `verb` the `resource` named `name` in `project`. A Project
    /// (no `project`, `resource` = `projects`) is governed by the bindings inside it too.
    pub async fn may(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> Result<bool, StoreError> {
        if self.unrestricted || self.cluster_allows(verb, resource, name) {
            return Ok(true);
        }
        let scope = match (project, resource) {
            (Some(project), _) => project,
            (None, "projects") => match name {
                Some(name) => name,
                None => return Ok(false),
            },
            (None, _) => return Ok(false),
        };
        let roles = self.bound_roles(store, scope).await?;
        Ok(roles
            .iter()
            .any(|role| role_allows(role, verb, resource, name)))
    }

    /// Everything the caller may do in `project`, read once (one list of RoleBindings, and
    /// the project's own Roles they name), for pages that ask about many resources: the
    /// UI asks it per Stage, which [`Caller::may`] would answer with a query each.
    pub async fn permissions(
        &self,
        store: &dyn Store,
        project: &str,
    ) -> Result<Permissions, ApiError> {
        let roles = if self.unrestricted {
            Vec::new()
        } else {
            self.bound_roles(store, project).await?
        };
        Ok(Permissions {
            caller: self.clone(),
            project: project.to_owned(),
            roles,
        })
    }

    fn cluster_allows(&self, verb: Verb, resource: &str, name: Option<&str>) -> bool {
        self.cluster_roles
            .iter()
            .filter_map(|name| Role::builtin(name))
            .any(|role| role_allows(&role, verb, resource, name))
    }

    /// The roles RoleBindings of `scope` give the caller (built-in or the project's own).
    async fn bound_roles(&self, store: &dyn Store, scope: &str) -> Result<Vec<Role>, StoreError> {
        let mut roles = Vec::new();
        for stored in store.list(Kind::RoleBinding, Some(scope)).await? {
            let Ok(binding) = stored.to_typed::<RoleBinding>() else {
                continue;
            };
            if !binding
                .spec
                .subjects
                .iter()
                .any(|s| self.is(s.kind, &s.name))
            {
                continue;
            }
            let role_name = &binding.spec.role_ref.name;
            let role = match Role::builtin(role_name) {
                Some(role) => Some(role),
                None => {
                    let key = ObjectKey::namespaced(Kind::Role, scope, role_name);
                    store
                        .get(&key)
                        .await?
                        .and_then(|r| r.to_typed::<Role>().ok())
                }
            };
            roles.extend(role);
        }
        Ok(roles)
    }

    /// The sentence a refusal says: ``user `vic` may not promote stages/staging``.
    pub fn refusal(&self, verb: Verb, resource: &str, name: Option<&str>) -> String {
        let what = match name {
            Some(name) => format!("{resource}/{name}"),
            None => resource.to_owned(),
        };
        format!("user `{}` may not {verb} {what}", self.user)
    }

    fn is(&self, kind: SubjectKind, name: &str) -> bool {
        match kind {
            SubjectKind::User => self.user == name,
            SubjectKind::Group => self.groups.iter().any(|g| g == name),
        }
    }

    fn forbidden(
        &self,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> ApiError {
        let (message, hint) = self.denial(verb, resource, project, name);
        ApiError::forbidden(message).with_hint(hint)
    }

    /// What a refusal says, and what to do about it; logged.
    fn denial(
        &self,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> (String, String) {
        let what = match name {
            Some(name) => format!("{resource}/{name}"),
            None => resource.to_owned(),
        };
        let (place, hint) = match project {
            Some(project) => (
                format!(" in project `{project}`"),
                format!(
                    "ask an admin for a RoleBinding in project `{project}` whose role allows `{verb}` on `{resource}`; `dray get rolebindings -p {project}` lists the bindings"
                ),
            ),
            None => (
                String::new(),
                "this needs a cluster-wide role such as `dray-admin`; ask an admin".to_owned(),
            ),
        };
        tracing::info!(user = %self.user, %verb, resource = %what, project = project.unwrap_or(""), "forbidden");
        (
            format!("{}{place}", self.refusal(verb, resource, name)),
            hint,
        )
    }
}

/// The promote path asks the authenticated caller, and records them as the actor.
#[async_trait::async_trait]
impl Authorizer for Caller {
    fn actor(&self) -> Actor {
        Actor::Person(self.user.clone())
    }

    async fn authorize(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: &str,
        name: &str,
    ) -> Result<(), AuthorizeError> {
        if self
            .may(store, verb, resource, Some(project), Some(name))
            .await?
        {
            return Ok(());
        }
        let (message, hint) = self.denial(verb, resource, Some(project), Some(name));
        Err(AuthorizeError::Denied { message, hint })
    }
}

fn role_allows(role: &Role, verb: Verb, resource: &str, name: Option<&str>) -> bool {
    role.spec
        .rules
        .iter()
        .any(|r| r.allows(verb, resource, name))
}

/// What a [`Caller`] may do in one project, from [`Caller::permissions`]; answers without
/// touching the store.
#[derive(Clone, Debug)]
pub struct Permissions {
    caller: Caller,
    project: String,
    roles: Vec<Role>,
}

impl Permissions {
    /// Whether the caller may `verb` the `resource` named `name` in this project.
    pub fn allows(&self, verb: Verb, resource: &str, name: Option<&str>) -> bool {
        self.caller.unrestricted
            || self.caller.cluster_allows(verb, resource, name)
            || self
                .roles
                .iter()
                .any(|role| role_allows(role, verb, resource, name))
    }

    /// `None` when allowed; otherwise why not, as a sentence naming user, verb and resource.
    pub fn refusal(&self, verb: Verb, resource: &str, name: Option<&str>) -> Option<String> {
        (!self.allows(verb, resource, name)).then(|| self.caller.refusal(verb, resource, name))
    }

    /// The project these permissions are for.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// Who.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            ApiError::unauthenticated("this request was not authenticated").with_hint(TOKEN_HINT)
        })
    }
}

/// The middleware on every `/api/v1` route: resolves the [`Caller`] or answers 401.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let caller = match state.auth.mode {
        AuthMode::None => Ok(Caller::anonymous()),
        AuthMode::Token => match (headers.get(AUTHORIZATION), session::cookie_id(headers)) {
            (None, Some(id)) => from_session(&state, &id, request.method(), headers).await,
            (bearer, _) => resolve(&state.auth, bearer).await,
        },
    };
    match caller {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => {
            let challenge = error.status() == StatusCode::UNAUTHORIZED;
            let mut response = error.into_response();
            if challenge {
                response
                    .headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}

/// The caller a session cookie stands for. A state-changing request must also carry the
/// session's CSRF token in `X-CSRF-Token`: a cross-site page can make the browser send the
/// cookie, but cannot read the token.
async fn from_session(
    state: &AppState,
    id: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    let session = state.sessions.lookup(id).await?.ok_or_else(|| {
        ApiError::unauthenticated("the session has expired or is unknown")
            .with_hint("log in again at /login")
    })?;
    if !method.is_safe() && !session.csrf_matches(headers.get(session::CSRF_HEADER)) {
        return Err(ApiError::forbidden(format!(
            "a {method} with a session cookie needs the session's CSRF token in the `{}` header",
            session::CSRF_HEADER
        ))
        .with_hint(
            "the UI sends it for you (reload the page); scripts should use `Authorization: Bearer <token>` instead of the cookie",
        ));
    }
    match caller_for_session(&state.auth, &session).await? {
        Some(caller) => Ok(caller),
        None => {
            crate::ui::forget(state, id).await;
            Err(
                ApiError::unauthenticated("the API token this session was made with is gone")
                    .with_hint("log in again at /login with a valid token"),
            )
        }
    }
}

/// The caller a UI session stands for: a token session's token is looked up again (none
/// when it was removed); an OIDC session's user and groups are taken as the provider
/// vouched for them, with the cluster-wide roles bindings give those names.
pub(crate) async fn caller_for_session(
    auth: &Auth,
    session: &Session,
) -> Result<Option<Caller>, ApiError> {
    match &session.identity {
        Identity::Token { token_hash } => caller_for_token_hash(auth, token_hash).await,
        Identity::Oidc { user, groups } => {
            let cluster_roles = auth.tokens.cluster_roles(user, groups).await?;
            Ok(Some(Caller {
                user: user.clone(),
                groups: groups.clone(),
                cluster_roles,
                unrestricted: false,
            }))
        }
    }
}

/// How often a token's `lastUsedAt` is written at most: a busy client must not turn every
/// request into a write.
pub(crate) const LAST_USED_EVERY: jiff::SignedDuration = jiff::SignedDuration::from_secs(60);

/// Whether a token last used at `last_used` (RFC 3339, none when never) should have its
/// use recorded at `now`.
pub(crate) fn last_use_is_stale(last_used: Option<&str>, now: jiff::Timestamp) -> bool {
    match last_used.and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
        Some(last) => now.duration_since(last) >= LAST_USED_EVERY,
        None => true,
    }
}

/// Why a presented API token authenticates no one. The one wording of the API's 401 and
/// of the web UI's login page: [`TokenRefusal::reason`] says what is wrong,
/// [`TokenRefusal::remedy`] what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenRefusal {
    /// No token has this hash (never made, or revoked before Dray kept revoked tokens).
    Unknown,
    /// The token's expiry has passed.
    Expired {
        /// The token's id.
        id: String,
        /// Its user.
        user: String,
        /// When it expired.
        at: jiff::Timestamp,
    },
    /// The token was revoked (`dray token revoke`).
    Revoked {
        /// The token's id.
        id: String,
        /// Its user.
        user: String,
        /// When it was revoked (RFC 3339).
        at: String,
    },
}

impl TokenRefusal {
    /// What is wrong with the token.
    pub(crate) fn reason(&self) -> String {
        match self {
            TokenRefusal::Unknown => "the API token is not valid: it is unknown".to_owned(),
            TokenRefusal::Expired { id, user, at } => {
                format!("the API token `{id}` of user `{user}` expired at {at}")
            }
            TokenRefusal::Revoked { id, user, at } => format!(
                "the API token is not valid: it was revoked at {at} (token `{id}` of user `{user}`)"
            ),
        }
    }

    /// What to do about it.
    pub(crate) fn remedy(&self) -> &'static str {
        match self {
            TokenRefusal::Unknown => "check it, or create one with `dray token create`",
            TokenRefusal::Expired { .. } => {
                "create a new one with `dray token create` (or ask an admin for one)"
            }
            TokenRefusal::Revoked { .. } => "ask an admin for a new one",
        }
    }

    /// The API's 401 for it.
    fn api_error(&self) -> ApiError {
        let hint = match self {
            TokenRefusal::Unknown => TOKEN_HINT.to_owned(),
            _ => format!(
                "pass --token or set DRAY_TOKEN with another token; {}",
                self.remedy()
            ),
        };
        ApiError::unauthenticated(self.reason()).with_hint(hint)
    }
}

impl std::fmt::Display for TokenRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.reason(), self.remedy())
    }
}

/// The token with this SHA-256 hash, or why it authenticates no one: expired, revoked or
/// unknown. A refused expired or revoked token is logged by id and user (never the token).
pub(crate) async fn check_token(
    auth: &Auth,
    hash: &str,
) -> Result<Result<TokenInfo, TokenRefusal>, StoreError> {
    let Some(info) = auth.tokens.token_info(hash).await? else {
        return Ok(Err(match auth.tokens.revoked_token(hash).await? {
            Some(revoked) => {
                tracing::info!(user = %revoked.user, token = %revoked.id, "refused a revoked API token");
                TokenRefusal::Revoked {
                    id: revoked.id,
                    user: revoked.user,
                    at: revoked.revoked_at,
                }
            }
            None => TokenRefusal::Unknown,
        }));
    };
    if let Some(at) = info.expired(jiff::Timestamp::now()) {
        tracing::info!(user = %info.user, token = %info.id, "refused an expired API token");
        return Ok(Err(TokenRefusal::Expired {
            id: info.id,
            user: info.user,
            at,
        }));
    }
    Ok(Ok(info))
}

/// The caller the token with this SHA-256 hash stands for, or why it is refused
/// ([`check_token`]). Records the use (at most once a minute per token).
async fn token_caller(auth: &Auth, hash: &str) -> Result<Result<Caller, TokenRefusal>, ApiError> {
    let info = match check_token(auth, hash).await? {
        Ok(info) => info,
        Err(refusal) => return Ok(Err(refusal)),
    };
    if last_use_is_stale(info.last_used_at.as_deref(), jiff::Timestamp::now()) {
        if let Err(error) = auth.tokens.touch_token(hash, &tokens::now()).await {
            tracing::warn!(token = %info.id, %error, "cannot record when an API token was used");
        }
    }
    let cluster_roles = auth.tokens.cluster_roles(&info.user, &info.groups).await?;
    Ok(Ok(Caller {
        user: info.user,
        groups: info.groups,
        cluster_roles,
        unrestricted: false,
    }))
}

/// The caller the token with this SHA-256 hash stands for, if it exists (none when unknown
/// or revoked). An expired token is a 401 naming its id and expiry.
pub(crate) async fn caller_for_token_hash(
    auth: &Auth,
    hash: &str,
) -> Result<Option<Caller>, ApiError> {
    match token_caller(auth, hash).await? {
        Ok(caller) => Ok(Some(caller)),
        Err(refusal @ TokenRefusal::Expired { .. }) => Err(refusal.api_error()),
        Err(TokenRefusal::Unknown | TokenRefusal::Revoked { .. }) => Ok(None),
    }
}

/// The caller a bearer token stands for.
async fn resolve(auth: &Auth, header: Option<&HeaderValue>) -> Result<Caller, ApiError> {
    let Some(header) = header else {
        return Err(
            ApiError::unauthenticated("this request needs an API token").with_hint(TOKEN_HINT)
        );
    };
    let token = header
        .to_str()
        .ok()
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or_else(|| {
            ApiError::unauthenticated("the Authorization header must be `Bearer <token>`")
                .with_hint(TOKEN_HINT)
        })?;
    token_caller(auth, &tokens::hash(token))
        .await?
        .map_err(|refusal| refusal.api_error())
}
