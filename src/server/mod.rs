//! The HTTP server of `dray serve`: the JSON API, health, webhook receivers, and
//! authentication ([`auth`]: API tokens, the web UI's sessions, OIDC login). Nothing here
//! decides; routes validate input, ask `pipeline`, call the store, and answer.
//!
//! [`router`] builds the whole API from an [`AppState`], beside the pages it is given (the
//! web UI, `src/ui`, which sits on top of this module; this module never imports it);
//! `serve` serves it and tests call it with `tower::ServiceExt::oneshot`. Every `/api/v1`
//! route sits behind [`auth`]'s middleware, and each handler asks
//! [`auth::Caller::authorize`] before it acts.
//!
//! In Kubernetes mode ([`AuthMode::Kubernetes`]) tokens and RBAC are the cluster's
//! (`auth::kubernetes`), and [`admission_router`] is the validating admission webhook,
//! served on its own HTTPS listener.

pub mod admission;
pub mod apply;
pub mod auth;
pub mod board;
mod credentials;
#[cfg(test)]
mod door_tests;
pub mod dora;
pub mod error;
pub(crate) mod freight_diff;
pub mod freight_names;
pub mod gates;
pub mod hold;
mod hotfix;
#[cfg(test)]
mod lever_doors;
pub mod levers;
pub mod metrics;
pub mod preview;
pub mod promotions;
#[cfg(test)]
mod rbac_matrix;
pub mod refresh;
pub mod resources;
pub mod routes;
pub mod signoffs;
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
use axum::http::Method;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::secrets::SecretKey;
use crate::store::Store;

