//! The middleware on every `/api/v1` route ([`authenticate`]): a bearer API token, or
//! without one the web UI's session cookie (a change also needs the session's CSRF token),
//! becomes the request's [`Caller`]; otherwise a 401 (or a 403 for a missing CSRF token).

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::super::AppState;
use super::super::error::ApiError;
use super::super::tokens;
use super::api_tokens::{TokenRefusal, check_token, last_use_is_stale};
use super::kubernetes::{KubeAuth, KubeAuthError};
use super::sessions::{self, Identity, Session};
use super::{Auth, AuthMode, Caller, TOKEN_HINT};

/// The middleware on every `/api/v1` route: resolves the [`Caller`] or answers 401.
pub async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let caller = match state.auth.mode {
        AuthMode::None => Ok(Caller::anonymous()),
        AuthMode::Token => match (headers.get(AUTHORIZATION), sessions::cookie_id(headers)) {
            (None, Some(id)) => from_session(&state, &id, request.method(), headers).await,
            (bearer, _) => resolve(&state.auth, bearer).await,
        },
        // Kubernetes mode (see `super::kubernetes`): the bearer token goes to a TokenReview;
        // a UI session's caller is asked about by SubjectAccessReview.
        AuthMode::Kubernetes(ref kube) => {
            match (headers.get(AUTHORIZATION), sessions::cookie_id(headers)) {
                (None, Some(id)) => from_session(&state, &id, request.method(), headers)
                    .await
                    .map(|c| Caller::kubernetes(c.user, c.groups, kube.clone())),
                (bearer, _) => kubernetes_caller(kube, bearer).await,
            }
        }
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
    if !method.is_safe() && !session.csrf_matches(headers.get(sessions::CSRF_HEADER)) {
        return Err(ApiError::forbidden(format!(
            "a {method} with a session cookie needs the session's CSRF token in the `{}` header",
            sessions::CSRF_HEADER
        ))
        .with_hint(
            "the UI sends it for you (reload the page); scripts should use `Authorization: Bearer <token>` instead of the cookie",
        ));
    }
    match caller_for_session(&state.auth, &session).await? {
        Some(caller) => Ok(caller),
        None => {
            state.sessions.forget(id).await;
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
pub async fn caller_for_session(
    auth: &Auth,
    session: &Session,
) -> Result<Option<Caller>, ApiError> {
    match &session.identity {
        Identity::Token { token_hash } => caller_for_token_hash(auth, token_hash).await,
        // Only a Kubernetes-mode server takes these (its middleware asks Kubernetes RBAC
        // about them); anywhere else the session stands for no one.
        Identity::Kubernetes { user, groups } => Ok(matches!(auth.mode, AuthMode::Kubernetes(_))
            .then(|| Caller {
                user: user.clone(),
                groups: groups.clone(),
                cluster_roles: Vec::new(),
                unrestricted: false,
                authority: Default::default(),
            })),
        Identity::Oidc { user, groups } => {
            let cluster_roles = auth.tokens.cluster_roles(user, groups).await?;
            Ok(Some(Caller {
                user: user.clone(),
                groups: groups.clone(),
                cluster_roles,
                unrestricted: false,
                authority: Default::default(),
            }))
        }
    }
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
        authority: Default::default(),
    }))
}

/// The caller the token with this SHA-256 hash stands for, if it exists (none when unknown
/// or revoked). An expired token is a 401 naming its id and expiry.
async fn caller_for_token_hash(auth: &Auth, hash: &str) -> Result<Option<Caller>, ApiError> {
    match token_caller(auth, hash).await? {
        Ok(caller) => Ok(Some(caller)),
        Err(refusal @ TokenRefusal::Expired { .. }) => Err(refusal.api_error()),
        Err(TokenRefusal::Unknown | TokenRefusal::Revoked { .. }) => Ok(None),
    }
}

/// The caller a Kubernetes bearer token stands for, by TokenReview.
async fn kubernetes_caller(
    kube: &std::sync::Arc<KubeAuth>,
    header: Option<&HeaderValue>,
) -> Result<Caller, ApiError> {
    let token = bearer_token(
        header,
        "this request needs a Kubernetes bearer token",
        KUBE_TOKEN_HINT,
    )?;
    match kube.review_token(token).await {
        Ok(reviewed) => Ok(Caller::kubernetes(
            reviewed.user,
            reviewed.groups,
            kube.clone(),
        )),
        Err(error @ KubeAuthError::Unauthenticated { .. }) => {
            Err(ApiError::unauthenticated(error.to_string()).with_hint(KUBE_TOKEN_HINT))
        }
        Err(error) => {
            tracing::warn!(%error, "cannot authenticate a request");
            Err(ApiError::from(error.into_store_error()))
        }
    }
}

/// What a 401 in Kubernetes mode tells the user to do.
const KUBE_TOKEN_HINT: &str = "pass a Kubernetes bearer token (e.g. `kubectl create token SERVICEACCOUNT -n NAMESPACE`, or your kubeconfig's), or log in to the web UI";

/// The caller a bearer token stands for.
async fn resolve(auth: &Auth, header: Option<&HeaderValue>) -> Result<Caller, ApiError> {
    let token = bearer_token(header, "this request needs an API token", TOKEN_HINT)?;
    token_caller(auth, &tokens::hash(token))
        .await?
        .map_err(|refusal| refusal.api_error())
}

/// The token of an `Authorization: Bearer <token>` header, or a 401 saying what is wrong.
fn bearer_token<'h>(
    header: Option<&'h HeaderValue>,
    missing: &str,
    hint: &str,
) -> Result<&'h str, ApiError> {
    let Some(header) = header else {
        return Err(ApiError::unauthenticated(missing).with_hint(hint));
    };
    header
        .to_str()
        .ok()
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or_else(|| {
            ApiError::unauthenticated("the Authorization header must be `Bearer <token>`")
                .with_hint(hint)
        })
}
