//! The HTTP front of the double: authentication (bearer tokens → 401), the request's
//! Kubernetes attributes from its path and method, RBAC (→ 403), then discovery, OpenAPI,
//! or the resource verbs. One fallback handler parses paths as the API server does
//! (`/api/v1/namespaces/{ns}/{resource}/{name}/{subresource}`, `/apis/{group}/{version}/…`).
//!
//! It routes and guards; the verbs decide what happens to objects.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::rbac::{self, Attributes, UserInfo};
use super::resources::ResourceType;
use super::state::Shared;
use super::status::ApiError;
use super::{discovery, openapi, verbs, watch};

/// The largest request body accepted (the real server's limit is 3 MiB for objects).
const MAX_BODY: usize = 8 * 1024 * 1024;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

/// A resource request's target.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) ty: ResourceType,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) subresource: String,
}

/// Everything a verb needs from the request.
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) target: Target,
    pub(crate) user: UserInfo,
    pub(crate) query: HashMap<String, String>,
    pub(crate) headers: HeaderMap,
    pub(crate) body: bytes::Bytes,
}

impl Call {
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    pub(crate) fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true" | "1"))
    }

    pub(crate) fn dry_run(&self) -> bool {
        self.param("dryRun") == Some("All")
    }

    pub(crate) fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    }
}

/// A JSON response with an HTTP code and `Warning` headers.
pub(crate) fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response {
    let mut response = (
        axum::http::StatusCode::from_u16(code).unwrap_or(axum::http::StatusCode::OK),
        body.to_string(),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for warning in warnings {
        let text = format!("299 - {}", serde_json::Value::String(warning.clone()));
        if let Ok(value) = HeaderValue::from_str(&text) {
            headers.append(header::WARNING, value);
        }
    }
    response
}

fn authenticate(shared: &Shared, headers: &HeaderMap) -> Option<UserInfo> {
    let token = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?
        .trim();
    shared.lock().tokens.get(token).cloned()
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let Some(user) = authenticate(&shared, &parts.headers) else {
        shared
            .lock()
            .requests
            .push((parts.method.to_string().to_lowercase(), path, None));
        return ApiError::unauthorized().into_response();
    };
    let query: HashMap<String, String> =
        axum::extract::Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
            .map(|query| query.0)
            .unwrap_or_default();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(err) => {
            return ApiError::bad_request(format!("failed to read the body: {err}"))
                .into_response();
        }
    };
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if let Some(response) = non_resource(&shared, &parts.method, &path, &accept, &user) {
        return response;
    }
    let target = match resolve(&shared, &path) {
        Ok(target) => target,
        Err(err) => {
            shared.lock().requests.push((
                parts.method.to_string().to_lowercase(),
                path,
                Some(user.username),
            ));
            return err.into_response();
        }
    };
    let verb = match k8s_verb(&parts.method, &target, &query) {
        Ok(verb) => verb,
        Err(err) => return err.into_response(),
    };
    let attrs = Attributes {
        verb: verb.to_owned(),
        group: target.ty.group.clone(),
        resource: target.ty.plural.clone(),
        subresource: target.subresource.clone(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
    };
    {
        let mut inner = shared.lock();
        inner
            .requests
            .push((verb.to_owned(), path.clone(), Some(user.username.clone())));
        // Every authenticated user may ask what they may do (system:basic-user).
        let self_review = target.ty.plural == "selfsubjectaccessreviews";
        let decision = rbac::authorize(&inner.store, &user, &attrs);
        if !decision.allowed && !self_review {
            let message = rbac::forbidden_message(&user, &attrs);
            return ApiError::forbidden(
                &target.ty.group,
                &target.ty.plural,
                &target.name,
                &message,
            )
            .into_response();
        }
    }
    let mut headers = parts.headers;
    let mut body = body;
    let is_protobuf = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with(super::protobuf::MEDIA_TYPE));
    if is_protobuf && !body.is_empty() {
        match super::protobuf::to_json(&body) {
            Ok(object) => {
                body = bytes::Bytes::from(object.to_string());
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
            }
            Err(err) => return err.into_response(),
        }
    }
    let call = Call {
        target,
        user,
        query,
        headers,
        body,
    };
    let result = match verb {
        "get" => verbs::get(&shared, &call),
        "list" => verbs::list(&shared, &call),
        "watch" => return watch::watch(&shared, &call),
        "create" => verbs::create(&shared, &call).await,
        "update" => verbs::update(&shared, &call).await,
        "patch" => verbs::patch(&shared, &call).await,
        "delete" => verbs::delete(&shared, &call).await,
        _ => verbs::delete_collection(&shared, &call).await,
    };
    match result {
        Ok((code, body, warnings)) => json_response(code, &body, &warnings),
        Err(err) => err.into_response(),
    }
}

