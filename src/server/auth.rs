//! Who is calling (authentication) and whether they may (authorization), for every
//! `/api/v1` route. `/healthz` is open; `/webhooks/*` receivers check their own secrets.
//!
//! - [`authenticate`] is the middleware: `Authorization: Bearer <token>` is hashed and
//!   looked up in the [`TokenStore`]; the [`Caller`] (user, groups, cluster-wide roles) goes
//!   into the request's extensions. A missing or unknown token is a 401 `unauthenticated`.
//!   With `dray serve --auth none` every request is `anonymous` and may do anything.
//! - [`Caller::authorize`] is called by each handler with the verb, the resource (a kind's
//!   plural, or `tokens`), the project and the name: allowed when a cluster-wide binding's
//!   built-in role, or a `RoleBinding` of the project naming the user or one of their
//!   groups, has a rule for it. Otherwise a 403 `forbidden` that names user, verb and
//!   resource: ``user `ann` may not promote stages/prod in project `demo` ``.
//!
//! Tokens themselves (making them, the bootstrap token) are in [`super::tokens`]. Whoever
//! may create `rolebindings` in a project may give themselves any role there, as in
//! Kubernetes without its `escalate`/`bind` checks: grant it as you would `dray-admin`.
//!
//! OIDC: not built yet. Bearer tokens from an identity provider (verified against its
//! JWKS, user and groups from claims) would be a second way to resolve a [`Caller`] here;
//! `dray serve` has no flag for it, and `--auth` accepts only `token` and `none`.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::{Kind, ObjectKey, Role, RoleBinding, SubjectKind, Verb};
use crate::store::{Store, TokenStore};

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
    ) -> Result<bool, ApiError> {
        if self.unrestricted {
            return Ok(true);
        }
        let allows = |role: &Role| {
            role.spec
                .rules
                .iter()
                .any(|r| r.allows(verb, resource, name))
        };
        if self
            .cluster_roles
            .iter()
            .filter_map(|name| Role::builtin(name))
            .any(|role| allows(&role))
        {
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
            if role.as_ref().is_some_and(allows) {
                return Ok(true);
            }
        }
        Ok(false)
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
        ApiError::forbidden(format!("user `{}` may not {verb} {what}{place}", self.user))
            .with_hint(hint)
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
    let caller = match state.auth.mode {
        AuthMode::None => Ok(Caller::anonymous()),
        AuthMode::Token => resolve(&state.auth, request.headers().get(AUTHORIZATION)).await,
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
    let record = auth
        .tokens
        .token(&tokens::hash(token))
        .await?
        .ok_or_else(|| {
            ApiError::unauthenticated("the API token is not valid").with_hint(TOKEN_HINT)
        })?;
    let cluster_roles = auth
        .tokens
        .cluster_roles(&record.user, &record.groups)
        .await?;
    Ok(Caller {
        user: record.user,
        groups: record.groups,
        cluster_roles,
        unrestricted: false,
    })
}
