//! The web UI's side of OpenID Connect login: `GET /auth/login` (302 to the provider,
//! with the attempt's cookie) and `GET /auth/callback` (a session cookie for the verified
//! user, then a small page that moves on to `/`; or the login page saying why not). The
//! protocol, the attempts and the ID-token checks are [`crate::server::auth::oidc`]'s.

use axum::extract::{Query, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::server::AppState;
use crate::server::auth::oidc::{
    self, CallbackQuery, STATE_COOKIE, clear_state_cookie, state_cookie,
};
use crate::server::auth::sessions;

use super::{layout, login};

fn not_configured() -> Response {
    (
        StatusCode::NOT_FOUND,
        layout::error_page(
            StatusCode::NOT_FOUND,
            "OIDC login is not configured on this server; log in with an API token at /login (an admin enables OIDC with `dray serve --oidc-issuer …`)",
        ),
    )
        .into_response()
}

/// `GET /auth/login`: 302 to the provider, with the attempt's cookie.
pub(crate) async fn start(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(oidc) = state.oidc.clone() else {
        return not_configured();
    };
    match oidc.begin().await {
        Ok((id, url)) => {
            let Ok(location) = HeaderValue::from_str(&url) else {
                return login::error_response(
                    &state,
                    StatusCode::BAD_GATEWAY,
                    "the OpenID provider's authorization endpoint is not a usable URL; check its discovery document",
                );
            };
            let mut response = StatusCode::FOUND.into_response();
            response.headers_mut().insert(LOCATION, location);
            if let Ok(cookie) =
                HeaderValue::from_str(&state_cookie(&id, oidc.secure_cookies(&headers)))
            {
                response.headers_mut().insert(SET_COOKIE, cookie);
            }
            response
        }
        Err(error) => {
            tracing::warn!(issuer = %oidc.options().issuer, %error, "OIDC login could not start");
            login::error_response(&state, error.status(), &error.to_string())
        }
    }
}

/// `GET /auth/callback`: a session for the verified user, or a page saying why not.
pub(crate) async fn callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let Some(oidc) = state.oidc.clone() else {
        return not_configured();
    };
    let secure = oidc.secure_cookies(&headers);
    let attempt = sessions::cookie_value(&headers, STATE_COOKIE);
    let mut response = match oidc.finish(attempt.as_deref(), query).await {
        Ok(who) => {
            let (id, session) = match oidc::start_session(&state.sessions, &who).await {
                Ok(created) => created,
                Err(error) => return super::UiError::from(error).into_response(),
            };
            let mut response = continue_page().into_response();
            if let Ok(cookie) =
                HeaderValue::from_str(&sessions::set_cookie_for(&id, secure, session.remaining()))
            {
                response.headers_mut().append(SET_COOKIE, cookie);
            }
            response
        }
        Err(error) => {
            tracing::info!(issuer = %oidc.options().issuer, %error, "OIDC login refused");
            login::error_response(&state, error.status(), &error.to_string())
        }
    };
    if let Ok(cookie) = HeaderValue::from_str(&clear_state_cookie(secure)) {
        response.headers_mut().append(SET_COOKIE, cookie);
    }
    response
}

/// The page after a successful callback: it moves on to `/` by itself. Not a redirect:
/// the browser treats a redirect chain that began at the provider as cross-site and would
/// not send the new `SameSite=Strict` session cookie with it; a navigation this page starts
/// is same-site.
fn continue_page() -> maud::Markup {
    html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content="0;url=/";
                title { "Logged in · Dray" }
                link rel="stylesheet" href="/ui/assets/app.css";
            }
            body {
                main {
                    section.login {
                        h1 { "Logged in" }
                        p { a #continue href="/" { "Continue to the projects" } }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::server::auth::oidc::{Oidc, OidcOptions};

    use super::*;

    fn options() -> OidcOptions {
        OidcOptions {
            issuer: "https://login.example.com/realms/main".into(),
            client_id: "dray".into(),
            client_secret: Some("s3cret-value".into()),
            redirect_url: "https://dray.example.com/auth/callback".into(),
            username_claim: "email".into(),
            groups_claim: "groups".into(),
            username_prefix: None,
            scopes: vec!["openid".into(), "email".into()],
        }
    }

    /// The routes over `oneshot`: a server with `oidc` (or none), no provider needed.
    async fn get(oidc: Option<Oidc>, uri: &str) -> (StatusCode, Vec<String>, String) {
        use std::sync::Arc;

        use tower::ServiceExt;

        use crate::server::auth::AuthMode;
        use crate::store::SqliteStore;

        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let state = AppState {
            oidc: oidc.map(Arc::new),
            ..AppState::for_tests(store, dir.path(), AuthMode::Token)
        };
        let request = axum::http::Request::get(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = crate::server::router(state, crate::ui::router())
            .oneshot(request)
            .await
            .unwrap();
        let status = response.status();
        let cookies = response
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .map(|h| h.to_str().unwrap().to_owned())
            .collect();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            cookies,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }

    fn unreachable() -> Oidc {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let mut opts = options();
        opts.issuer = format!("http://127.0.0.1:{port}");
        Oidc::new(opts).unwrap()
    }

    #[tokio::test]
    async fn routes_without_oidc_are_404_and_the_login_page_has_no_button() {
        let (status, cookies, body) = get(None, "/auth/login").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert!(cookies.is_empty());
        assert!(body.contains("not configured"), "{body}");
        let (status, _, body) = get(None, "/login").await;
        assert_eq!(status, StatusCode::OK);
        assert!(!body.contains("oidc-login"), "{body}");
    }

    #[tokio::test]
    async fn routes_with_an_unreachable_provider_explain_and_set_no_attempt() {
        let (status, _, body) = get(Some(unreachable()), "/login").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("id=\"oidc-login\""), "{body}");
        assert!(body.contains("Log in with 127.0.0.1:"), "{body}");
        // Not discovered yet (no start-up here): nothing to report until a try fails.
        assert!(!body.contains("oidc-unavailable"), "{body}");
        let (status, cookies, body) = get(Some(unreachable()), "/auth/login").await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
        assert!(body.contains("is unavailable"), "{body}");
        assert!(body.contains("id=\"oidc-unavailable\""), "{body}");
        assert!(cookies.is_empty(), "{cookies:?}");
        // The provider's refusal is shown, and the attempt cookie is cleared (Lax, /auth).
        let (status, cookies, body) = get(
            Some(unreachable()),
            "/auth/callback?error=access_denied&error_description=no+thanks&state=x",
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(
            body.contains("refused the login: access_denied: no thanks"),
            "{body}"
        );
        assert_eq!(cookies.len(), 1, "{cookies:?}");
        for part in [
            "dray_oidc_state=;",
            "Max-Age=0",
            "HttpOnly",
            "SameSite=Lax",
            "Path=/auth",
        ] {
            assert!(cookies[0].contains(part), "{cookies:?}");
        }
        // A callback whose `state` has no attempt behind it makes no session.
        let (status, cookies, body) =
            get(Some(unreachable()), "/auth/callback?code=c&state=s").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert!(body.contains("state cookie is missing"), "{body}");
        assert!(
            !cookies.iter().any(|c| c.starts_with("dray_session=")),
            "{cookies:?}"
        );
    }
}
