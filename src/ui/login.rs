//! Logging in and out of the web UI: `GET /login` (the form), `POST /login` (an API
//! token in, a session cookie out) and `POST /logout`. The token is checked exactly as the
//! API checks a bearer token (its SHA-256 against the token store,
//! [`crate::server::auth::check_token`]) and is never echoed, logged or put in the cookie.
//! An unknown, expired or revoked token makes no session; the page says which, in the
//! API's words (when it expired and to create a new one; when it was revoked and to ask an
//! admin for a new one). When OIDC is configured the form has a "Log in with
//! <issuer host>" button (`#oidc-login`, a link to `/auth/login`, see [`super::oidc`]) above
//! the token form, and says so when the provider cannot be reached.

use axum::Form;
use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use crate::server::AppState;
use crate::server::auth::{self, AuthMode, TokenRefusal};
use crate::server::tokens;

use super::{layout, session};

/// The login form's fields.
#[derive(Deserialize)]
pub(crate) struct LoginForm {
    #[serde(default)]
    token: String,
}

/// The logout form's fields.
#[derive(Deserialize)]
pub(crate) struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

fn form_page(state: &AppState, error: Option<&str>) -> Markup {
    let oidc = state
        .oidc
        .as_ref()
        .map(|oidc| (oidc.issuer_host(), oidc.unavailable()));
    layout::page(
        "Log in",
        None,
        None,
        html! {
            section.login {
                h1 { "Log in to Dray" }
                @if let Some((host, unavailable)) = &oidc {
                    p.oidc {
                        a.button #oidc-login href="/auth/login" { "Log in with " (host) }
                    }
                    @if let Some(why) = unavailable {
                        p.error #oidc-unavailable role="status" {
                            "OIDC login is unavailable: " (why)
                            ". The button tries the provider again; an API token works meanwhile."
                        }
                    }
                    p.hint { "or with an API token:" }
                }
                form method="post" action="/login" {
                    label for="token" { "API token" }
                    input #token type="password" name="token" autocomplete="off" required autofocus[oidc.is_none()];
                    button #login type="submit" { "Log in" }
                }
                @if let Some(error) = error {
                    p.error #login-error role="alert" { (error) }
                }
                p.hint { "Create a token with " code { "dray token create --user <you>" } "." }
            }
        },
    )
}

/// The login page showing `message` as the error, with `status`.
pub(crate) fn error_response(state: &AppState, status: StatusCode, message: &str) -> Response {
    (status, form_page(state, Some(message))).into_response()
}

/// `GET /login`.
pub(crate) async fn form(State(state): State<AppState>) -> Response {
    if state.auth.mode == AuthMode::None {
        return Redirect::to("/").into_response();
    }
    form_page(&state, None).into_response()
}

/// `POST /login`: a valid token starts a session and goes to the projects.
pub(crate) async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if state.auth.mode == AuthMode::None {
        return Redirect::to("/").into_response();
    }
    if !session::same_origin(&headers) {
        return (
            StatusCode::FORBIDDEN,
            form_page(
                &state,
                Some("this login came from another site; log in from this page"),
            ),
        )
            .into_response();
    }
    let token = form.token.trim();
    if token.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            form_page(&state, Some("enter an API token")),
        )
            .into_response();
    }
    let hash = tokens::hash(token);
    let record = match auth::check_token(&state.auth, &hash).await {
        Ok(Ok(record)) => record,
        Ok(Err(refusal)) => {
            if refusal == TokenRefusal::Unknown {
                tracing::info!("login refused: unknown token");
            }
            return (
                StatusCode::UNAUTHORIZED,
                form_page(&state, Some(&refusal.to_string())),
            )
                .into_response();
        }
        Err(error) => {
            tracing::warn!(%error, "login: cannot read the token store");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                form_page(
                    &state,
                    Some("the token store cannot be read; see the server log"),
                ),
            )
                .into_response();
        }
    };
    let (id, _) = match state.sessions.create_for_token(&hash, &record.user).await {
        Ok(created) => created,
        Err(error) => return super::UiError::from(error).into_response(),
    };
    tracing::info!(user = %record.user, "logged in to the UI");
    let cookie = session::set_cookie(&id, session::is_https(&headers));
    ([(SET_COOKIE, cookie)], Redirect::to("/")).into_response()
}

/// `POST /logout`: ends the session (the form carries its CSRF token).
pub(crate) async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    let secure = session::is_https(&headers);
    if let Some(id) = session::cookie_id(&headers) {
        let found = match state.sessions.lookup(&id).await {
            Ok(found) => found,
            Err(error) => return super::UiError::from(error).into_response(),
        };
        let Some(found) = found else {
            return (
                [(SET_COOKIE, session::clear_cookie(secure))],
                Redirect::to("/login"),
            )
                .into_response();
        };
        let sent = axum::http::HeaderValue::from_str(&form.csrf).ok();
        if !found.csrf_matches(sent.as_ref()) {
            return (
                StatusCode::FORBIDDEN,
                layout::error_page(
                    StatusCode::FORBIDDEN,
                    "logging out needs the page's CSRF token; use the Log out button",
                ),
            )
                .into_response();
        }
        if let Err(error) = state.sessions.remove(&id).await {
            return super::UiError::from(error).into_response();
        }
        tracing::info!(user = %found.user, "logged out of the UI");
    }
    (
        [(SET_COOKIE, session::clear_cookie(secure))],
        Redirect::to("/login"),
    )
        .into_response()
}