fn k8s_verb(
    method: &Method,
    target: &Target,
    query: &HashMap<String, String>,
) -> Result<&'static str, ApiError> {
    let named = !target.name.is_empty();
    let verb = match *method {
        Method::GET if named => "get",
        Method::GET if matches!(query.get("watch").map(String::as_str), Some("true" | "1")) => {
            "watch"
        }
        Method::GET => "list",
        Method::POST if !named => "create",
        Method::PUT if named => "update",
        Method::PATCH if named => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
    };
    if target.ty.create_only && verb != "create" {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    if !target.subresource.is_empty() && !matches!(verb, "get" | "update" | "patch") {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    Ok(verb)
}

/// Parses a resource path into its target, or the 404 the real server gives.
fn resolve(shared: &Shared, path: &str) -> Result<Target, ApiError> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::no_route()),
    };
    let namespace_sub = group.is_empty()
        && rest.len() == 3
        && rest[0] == "namespaces"
        && matches!(rest[2], "status" | "finalize");
    let (namespace, plural, name, subresource) =
        if rest.first() == Some(&"namespaces") && rest.len() >= 3 && !namespace_sub {
            (rest[1], rest[2], rest.get(3).copied(), rest.get(4).copied())
        } else if let Some(plural) = rest.first() {
            ("", *plural, rest.get(1).copied(), rest.get(2).copied())
        } else {
            return Err(ApiError::no_route());
        };
    if rest.len() > 5 {
        return Err(ApiError::no_route());
    }
    let ty = shared
        .lock()
        .find_type(group, version, plural)
        .ok_or_else(ApiError::no_route)?;
    let subresource = subresource.unwrap_or_default();
    if (!namespace.is_empty() && !ty.namespaced)
        || (ty.namespaced && namespace.is_empty() && name.is_some())
        || !(subresource.is_empty() || (subresource == "status" && ty.status_subresource))
    {
        return Err(ApiError::no_route());
    }
    Ok(Target {
        ty,
        namespace: namespace.to_owned(),
        name: name.unwrap_or_default().to_owned(),
        subresource: subresource.to_owned(),
    })
}

fn typed(body: &Value, content_type: &'static str) -> Response {
    let mut response = json_response(200, body, &[]);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `/version`, `/api`, `/apis`, group discovery, `/openapi/*` and health; `None` for a
/// resource path.
fn non_resource(
    shared: &Shared,
    method: &Method,
    path: &str,
    accept: &str,
    user: &UserInfo,
) -> Option<Response> {
    if *method != Method::GET {
        return None;
    }
    let trimmed = path.trim_end_matches('/');
    let record = |verb: &str| {
        shared.lock().requests.push((
            verb.to_owned(),
            path.to_owned(),
            Some(user.username.clone()),
        ));
    };
    let types = shared.lock().types.clone();
    let response = match trimmed {
        "/version" => json_response(200, &discovery::version(), &[]),
        "/healthz" | "/readyz" | "/livez" => (axum::http::StatusCode::OK, "ok").into_response(),
        "/api" if discovery::wants_aggregated(accept) => typed(
            &discovery::aggregated(&types, true),
            discovery::AGGREGATED_V2,
        ),
        "/api" => {
            let address = shared
                .server_address
                .lock()
                .map(|a| a.clone())
                .unwrap_or_default();
            json_response(200, &discovery::api_versions(&address), &[])
        }
        "/apis" if discovery::wants_aggregated(accept) => typed(
            &discovery::aggregated(&types, false),
            discovery::AGGREGATED_V2,
        ),
        "/apis" => json_response(200, &discovery::api_group_list(&types), &[]),
        "/openapi/v3" => json_response(200, &openapi::index(&types), &[]),
        "/openapi/v2" => {
            let mut response = ApiError::new(
                406,
                "NotAcceptable",
                "only OpenAPI v3 is served by this double",
                None,
            )
            .into_response();
            *response.status_mut() = axum::http::StatusCode::NOT_ACCEPTABLE;
            response
        }
        _ => {
            let segments: Vec<&str> = trimmed.trim_start_matches('/').split('/').collect();
            let (group, version) = match segments.as_slice() {
                ["api", version] => ("", *version),
                ["apis", group, version] => (*group, *version),
                ["openapi", "v3", "api", version] => {
                    return Some(openapi_doc(&types, "", version, path, shared, user));
                }
                ["openapi", "v3", "apis", group, version] => {
                    return Some(openapi_doc(&types, group, version, path, shared, user));
                }
                ["apis", group] => {
                    record("get");
                    let list = discovery::api_group_list(&types);
                    let found = list["groups"]
                        .as_array()
                        .and_then(|groups| groups.iter().find(|g| g["name"] == *group).cloned());
                    return Some(match found {
                        Some(mut group) => {
                            group["kind"] = "APIGroup".into();
                            group["apiVersion"] = "v1".into();
                            json_response(200, &group, &[])
                        }
                        None => ApiError::no_route().into_response(),
                    });
                }
                _ => return None,
            };
            match discovery::resource_list(&types, group, version) {
                Some(list) => json_response(200, &list, &[]),
                None => ApiError::no_route().into_response(),
            }
        }
    };
    record("get");
    Some(response)
}

fn openapi_doc(
    types: &[ResourceType],
    group: &str,
    version: &str,
    path: &str,
    shared: &Shared,
    user: &UserInfo,
) -> Response {
    shared
        .lock()
        .requests
        .push(("get".into(), path.to_owned(), Some(user.username.clone())));
    if !types
        .iter()
        .any(|ty| ty.group == group && ty.version == version)
    {
        return ApiError::no_route().into_response();
    }
    json_response(200, &openapi::document(types, group, version), &[])
}
