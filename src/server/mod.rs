//! The HTTP server of `dray serve`: the JSON API, health, webhook receivers and (later)
//! the web UI. Nothing here decides; routes validate input, call the store, and answer.
//!
//! [`router`] builds the whole API from an [`AppState`]; `main` serves it and tests call
//! it with `tower::ServiceExt::oneshot`. Every `/api/v1` route sits behind [`auth`]'s
//! middleware, and each handler asks [`auth::Caller::authorize`] before it acts.

pub mod apply;
pub mod auth;
mod credentials;
#[cfg(test)]
mod door_tests;
pub mod error;
pub mod gates;
pub mod promotions;
pub mod refresh;
pub mod resources;
pub mod run;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
pub mod tokens;
pub mod verify;
pub mod warehouses;
pub mod webhooks;

use std::sync::Arc;

use axum::extract::State;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::secrets::SecretKey;
use crate::store::Store;

pub use auth::{Auth, AuthMode, Caller};
pub use error::{ApiError, ErrorBody};
pub use run::{ServeOptions, serve};

/// What every route shares.
#[derive(Clone)]
pub struct AppState {
    /// Where resources live.
    pub store: Arc<dyn Store>,
    /// Seals and opens Credential secrets.
    pub secret_key: Arc<SecretKey>,
    /// Registry and git access, for checking hand-assembled Freight.
    pub discovery: Option<Arc<DiscoveryServices>>,
    /// How callers are authenticated, and their tokens.
    pub auth: Arc<Auth>,
    /// The web UI's login sessions, kept in the store.
    pub sessions: Arc<crate::ui::session::Sessions>,
    /// The OpenID provider the web UI can log in through, when configured.
    pub oidc: Option<Arc<crate::ui::oidc::Oidc>>,
    /// Cancelled when the server begins to stop: long-lived answers (the UI's live
    /// updates) end with it, so a browser tab never holds a shutdown up.
    pub shutdown: tokio_util::sync::CancellationToken,
}

#[cfg(test)]
impl AppState {
    /// The state of a server over `store` (whose secret key lives in `dir`), with no
    /// discovery and no OIDC: what route tests need.
    pub(crate) fn for_tests(
        store: Arc<crate::store::SqliteStore>,
        dir: &std::path::Path,
        mode: AuthMode,
    ) -> Self {
        AppState {
            store: store.clone(),
            secret_key: Arc::new(SecretKey::load(dir).expect("a secret key in the test's dir")),
            discovery: None,
            auth: Arc::new(Auth {
                mode,
                tokens: store.clone(),
            }),
            sessions: Arc::new(crate::ui::session::Sessions::new(store)),
            oidc: None,
            shutdown: Default::default(),
        }
    }
}

/// The discovery clients shared by the Warehouse controller and the API.
pub struct DiscoveryServices {
    /// Registry access.
    pub images: crate::discovery::image::ImageDiscoverer,
    /// The shared git mirrors.
    pub mirrors: Arc<crate::discovery::git::MirrorCache>,
}

/// The whole HTTP API.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/version", get(version))
        .route("/apply", post(apply_route))
        .route("/tokens", get(tokens::list).post(tokens::create))
        .route("/tokens/{id}", axum::routing::delete(tokens::revoke))
        .route(
            "/projects",
            get(resources::list_projects).post(resources::create_project),
        )
        .route(
            "/projects/{name}",
            get(resources::get_project)
                .put(resources::put_project)
                .delete(resources::delete_project),
        )
        .route(
            "/projects/{project}/{plural}",
            get(resources::list).post(resources::create),
        )
        .route(
            "/projects/{project}/{plural}/{name}",
            get(resources::get)
                .put(resources::put)
                .delete(resources::delete),
        )
        .route(
            "/projects/{project}/{plural}/{name}/status",
            put(resources::put_status),
        )
        .route(
            "/projects/{project}/warehouses/{name}/refresh",
            post(warehouses::refresh),
        )
        .route(
            "/projects/{project}/freight/assemble",
            post(warehouses::assemble_freight),
        )
        .route(
            "/projects/{project}/stages/{stage}/promote",
            post(promotions::promote),
        )
        .route(
            "/projects/{project}/stages/{stage}/audit",
            get(promotions::audit_trail),
        )
        .route(
            "/projects/{project}/stages/{stage}/approve",
            post(gates::approve),
        )
        .route(
            "/projects/{project}/stages/{stage}/verify",
            post(verify::verify),
        )
        .route(
            "/projects/{project}/stages/{stage}/hold/lift",
            post(gates::lift_hold),
        )
        .route(
            "/projects/{project}/stages/{stage}/window",
            get(gates::stage_window),
        )
        .route(
            "/projects/{project}/stages/{stage}/freight",
            get(gates::stage_freight),
        )
        .route(
            "/projects/{project}/promotions/{name}/abort",
            post(promotions::abort),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .nest("/api/v1", api)
        .route("/webhooks/{project}/{receiver}", post(webhooks::signed))
        .route(
            "/webhooks/{project}/{receiver}/{token}",
            post(webhooks::generic),
        )
        .merge(crate::ui::router())
        .fallback(not_found)
        .with_state(state)
        // Spans carry method and path, never headers: bearer tokens stay out of the log.
        .layer(
            tower_http::trace::TraceLayer::new_for_http().make_span_with(
                |request: &axum::http::Request<axum::body::Body>| {
                    tracing::debug_span!(
                        "request",
                        method = %request.method(),
                        path = %loggable_path(request.uri().path()),
                    )
                },
            ),
        )
}

/// A request path as logs may show it: a generic webhook's secret path segment is hidden.
fn loggable_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["", "webhooks", project, receiver, _secret, ..] => {
            format!("/webhooks/{project}/{receiver}/<secret>")
        }
        _ => path.to_owned(),
    }
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn version() -> Json<Value> {
    Json(json!({"version": crate::VERSION, "apiVersion": crate::api::API_VERSION}))
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route for `{}`", uri.path()))
        .with_hint("the API lives under /api/v1; see docs/architecture.md")
}

async fn apply_route(
    State(state): State<AppState>,
    caller: Caller,
    Json(request): Json<apply::ApplyRequest>,
) -> Result<Json<apply::ApplyResponse>, ApiError> {
    let response = apply::apply(
        state.store.as_ref(),
        &state.secret_key,
        request,
        Some(&caller),
    )
    .await?;
    for result in &response.results {
        if result.action != "unchanged" {
            tracing::info!(
                kind = %result.kind,
                namespace = result.namespace.as_deref().unwrap_or(""),
                name = %result.name,
                action = %result.action,
                by = %caller.user,
                "applied"
            );
        }
    }
    Ok(Json(response))
}
