//! The RBAC matrix, built from the router's own route tables ([`super::api_routes`],
//! [`super::edge_routes`], [`crate::ui::routes`]): every route (each `{plural}` route once
//! per kind) is called as each of five callers, and the status must be the one written in
//! [`EXPECTED`]. A route without a row there fails the test, so no route can be added
//! without saying who may use it.
//!
//! The callers: nobody (no token, no session), `vic` (`dray-viewer` in `demo`), `pat`
//! (`dray-promoter` in `demo`), `devi` (a custom Role allowing only `promote` on
//! `stages/dev`) and `admin` (the bootstrap token, `dray-admin` everywhere). API routes get
//! a bearer token, UI pages the caller's session cookie (from logging in with that token).
//! Each route is tried on a fresh server, the admin last, so that what one caller's call
//! changes cannot decide another's answer.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::api::{Kind, ObjectKey};
use crate::store::Store;

use super::auth::AuthMode;
use super::routes::{Door, Route};
use super::test_support::{self, Fresh};

/// The callers, in the order of [`EXPECTED`]'s columns.
const CALLERS: [&str; 5] = ["nobody", "vic", "pat", "devi", "admin"];

/// `METHOD path` (with `{plural}` filled in) → the status for each of [`CALLERS`].
/// Read across a row: what nobody, a viewer, a promoter, a dev-only promoter and the admin
/// get. A 4xx other than 401/403 for a caller who may act means the request got past
/// authorization and was refused for what it asked (a conflict, a Promotion that cannot be
/// changed, a status that is Dray's to write): the door, not RBAC.
#[rustfmt::skip]
const EXPECTED: &[(&str, [u16; 5])] = &[
    ("GET /api/v1/version", [401, 200, 200, 200, 200]),
    ("POST /api/v1/apply", [401, 403, 403, 403, 200]),
    ("GET /api/v1/tokens", [401, 200, 200, 200, 200]),
    ("POST /api/v1/tokens", [401, 403, 403, 403, 201]),
    ("DELETE /api/v1/tokens/{id}", [401, 403, 403, 403, 200]),
    ("GET /api/v1/clusterrolebindings", [401, 403, 403, 403, 200]),
    ("GET /api/v1/board", [401, 200, 200, 200, 200]),
    // Cluster-scoped: only a role in every project reads or deletes them.
    ("GET /api/v1/clusterpromotiontasks", [401, 403, 403, 403, 200]),
    ("GET /api/v1/clusterpromotiontasks/{name}", [401, 403, 403, 403, 200]),
    ("DELETE /api/v1/clusterpromotiontasks/{name}", [401, 403, 403, 403, 200]),
    ("GET /api/v1/projects", [401, 200, 200, 200, 200]),
    ("POST /api/v1/projects", [401, 403, 403, 403, 201]),
    ("GET /api/v1/projects/{name}", [401, 200, 200, 403, 200]),
    ("PUT /api/v1/projects/{name}", [401, 403, 403, 403, 200]),
    ("DELETE /api/v1/projects/{name}", [401, 403, 403, 403, 409]),
    ("GET /api/v1/projects/{project}/dora", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/projectconfigs", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/credentials", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/roles", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/rolebindings", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/warehouses", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/promotiontasks", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/analysistemplates", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/stages", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/freight", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/promotions", [401, 200, 200, 403, 200]),
    ("POST /api/v1/projects/{project}/projectconfigs", [401, 403, 403, 403, 422]),
    ("POST /api/v1/projects/{project}/credentials", [401, 403, 403, 403, 201]),
    ("POST /api/v1/projects/{project}/roles", [401, 403, 403, 403, 201]),
    ("POST /api/v1/projects/{project}/rolebindings", [401, 403, 403, 403, 201]),
    ("POST /api/v1/projects/{project}/warehouses", [401, 403, 403, 403, 201]),
    ("POST /api/v1/projects/{project}/promotiontasks", [401, 403, 403, 403, 201]),
    ("POST /api/v1/projects/{project}/analysistemplates", [401, 403, 403, 403, 201]),
    ("POST /api/v1/projects/{project}/stages", [401, 403, 403, 403, 201]),
    ("POST /api/v1/projects/{project}/freight", [401, 403, 403, 403, 405]),
    ("POST /api/v1/projects/{project}/promotions", [401, 403, 201, 403, 409]),
    ("GET /api/v1/projects/{project}/projectconfigs/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/credentials/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/roles/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/rolebindings/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/warehouses/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/promotiontasks/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/analysistemplates/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/stages/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/freight/{name}", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/promotions/{name}", [401, 200, 200, 403, 200]),
    ("PUT /api/v1/projects/{project}/projectconfigs/{name}", [401, 403, 403, 403, 200]),
    ("PUT /api/v1/projects/{project}/credentials/{name}", [401, 403, 403, 403, 422]),
    ("PUT /api/v1/projects/{project}/roles/{name}", [401, 403, 403, 403, 200]),
    ("PUT /api/v1/projects/{project}/rolebindings/{name}", [401, 403, 403, 403, 200]),
    ("PUT /api/v1/projects/{project}/warehouses/{name}", [401, 403, 403, 403, 200]),
    ("PUT /api/v1/projects/{project}/promotiontasks/{name}", [401, 403, 403, 403, 200]),
    ("PUT /api/v1/projects/{project}/analysistemplates/{name}", [401, 403, 403, 403, 200]),
    ("PUT /api/v1/projects/{project}/stages/{name}", [401, 403, 403, 403, 200]),
    ("PUT /api/v1/projects/{project}/freight/{name}", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/promotions/{name}", [401, 403, 403, 403, 405]),
    ("DELETE /api/v1/projects/{project}/projectconfigs/{name}", [401, 403, 403, 403, 200]),
    ("DELETE /api/v1/projects/{project}/credentials/{name}", [401, 403, 403, 403, 200]),
    ("DELETE /api/v1/projects/{project}/roles/{name}", [401, 403, 403, 403, 409]),
    ("DELETE /api/v1/projects/{project}/rolebindings/{name}", [401, 403, 403, 403, 200]),
    ("DELETE /api/v1/projects/{project}/warehouses/{name}", [401, 403, 403, 403, 409]),
    ("DELETE /api/v1/projects/{project}/promotiontasks/{name}", [401, 403, 403, 403, 200]),
    ("DELETE /api/v1/projects/{project}/analysistemplates/{name}", [401, 403, 403, 403, 200]),
    ("DELETE /api/v1/projects/{project}/stages/{name}", [401, 403, 403, 403, 409]),
    ("DELETE /api/v1/projects/{project}/freight/{name}", [401, 403, 403, 403, 409]),
    ("DELETE /api/v1/projects/{project}/promotions/{name}", [401, 403, 403, 403, 409]),
    ("PUT /api/v1/projects/{project}/projectconfigs/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/credentials/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/roles/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/rolebindings/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/warehouses/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/promotiontasks/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/analysistemplates/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/stages/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/freight/{name}/status", [401, 403, 403, 403, 405]),
    ("PUT /api/v1/projects/{project}/promotions/{name}/status", [401, 403, 403, 403, 405]),
    ("POST /api/v1/projects/{project}/warehouses/{name}/refresh", [401, 403, 403, 403, 200]),
    ("POST /api/v1/projects/{project}/freight/assemble", [401, 403, 403, 403, 400]),
    ("GET /api/v1/projects/{project}/freight/{name}/diff", [401, 200, 200, 403, 200]),
    ("POST /api/v1/projects/{project}/stages/{stage}/promote", [401, 403, 201, 201, 201]),
    ("POST /api/v1/projects/{project}/stages/{stage}/preview", [401, 403, 200, 200, 200]),
    ("GET /api/v1/projects/{project}/stages/{stage}/audit", [401, 404, 404, 403, 404]),
    ("POST /api/v1/projects/{project}/stages/{stage}/approve", [401, 403, 200, 403, 200]),
    ("POST /api/v1/projects/{project}/stages/{stage}/signoffs", [401, 403, 409, 403, 409]),
    ("POST /api/v1/projects/{project}/stages/{stage}/verify", [401, 403, 403, 403, 409]),
    ("POST /api/v1/projects/{project}/stages/{stage}/hold/lift", [401, 403, 200, 200, 200]),
    ("POST /api/v1/projects/{project}/stages/{stage}/hold/set", [401, 403, 200, 200, 200]),
    ("POST /api/v1/projects/{project}/freight/{name}/reject", [401, 403, 200, 403, 200]),
    ("POST /api/v1/projects/{project}/freight/{name}/unreject", [401, 403, 200, 403, 200]),
    ("POST /api/v1/projects/{project}/freeze", [401, 403, 200, 403, 200]),
    ("POST /api/v1/projects/{project}/unfreeze", [401, 403, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/stages/{stage}/window", [401, 200, 200, 403, 200]),
    ("GET /api/v1/projects/{project}/stages/{stage}/freight", [401, 200, 200, 403, 200]),
    ("POST /api/v1/projects/{project}/promotions/{name}/abort", [401, 403, 200, 403, 200]),
    ("GET /healthz", [200, 200, 200, 200, 200]),
    ("GET /metrics", [200, 200, 200, 200, 200]),
    ("POST /webhooks/-/{kind}", [401, 401, 401, 401, 401]),
    ("POST /webhooks/-/{kind}/{token}", [401, 401, 401, 401, 401]),
    ("POST /webhooks/{project}/{receiver}", [401, 401, 401, 401, 401]),
    ("POST /webhooks/{project}/{receiver}/{token}", [401, 401, 401, 401, 401]),
    ("GET /", [303, 303, 303, 200, 303]),
    ("GET /login", [200, 200, 200, 200, 200]),
    ("POST /login", [401, 303, 303, 303, 303]),
    ("POST /logout", [303, 403, 403, 403, 403]),
    ("GET /auth/login", [404, 404, 404, 404, 404]),
    ("GET /auth/callback", [404, 404, 404, 404, 404]),
    ("GET /ui/assets/app.css", [200, 200, 200, 200, 200]),
    ("GET /ui/assets/app.js", [200, 200, 200, 200, 200]),
    ("GET /ui/events", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}/live", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}/diff", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}/minimap.svg", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}/stages/{stage}", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}/stages/{stage}/confirm", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}/confirm", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}/promotions/{name}", [303, 200, 200, 403, 200]),
    ("GET /projects/{project}/promotions/{name}/view", [303, 200, 200, 403, 200]),
];

const PROJECT: &str = "
---
apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {name: hooks, namespace: demo}
spec: {type: webhook, token: 0123456789abcdef0123456789abcdef}
---
apiVersion: dray.dev/v1alpha1
kind: Credential
metadata: {name: git, namespace: demo}
spec: {type: git, repoURL: 'http://127.0.0.1:9/config.git', username: dray, password: not-a-real-password}
---
apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {name: demo, namespace: demo}
spec:
  webhookReceivers:
    - {name: ci, github: {secretRef: hooks}}
    - {name: hook, generic: {secretRef: hooks}}
---
apiVersion: dray.dev/v1alpha1
kind: Role
metadata: {name: dev-promoter, namespace: demo}
rules:
  - {verbs: [promote], resources: [stages], resourceNames: [dev]}
---
apiVersion: dray.dev/v1alpha1
kind: PromotionTask
metadata: {name: render, namespace: demo}
spec:
  steps:
    - {uses: http, as: gate, config: {url: 'http://127.0.0.1:9/'}}
---
apiVersion: dray.dev/v1alpha1
kind: ClusterPromotionTask
metadata: {name: shared}
spec:
  steps:
    - {uses: http, as: gate, config: {url: 'http://127.0.0.1:9/'}}
---
apiVersion: dray.dev/v1alpha1
kind: AnalysisTemplate
metadata: {name: smoke, namespace: demo}
spec:
  metrics:
    - name: up
      provider: {web: {url: 'http://127.0.0.1:9/'}}
      successCondition: 'true'
";

/// One fresh server with the project, its objects and the callers' credentials.
struct World {
    fresh: Fresh,
    /// Bearer token per caller (none for `nobody`).
    tokens: BTreeMap<&'static str, String>,
    /// Session cookie per caller (none for `nobody`).
    cookies: BTreeMap<&'static str, String>,
    /// A token id the admin may revoke.
    spare_token: String,
    /// Each stored object as the admin reads it, by `plural/name`.
    stored: BTreeMap<String, Value>,
}

impl World {
    async fn new() -> World {
        let fresh = test_support::fresh(AuthMode::Token).await;
        let admin = fresh.admin.clone();
        let call = |method: Method, uri: &'static str, body: Option<Value>| {
            test_support::call(&fresh.state, Some(&admin), method, uri, body)
        };
        let yaml = test_support::three_stages_dev_promotable() + PROJECT;
        let files = json!({"files": [{"path": "matrix.yaml", "content": yaml}]});
        let (status, body) = call(Method::POST, "/api/v1/apply", Some(files)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        test_support::store_first_freight(&fresh.store).await;
        let promote = Some(json!({"freight": "f1"}));
        let uri = "/api/v1/projects/demo/stages/dev/promote";
        let (status, made) = call(Method::POST, uri, promote).await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        // The Promotion every `{name}` of promotions stands for.
        let promotion = made["metadata"]["name"].as_str().unwrap().to_owned();
        let mut tokens = BTreeMap::from([("admin", admin.clone())]);
        let mut spare_token = String::new();
        for (caller, role) in [
            ("vic", "dray-viewer"),
            ("pat", "dray-promoter"),
            ("devi", "dev-promoter"),
            ("spare", "dray-viewer"),
        ] {
            let body = json!({"user": caller, "role": role, "project": "demo"});
            let (status, made) = call(Method::POST, "/api/v1/tokens", Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{made}");
            match caller {
                "vic" | "pat" | "devi" => {
                    tokens.insert(caller, made["token"].as_str().unwrap().to_owned());
                }
                _ => spare_token = made["id"].as_str().unwrap().to_owned(),
            }
        }
        let mut cookies = BTreeMap::new();
        for (caller, token) in &tokens {
            cookies.insert(*caller, login(&fresh, token).await);
        }
        let mut stored = BTreeMap::new();
        for kind in Kind::ALL.into_iter().filter(|k| k.is_namespaced()) {
            for object in fresh.store.list(kind, Some("demo")).await.unwrap() {
                stored.insert(
                    format!("{}/{}", kind.plural(), object.key.name),
                    object.object,
                );
            }
        }
        let promotion_key = ObjectKey::namespaced(Kind::Promotion, "demo", &promotion);
        let promotion = fresh.store.get(&promotion_key).await.unwrap().unwrap();
        stored.insert("promotions/p1".into(), promotion.object);
        World {
            fresh,
            tokens,
            cookies,
            spare_token,
            stored,
        }
    }

    /// The name a `{name}` segment stands for under `plural`.
    fn name_of(&self, plural: &str) -> String {
        let wanted = match plural {
            "stages" => "dev",
            "warehouses" => "app",
            "freight" => "f1",
            "promotions" => "p1",
            "credentials" => "git",
            "projectconfigs" => "demo",
            "roles" => "dev-promoter",
            "rolebindings" => "",
            "promotiontasks" => "render",
            "analysistemplates" => "smoke",
            "clusterpromotiontasks" => "shared",
            other => panic!("no object of `{other}` in the matrix world"),
        };
        if plural == "promotions" {
            let stored = &self.stored["promotions/p1"];
            return stored["metadata"]["name"].as_str().unwrap().to_owned();
        }
        if wanted.is_empty() {
            // The binding `dray token create` made for `devi`.
            return self
                .stored
                .keys()
                .find_map(|k| {
                    k.strip_prefix("rolebindings/")
                        .filter(|n| n.contains("devi"))
                })
                .unwrap()
                .to_owned();
        }
        wanted.to_owned()
    }
}

/// Logs in to the UI with `token`; the session cookie to send.
async fn login(fresh: &Fresh, token: &str) -> String {
    let request = Request::post("/login")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("host", "127.0.0.1:8080")
        .body(Body::from(format!("token={}", token.replace('+', "%2B"))))
        .unwrap();
    let reply = test_support::send(&fresh.state, request).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "login");
    let cookie = reply.headers["set-cookie"].to_str().unwrap();
    cookie.split(';').next().unwrap().to_owned()
}

/// One concrete call of a route.
struct Probe {
    /// `METHOD path`, with `{plural}` filled in: the row of [`EXPECTED`].
    row: String,
    method: Method,
    door: Door,
    /// The path template with `{plural}` filled in; the rest is filled per world.
    template: String,
}

fn probes() -> Vec<Probe> {
    let mounted = |routes: Vec<Route>, prefix: &str| {
        routes
            .into_iter()
            .map(|r| (r.method, format!("{prefix}{}", r.path), r.door))
            .collect::<Vec<_>>()
    };
    let mut all = mounted(super::api_routes(), "/api/v1");
    all.extend(mounted(super::edge_routes(), ""));
    all.extend(mounted(crate::ui::routes(), ""));
    let mut probes = Vec::new();
    for (method, path, door) in all {
        let plurals: Vec<Option<&str>> = if path.contains("{plural}") {
            Kind::ALL
                .into_iter()
                .filter(|k| k.is_namespaced())
                .map(|k| Some(k.plural()))
                .collect()
        } else {
            vec![None]
        };
        for plural in plurals {
            let template = match plural {
                Some(plural) => path.replace("{plural}", plural),
                None => path.clone(),
            };
            probes.push(Probe {
                row: format!("{method} {template}"),
                method: method.clone(),
                door,
                template,
            });
        }
    }
    probes
}

/// What a probe sends.
enum Payload {
    Json(Value),
    /// `application/x-www-form-urlencoded`, as the UI's forms send.
    Form(String),
}

/// The concrete path and body of `probe` in `world`, as `caller`.
fn request_of(world: &World, probe: &Probe, caller: &str) -> (String, Option<Payload>) {
    let segments: Vec<&str> = probe.template.split('/').collect();
    let plural_before_name = segments
        .iter()
        .position(|s| *s == "{name}")
        .and_then(|i| i.checked_sub(1))
        .map(|i| segments[i]);
    let name = match plural_before_name {
        Some("projects") | None => "demo".to_owned(),
        Some(plural) => world.name_of(plural),
    };
    let path = probe
        .template
        .replace("{project}", "demo")
        .replace("{stage}", "dev")
        .replace("{name}", &name)
        .replace("{id}", &world.spare_token)
        .replace("{receiver}", "ci")
        .replace("{token}", "not-the-secret");
    let path = match path.as_str() {
        "/ui/events" => "/ui/events?project=demo".to_owned(),
        "/projects/demo/stages/dev/confirm" => format!("{path}?action=promote&freight=f1"),
        diff if diff.ends_with("/diff") => format!("{path}?to={name}"),
        "/projects/demo/confirm" => format!("{path}?action=freeze"),
        _ => path,
    };
    let plural = segments.get(5).copied().unwrap_or_default();
    match probe.template.as_str() {
        "/login" => {
            let token = world
                .tokens
                .get(caller)
                .map_or("dray_not-a-token", String::as_str);
            let form = format!("token={}", token.replace('+', "%2B"));
            return (path, Some(Payload::Form(form)));
        }
        // Without the session's CSRF token.
        "/logout" => return (path, Some(Payload::Form("csrf=".into()))),
        _ => {}
    }
    let body = match (&probe.method, probe.template.as_str()) {
        (&Method::POST, "/api/v1/apply") => Some(json!({"files": [{"path": "a.yaml",
            "content": "apiVersion: dray.dev/v1alpha1\nkind: Warehouse\nmetadata: {name: other, namespace: demo}\nspec:\n  subscriptions:\n    - image: {repoURL: 127.0.0.1:5000/demo/other}\n"}]})),
        (&Method::POST, "/api/v1/tokens") => {
            Some(json!({"user": "newbie", "role": "dray-viewer", "project": "demo"}))
        }
        (&Method::POST, "/api/v1/projects") => Some(json!({"apiVersion": "dray.dev/v1alpha1",
            "kind": "Project", "metadata": {"name": "other"}, "spec": {}})),
        (&Method::PUT, "/api/v1/projects/{name}") => {
            Some(json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project",
                "metadata": {"name": "demo"}, "spec": {}}))
        }
        (&Method::POST, "/api/v1/projects/{project}/freight/assemble") => {
            Some(json!({"warehouse": "app"}))
        }
        (&Method::POST, "/api/v1/projects/{project}/stages/{stage}/promote")
        | (&Method::POST, "/api/v1/projects/{project}/stages/{stage}/preview")
        | (&Method::POST, "/api/v1/projects/{project}/stages/{stage}/approve")
        | (&Method::POST, "/api/v1/projects/{project}/stages/{stage}/signoffs") => {
            Some(json!({"freight": "f1"}))
        }
        (&Method::POST, "/api/v1/projects/{project}/stages/{stage}/hold/set")
        | (&Method::POST, "/api/v1/projects/{project}/freight/{name}/reject")
        | (&Method::POST, "/api/v1/projects/{project}/freeze") => {
            Some(json!({"reason": "the matrix"}))
        }
        (&Method::POST, "/api/v1/projects/{project}/unfreeze") => Some(json!({})),
        (&Method::POST, _) if segments.len() == 6 && segments[3] == "projects" => {
            Some(new_object(plural))
        }
        (&Method::PUT, template) if template.ends_with("/status") => {
            Some(json!({"status": {"phase": "Succeeded"}}))
        }
        (&Method::PUT, _) => world.stored.get(&format!("{plural}/{name}")).cloned(),
        _ => None,
    };
    (path, body.map(Payload::Json))
}

