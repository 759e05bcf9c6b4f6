//! Every route as data: a method, a path and its handler. The routers are folded from these
//! tables, so the tables are the whole truth of what Dray serves — the RBAC matrix test
//! (`server::rbac_matrix`) walks them, and a route added without an expectation there
//! fails it.

use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, on};

use super::AppState;

/// Who a route lets in before its handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    /// `/api/v1/*`: a bearer token or a UI session (with CSRF for changes); the handler
    /// then authorizes the verb.
    Api,
    /// A webhook receiver: its own shared secret, no user.
    Webhook,
    /// A web UI page: a UI session, else the login page.
    Ui,
    /// Open to anyone: health, the login form and flow, static assets.
    Open,
}

/// One method on one path.
pub struct Route {
    /// The method.
    pub method: Method,
    /// The path, with `{param}` segments, relative to where the table is mounted.
    pub path: &'static str,
    /// Who gets in before the handler.
    pub door: Door,
    handler: MethodRouter<AppState>,
}

impl Route {
    /// `method path` served by `handler`, behind `door`.
    pub fn new<H, T>(method: Method, path: &'static str, door: Door, handler: H) -> Route
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone())
            .unwrap_or_else(|_| panic!("{method} is not a method a route can serve"));
        Route {
            method,
            path,
            door,
            handler: on(filter, handler),
        }
    }
}

/// The router serving `routes` (methods on one path are merged).
pub fn build(routes: Vec<Route>) -> Router<AppState> {
    routes.into_iter().fold(Router::new(), |router, route| {
        router.route(route.path, route.handler)
    })
}