pub use admission::admission_router;
pub use auth::{Auth, AuthMode, Caller};
pub use error::{ApiError, ErrorBody};
pub use routes::{Door, Route};

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
    pub sessions: Arc<auth::sessions::Sessions>,
    /// The OpenID provider the web UI can log in through, when configured.
    pub oidc: Option<Arc<auth::oidc::Oidc>>,
    /// Cancelled when the server begins to stop: long-lived answers (the UI's live
    /// updates) end with it, so a browser tab never holds a shutdown up.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Runs previews of promotions (`…/stages/{stage}/preview`); `None` where this
    /// server cannot run steps.
    pub previews: Option<Arc<crate::promotion::Engine>>,
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
        let secret_key = Arc::new(SecretKey::load(dir).expect("a secret key in the test's dir"));
        let previews = Arc::new(
            crate::promotion::Engine::new(crate::promotion::EngineParts {
                store: store.clone(),
                steps: dray_steps::builtin_steps(),
                work_root: dir.join("work"),
                repos: Arc::new(crate::promotion::SharedMirrors(Arc::new(
                    crate::discovery::git::MirrorCache::new(dir),
                ))),
                secret_key: secret_key.clone(),
                tools: Default::default(),
            })
            .expect("the preview engine of a test server"),
        );
        AppState {
            store: store.clone(),
            secret_key,
            discovery: None,
            auth: Arc::new(Auth {
                mode,
                tokens: store.clone(),
                bootstrap_file: Some(dir.join(tokens::BOOTSTRAP_TOKEN_FILE)),
            }),
            sessions: Arc::new(auth::sessions::Sessions::new(store)),
            oidc: None,
            shutdown: Default::default(),
            previews: Some(previews),
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

/// The `/api/v1` routes, relative to `/api/v1`; each handler authorizes its verb.
pub fn api_routes() -> Vec<Route> {
    use Method as M;
    vec![
        Route::new(M::GET, "/version", Door::Api, version),
        Route::new(M::POST, "/apply", Door::Api, apply_route),
        Route::new(M::GET, "/tokens", Door::Api, tokens::list),
        Route::new(M::POST, "/tokens", Door::Api, tokens::create),
        Route::new(M::DELETE, "/tokens/{id}", Door::Api, tokens::revoke),
        Route::new(
            M::GET,
            "/clusterrolebindings",
            Door::Api,
            tokens::list_cluster_bindings,
        ),
        Route::new(
            M::GET,
            "/clusterpromotiontasks",
            Door::Api,
            resources::list_cluster_tasks,
        ),
        Route::new(
            M::GET,
            "/clusterpromotiontasks/{name}",
            Door::Api,
            resources::get_cluster_task,
        ),
        Route::new(
            M::DELETE,
            "/clusterpromotiontasks/{name}",
            Door::Api,
            resources::delete_cluster_task,
        ),
        Route::new(M::GET, "/board", Door::Api, board::get_board),
        Route::new(M::GET, "/projects", Door::Api, resources::list_projects),
        Route::new(M::POST, "/projects", Door::Api, resources::create_project),
        Route::new(
            M::GET,
            "/projects/{name}",
            Door::Api,
            resources::get_project,
        ),
        Route::new(
            M::PUT,
            "/projects/{name}",
            Door::Api,
            resources::put_project,
        ),
        Route::new(
            M::DELETE,
            "/projects/{name}",
            Door::Api,
            resources::delete_project,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/dora",
            Door::Api,
            dora::project_dora,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/{plural}",
            Door::Api,
            resources::list,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/{plural}",
            Door::Api,
            resources::create,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/{plural}/{name}",
            Door::Api,
            resources::get,
        ),
        Route::new(
            M::PUT,
            "/projects/{project}/{plural}/{name}",
            Door::Api,
            resources::put,
        ),
        Route::new(
            M::DELETE,
            "/projects/{project}/{plural}/{name}",
            Door::Api,
            resources::delete,
        ),
        Route::new(
            M::PUT,
            "/projects/{project}/{plural}/{name}/status",
            Door::Api,
            resources::put_status,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/warehouses/{name}/refresh",
            Door::Api,
            warehouses::refresh,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/freight/assemble",
            Door::Api,
            warehouses::assemble_freight,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/freight/{name}/diff",
            Door::Api,
            freight_diff::freight_diff,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/stages/{stage}/promote",
            Door::Api,
            promotions::promote,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/stages/{stage}/preview",
            Door::Api,
            preview::preview,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/stages/{stage}/audit",
            Door::Api,
            promotions::audit_trail,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/stages/{stage}/approve",
            Door::Api,
            gates::approve,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/stages/{stage}/signoffs",
            Door::Api,
            signoffs::sign_off,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/stages/{stage}/verify",
            Door::Api,
            verify::verify,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/stages/{stage}/hold/lift",
            Door::Api,
            hold::lift_hold,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/stages/{stage}/hold/set",
            Door::Api,
            hold::set_hold,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/freight/{name}/reject",
            Door::Api,
            levers::reject_freight,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/freight/{name}/unreject",
            Door::Api,
            levers::unreject_freight,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/freeze",
            Door::Api,
            levers::freeze_line,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/unfreeze",
            Door::Api,
            levers::unfreeze_line,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/stages/{stage}/window",
            Door::Api,
            gates::stage_window,
        ),
        Route::new(
            M::GET,
            "/projects/{project}/stages/{stage}/freight",
            Door::Api,
            gates::stage_freight,
        ),
        Route::new(
            M::POST,
            "/projects/{project}/promotions/{name}/abort",
            Door::Api,
            promotions::abort,
        ),
    ]
}

/// The routes outside `/api/v1`: health, metrics, and the webhook receivers (their own
/// secrets).
pub fn edge_routes() -> Vec<Route> {
    vec![
        Route::new(Method::GET, "/healthz", Door::Open, healthz),
        Route::new(Method::GET, "/metrics", Door::Open, metrics::serve),
        // The project-independent receiver; `-` is never a project's name.
        Route::new(
            Method::POST,
            "/webhooks/-/{kind}",
            Door::Webhook,
            webhooks::shared_signed,
        ),
        Route::new(
            Method::POST,
            "/webhooks/-/{kind}/{token}",
            Door::Webhook,
            webhooks::shared_with_token,
        ),
        Route::new(
            Method::POST,
            "/webhooks/{project}/{receiver}",
            Door::Webhook,
            webhooks::signed,
        ),
        Route::new(
            Method::POST,
            "/webhooks/{project}/{receiver}/{token}",
            Door::Webhook,
            webhooks::with_token,
        ),
    ]
}

/// The whole HTTP API and the webhook receivers, served beside `pages` (the web UI's
/// router, `ui::router()` in `src/ui`, which whoever composes the server passes in).
pub fn router(state: AppState, pages: Router<AppState>) -> Router {
    let api = routes::build(api_routes()).route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        auth::authenticate,
    ));
    routes::build(edge_routes())
        .nest("/api/v1", api)
        .merge(pages)
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

/// `app` without `GET /metrics`, for `dray serve --metrics-listen`, where the numbers are
/// served on their own address ([`metrics::own_router`]): the main listener answers 404.
pub fn without_metrics(app: Router) -> Router {
    app.layer(axum::middleware::from_fn(
        |request: axum::http::Request<axum::body::Body>, next: axum::middleware::Next| async move {
            if request.uri().path() == "/metrics" {
                let uri = request.uri().clone();
                return axum::response::IntoResponse::into_response(
                    ApiError::not_found(format!("no route for `{}`", uri.path()))
                        .with_hint("this server serves /metrics on its --metrics-listen address"),
                );
            }
            next.run(request).await
        },
    ))
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
