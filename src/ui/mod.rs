//! Dray's web UI, served by `dray serve` at `/`: server-rendered HTML (maud, escaped by
//! construction), one small stylesheet and one vanilla script embedded in the binary,
//! and server-sent events for live updates. No front-end toolchain, nothing fetched from
//! the network at run time.
//!
//! Pages read the store directly; every action (promote, approve, abort, verify, lift a
//! hold, reject Freight, freeze) is the page's script calling the JSON API under `/api/v1` with the session
//! cookie and the session's CSRF token (see [`crate::server::auth::sessions`]), so the UI
//! can do nothing the API would not let the same user do. The UI sits on top of
//! `server`: authentication (API tokens, sessions, OIDC) is [`crate::server::auth`]'s, and
//! what the pages show of each Stage's gates and windows is
//! [`crate::pipeline::board`]'s, as the API shows it; the UI draws, and decides nothing.
//!
//! - `login`: `GET/POST /login`, `POST /logout` (the form; the check is `server::auth`'s);
//! - `oidc_pages`: `GET /auth/login`, `GET /auth/callback` (OpenID Connect login's pages);
//! - `layout`: the page shell, assets, security headers;
//! - `board`: `/`, the release board across projects (`crate::pipeline::release_board`);
//! - `board_pages`: the board's column and row paging and its `stuck` filter;
//! - `project_page`: `/projects/{p}` (pipeline graph, Freight timeline,
//!   availability of the selected Freight);
//! - `graph`: the DAG layout;
//! - `actions`: the confirmation dialog and the live Promotion view;
//! - `levers`: Reject / Freeze dialogs (`/projects/{p}/confirm` for project-wide ones),
//!   the red banner while frozen, "rejected by …" on Freight;
//! - `stage_page`: `/projects/{p}/stages/{s}` (promotion, verification and audit history);
//! - `events`: `GET /ui/events?project=p`, the change feed as server-sent events;
//! - `view`: small shared pieces (Freight, commits, links, times).

mod actions;
mod board;
mod board_pages;
#[cfg(test)]
mod board_tests;
mod events;
mod freight_diff;
mod graph;
mod layout;
mod levers;
mod login;
mod oidc_pages;
mod project_page;
mod stage_page;
#[cfg(test)]
mod tests;
mod view;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use crate::server::auth::{self, AuthMode, Caller, sessions};
use crate::server::{ApiError, AppState, Door, Route};

/// The UI's routes: the pages behind a session, and the login flow and assets open to all.
pub fn routes() -> Vec<Route> {
    use Method as M;
    vec![
        Route::new(M::GET, "/", Door::Ui, board::page),
        Route::new(M::GET, "/login", Door::Open, login::form),
        Route::new(M::POST, "/login", Door::Open, login::login),
        Route::new(M::POST, "/logout", Door::Open, login::logout),
        Route::new(M::GET, "/auth/login", Door::Open, oidc_pages::start),
        Route::new(M::GET, "/auth/callback", Door::Open, oidc_pages::callback),
        Route::new(M::GET, "/ui/assets/app.css", Door::Open, layout::css),
        Route::new(M::GET, "/ui/assets/app.js", Door::Open, layout::js),
        Route::new(M::GET, "/ui/events", Door::Ui, events::stream),
        Route::new(M::GET, "/projects/{project}", Door::Ui, project_page::page),
        Route::new(
            M::GET,
            "/projects/{project}/live",
            Door::Ui,
            project_page::live,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/minimap.svg",
            Door::Ui,
            project_page::minimap,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/diff",
            Door::Ui,
            freight_diff::page,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/stages/{stage}",
            Door::Ui,
            stage_page::page,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/stages/{stage}/confirm",
            Door::Ui,
            actions::confirm,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/confirm",
            Door::Ui,
            levers::project_confirm,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/promotions/{name}",
            Door::Ui,
            actions::promotion_page,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/promotions/{name}/view",
            Door::Ui,
            actions::promotion_fragment,
        ),
    ]
}

/// The UI's router: `serve` hands it to [`crate::server::router`], which serves it beside
/// the API (the server itself knows nothing of the UI).
pub fn router() -> Router<AppState> {
    crate::server::routes::build(routes())
        .layer(axum::middleware::map_response(layout::security_headers))
}

/// The header the page's script sets on the fragments it fetches.
pub(crate) const FRAGMENT_HEADER: &str = "x-dray-fragment";

/// Who is looking at a page, and the CSRF token their scripts send back (which its
/// `Debug` hides, so no log can show it).
#[derive(Clone)]
pub(crate) struct Viewer {
    /// The caller, as the API would see them.
    pub caller: Caller,
    /// The session's CSRF token (empty under `--auth none`).
    pub csrf: String,
    /// Whether there is a session to log out of.
    pub logged_in: bool,
}

impl std::fmt::Debug for Viewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Viewer")
            .field("caller", &self.caller)
            .field("csrf", &"<redacted>")
            .field("logged_in", &self.logged_in)
            .finish()
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        if state.auth.mode == AuthMode::None {
            return Ok(Viewer {
                caller: Caller::anonymous(),
                csrf: String::new(),
                logged_in: false,
            });
        }
        // The page's script asks for fragments with `X-Dray-Fragment`: it gets a 401 (and
        // goes to the login page itself) rather than a login page spliced into the page.
        let fragment = parts.headers.contains_key(FRAGMENT_HEADER);
        let to_login = || {
            if fragment {
                (
                    StatusCode::UNAUTHORIZED,
                    "the session has ended; log in again at /login",
                )
                    .into_response()
            } else {
                Redirect::to("/login").into_response()
            }
        };
        let id = sessions::cookie_id(&parts.headers).ok_or_else(to_login)?;
        let found = match state.sessions.lookup(&id).await {
            Ok(Some(found)) => found,
            Ok(None) => return Err(to_login()),
            Err(error) => return Err(UiError::from(error).into_response()),
        };
        match auth::caller_for_session(&state.auth, &found).await {
            Ok(Some(caller)) => Ok(Viewer {
                caller,
                csrf: found.csrf,
                logged_in: true,
            }),
            Ok(None) => {
                state.sessions.forget(&id).await;
                Err(to_login())
            }
            // The session's token expired: log in again, as for a revoked one.
            Err(error) if error.status() == StatusCode::UNAUTHORIZED => {
                state.sessions.forget(&id).await;
                Err(to_login())
            }
            Err(error) => Err(UiError(error).into_response()),
        }
    }
}

/// An error shown as a page (status, message and hint), never as a stack of JSON.
#[derive(Debug)]
pub(crate) struct UiError(pub ApiError);

impl From<ApiError> for UiError {
    fn from(error: ApiError) -> Self {
        UiError(error)
    }
}

impl From<crate::store::StoreError> for UiError {
    fn from(error: crate::store::StoreError) -> Self {
        UiError(error.into())
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let status = if status.is_client_error() || status.is_server_error() {
            status
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        (status, layout::error_page(status, &self.0.to_string())).into_response()
    }
}