/// A new object of the kind `plural` names, valid for `demo`.
fn new_object(plural: &str) -> Value {
    let (kind, rest) = match plural {
        "stages" => (
            "Stage",
            json!({"spec": {"requestedFreight": [
            {"origin": {"kind": "Warehouse", "name": "app"}, "sources": {"direct": true}}]}}),
        ),
        "warehouses" => (
            "Warehouse",
            json!({"spec": {"subscriptions": [
            {"image": {"repoURL": "127.0.0.1:5000/demo/new"}}]}}),
        ),
        "freight" => (
            "Freight",
            json!({"alias": "forged", "origin": {"kind": "Warehouse", "name": "app"},
            "images": [{"repoURL": "127.0.0.1:5000/demo/app", "tag": "6.6.6", "digest": "sha256:bb"}]}),
        ),
        "promotions" => (
            "Promotion",
            json!({"spec": {"stage": "dev", "freight": "f1"}}),
        ),
        "credentials" => (
            "Credential",
            json!({"spec": {"type": "git",
            "repoURL": "http://127.0.0.1:9/new.git", "username": "u", "password": "p"}}),
        ),
        "projectconfigs" => ("ProjectConfig", json!({"spec": {}})),
        "roles" => (
            "Role",
            json!({"rules": [{"verbs": ["get"], "resources": ["stages"]}]}),
        ),
        "rolebindings" => (
            "RoleBinding",
            json!({"roleRef": {"name": "dray-admin"},
            "subjects": [{"kind": "User", "name": "vic"}]}),
        ),
        "promotiontasks" => (
            "PromotionTask",
            json!({"spec": {"steps": [
            {"uses": "http", "config": {"url": "http://127.0.0.1:9/"}}]}}),
        ),
        "analysistemplates" => (
            "AnalysisTemplate",
            json!({"spec": {"metrics": [{"name": "up",
            "provider": {"web": {"url": "http://127.0.0.1:9/"}}, "successCondition": "true"}]}}),
        ),
        other => panic!("no new object for `{other}`"),
    };
    let name = if kind == "ProjectConfig" {
        "other"
    } else {
        "new-one"
    };
    let mut object = json!({"apiVersion": "dray.dev/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": "demo"}});
    if let (Some(map), Some(rest)) = (object.as_object_mut(), rest.as_object()) {
        map.extend(rest.clone());
    }
    object
}

