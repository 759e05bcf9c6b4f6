//! The pages of logging in and out of the web UI: `GET /login` (the form), `POST /login`
//! (an API token in, a session cookie out) and `POST /logout`. Whether the token is good
//! (and whether a logout carries the session's CSRF token) is
//! [`crate::server::auth::login`]'s to say (exactly as the API checks a
//! bearer token); the token is never echoed, logged or put in the cookie. An unknown,
//! expired or revoked token makes no session; the page says which, in the API's words
//! (when it expired and to create a new one; when it was revoked and to ask an admin for a
//! new one). When OIDC is configured the form has a "Log in with <issuer host>" button
//! (`#oidc-login`, a link to `/auth/login`, see `super::oidc_pages`) above the token form,
//! and says so when the provider cannot be reached.

use axum::Form;
use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use crate::server::AppState;
use crate::server::auth::login::{self as token_login, LogoutError, TokenLoginError};
use crate::server::auth::{AuthMode, sessions};

use super::layout;

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
    // In Kubernetes mode the token is a Kubernetes one, reviewed by the API server.
    let (token_name, token_hint) = match state.auth.mode {
        AuthMode::Kubernetes(_) => (
            "Kubernetes token",
            html! { "Use your kubeconfig's token, or make one with " code { "kubectl create token <serviceaccount> -n <namespace>" } "." },
        ),
        _ => (
            "API token",
            html! { "Create a token with " code { "dray token create --user <you>" } "." },
        ),
    };
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
                            ". The button tries the provider again; a token works meanwhile."
                        }
                    }
                    p.hint { "or with a " (token_name) ":" }
                }
                form method="post" action="/login" {
                    label for="token" { (token_name) }
                    input #token type="password" name="token" autocomplete="off" required autofocus[oidc.is_none()];
                    button #login type="submit" { "Log in" }
                }
                @if let Some(error) = error {
                    p.error #login-error role="alert" { (error) }
                }
                p.hint { (token_hint) }
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
    if !sessions::same_origin(&headers) {
        return (
            StatusCode::FORBIDDEN,
            form_page(
                &state,
                Some("this login came from another site; log in from this page"),
            ),
        )
            .into_response();
    }
    let login = match token_login::with_token(&state.auth, &state.sessions, &form.token).await {
        Ok(login) => login,
        Err(TokenLoginError::Session(error)) => return super::UiError::from(error).into_response(),
        Err(error) => {
            return (error.status(), form_page(&state, Some(&error.to_string()))).into_response();
        }
    };
    let id = login.id;
    let cookie = sessions::set_cookie(&id, sessions::is_https(&headers));
    ([(SET_COOKIE, cookie)], Redirect::to("/")).into_response()
}

/// `POST /logout`: ends the session (the form carries its CSRF token).
pub(crate) async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    let secure = sessions::is_https(&headers);
    if let Some(id) = sessions::cookie_id(&headers) {
        match token_login::logout(&state.sessions, &id, &form.csrf).await {
            Ok(_) => {}
            Err(LogoutError::Csrf) => {
                let message = LogoutError::Csrf.to_string();
                return (
                    StatusCode::FORBIDDEN,
                    layout::error_page(StatusCode::FORBIDDEN, &message),
                )
                    .into_response();
            }
            Err(LogoutError::Store(error)) => return super::UiError::from(error).into_response(),
        }
    }
    (
        [(SET_COOKIE, sessions::clear_cookie(secure))],
        Redirect::to("/login"),
    )
        .into_response()
}