/// The status of `probe` as `caller` (the body is never read: an SSE stream stays open).
async fn status_of(world: &World, probe: &Probe, caller: &str) -> u16 {
    let (path, payload) = request_of(world, probe, caller);
    let mut request = Request::builder()
        .method(probe.method.clone())
        .uri(&path)
        .header("host", "127.0.0.1:8080");
    let body = match payload {
        None => Body::empty(),
        Some(Payload::Json(json)) => {
            request = request.header("content-type", "application/json");
            Body::from(json.to_string())
        }
        Some(Payload::Form(form)) => {
            request = request.header("content-type", "application/x-www-form-urlencoded");
            Body::from(form)
        }
    };
    match probe.door {
        Door::Api => {
            if let Some(token) = world.tokens.get(caller) {
                request = request.header("authorization", format!("Bearer {token}"));
            }
        }
        Door::Ui | Door::Open => {
            if let Some(cookie) = world.cookies.get(caller) {
                request = request.header("cookie", cookie);
            }
        }
        Door::Webhook => {}
    }
    let request = request.body(body).unwrap();
    let router = test_support::app(&world.fresh.state);
    router.oneshot(request).await.unwrap().status().as_u16()
}

#[tokio::test]
async fn every_route_answers_each_caller_as_the_matrix_says() {
    let expected: BTreeMap<&str, [u16; 5]> = EXPECTED.iter().copied().collect();
    let mut found = Vec::new();
    let mut wrong = Vec::new();
    let mut missing = Vec::new();
    for probe in probes() {
        let world = World::new().await;
        let mut statuses = [0u16; 5];
        for (i, caller) in CALLERS.iter().enumerate() {
            statuses[i] = status_of(&world, &probe, caller).await;
        }
        // Whatever the table says: nobody gets past an API route's authentication, and a
        // UI page sends nobody to the login page.
        match probe.door {
            Door::Api => assert_eq!(statuses[0], 401, "{}: nobody got in", probe.row),
            Door::Ui => assert_eq!(statuses[0], 303, "{}: nobody got a page", probe.row),
            Door::Webhook | Door::Open => {}
        }
        found.push(format!("    (\"{}\", {statuses:?}),", probe.row));
        match expected.get(probe.row.as_str()) {
            None => missing.push(probe.row.clone()),
            Some(want) if *want != statuses => wrong.push(format!(
                "{}: expected {want:?}, got {statuses:?}",
                probe.row
            )),
            Some(_) => {}
        }
    }
    assert!(
        missing.is_empty() && wrong.is_empty(),
        "columns: {CALLERS:?}\nroutes without a row in EXPECTED: {missing:#?}\nrows that differ: {wrong:#?}\nthe matrix as it answers now:\n{}",
        found.join("\n")
    );
}
