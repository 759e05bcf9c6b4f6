//! Discovery against an in-process registry double, for what the e2e registry cannot do:
//! Bearer tokens from a token service, `Link` pagination, and a registry that ignores
//! `last`. The real registry (htpasswd, indexes, a stopped server) is exercised by
//! `e2e/tests/discovery_image.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;

use super::*;

/// `base64("bot:pw")`.
const BOT_BASIC: &str = "Basic Ym90OnB3";

#[derive(Debug)]
struct Double {
    tags: Vec<String>,
    bearer: bool,
    honours_last: bool,
    addr: SocketAddr,
    requests: AtomicU32,
    tokens_issued: AtomicU32,
}

async fn start(tags: &[&str], bearer: bool, honours_last: bool) -> Arc<Double> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let double = Arc::new(Double {
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        bearer,
        honours_last,
        addr: listener.local_addr().unwrap(),
        requests: AtomicU32::new(0),
        tokens_issued: AtomicU32::new(0),
    });
    let app = Router::new().fallback(handle).with_state(double.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    double
}

async fn handle(State(double): State<Arc<Double>>, request: Request) -> Response {
    double.requests.fetch_add(1, Ordering::SeqCst);
    let auth = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let url = reqwest::Url::parse(&format!("http://double{}", request.uri())).unwrap();
    let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let path = request.uri().path().to_owned();
    if path == "/token" {
        if auth != Some(BOT_BASIC) || param("scope").as_deref() != Some("repository:app:pull") {
            return reply(StatusCode::UNAUTHORIZED, &[], "{}");
        }
        double.tokens_issued.fetch_add(1, Ordering::SeqCst);
        return reply(StatusCode::OK, &[], r#"{"token":"tok","expires_in":300}"#);
    }
    if double.bearer && auth != Some("Bearer tok") {
        let challenge = format!(
            r#"Bearer realm="http://{}/token",service="double",scope="repository:app:pull""#,
            double.addr
        );
        return reply(
            StatusCode::UNAUTHORIZED,
            &[("www-authenticate", &challenge)],
            "{}",
        );
    }
    if path == "/v2/app/tags/list" {
        let n: usize = param("n")
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX);
        let start = match param("last").filter(|_| double.honours_last) {
            Some(last) => double
                .tags
                .iter()
                .position(|t| *t == last)
                .map_or(0, |i| i + 1),
            None => 0,
        };
        let page: Vec<&String> = double.tags.iter().skip(start).take(n).collect();
        let body = serde_json::json!({ "name": "app", "tags": page }).to_string();
        let more = double.honours_last && start + page.len() < double.tags.len();
        let link = page
            .last()
            .filter(|_| more)
            .map(|last| format!(r#"</v2/app/tags/list?n={n}&last={last}>; rel="next""#));
        let headers: Vec<(&str, &str)> = link.iter().map(|l| ("link", l.as_str())).collect();
        return reply(StatusCode::OK, &headers, &body);
    }
    if let Some(tag) = path.strip_prefix("/v2/app/manifests/") {
        if request.method() == Method::HEAD && double.tags.iter().any(|t| t == tag) {
            let digest = registry::sha256(tag.as_bytes());
            let headers = [
                ("docker-content-digest", digest.as_str()),
                ("content-type", "application/vnd.oci.image.manifest.v1+json"),
            ];
            return reply(StatusCode::OK, &headers, "");
        }
    }
    reply(
        StatusCode::NOT_FOUND,
        &[],
        r#"{"errors":[{"code":"NOT_FOUND","message":"nope"}]}"#,
    )
}

fn reply(status: StatusCode, headers: &[(&str, &str)], body: &str) -> Response {
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    response.body(Body::from(body.to_owned())).unwrap()
}

fn sub(double: &Double) -> ImageSubscription {
    ImageSubscription {
        repo_url: format!("{}/app", double.addr),
        strict_semvers: true,
        discovery_limit: 20,
        insecure: true,
        ..ImageSubscription::default()
    }
}

fn discoverer(page_size: usize) -> ImageDiscoverer {
    let options = ImageDiscovererOptions {
        tag_page_size: page_size,
        ..Default::default()
    };
    ImageDiscoverer::new(options).unwrap()
}

fn bot() -> RegistryCredentials {
    RegistryCredentials {
        username: "bot".into(),
        password: "pw".into(),
    }
}

#[tokio::test]
async fn bearer_tokens_are_fetched_once_and_reused() {
    let double = start(&["1.0.0", "1.1.0"], true, true).await;
    let discoverer = discoverer(100);
    let first = discoverer
        .discover(&sub(&double), Some(&bot()))
        .await
        .unwrap();
    assert_eq!(first.images[0].tag, "1.1.0");
    // 401, token, tag list, two HEADs with the token, then the newest's manifest for
    // its build time (this double serves no image config: the time stays unknown and
    // discovery goes on).
    assert_eq!(first.stats.http_requests, 6);
    assert_eq!(first.images[0].created, None);
    assert_eq!(
        double.requests.load(Ordering::SeqCst),
        6,
        "the count is what the registry saw"
    );
    let second = discoverer
        .discover(&sub(&double), Some(&bot()))
        .await
        .unwrap();
    // List and HEAD, and the build time it could not read, asked again.
    assert_eq!(second.stats.http_requests, 3);
    assert_eq!(double.tokens_issued.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_token_service_refusal_is_an_auth_error() {
    let double = start(&["1.0.0"], true, true).await;
    let wrong = RegistryCredentials {
        username: "bot".into(),
        password: "nope".into(),
    };
    let err = discoverer(100)
        .discover(&sub(&double), Some(&wrong))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ImageDiscoveryError::AuthFailed { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("refused the credentials of `bot`"),
        "{err}"
    );
}

#[tokio::test]
async fn link_headers_page_through_every_tag() {
    let double = start(&["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"], false, true).await;
    let found = discoverer(2).discover(&sub(&double), None).await.unwrap();
    assert_eq!(found.stats.tags_seen, 5);
    assert_eq!(found.stats.tag_list_requests, 3);
    assert_eq!(found.images[0].tag, "1.4.0");
}

#[tokio::test]
async fn a_registry_ignoring_last_cannot_make_pagination_loop() {
    let double = start(&["1.0.0", "1.1.0", "1.2.0", "1.3.0"], false, false).await;
    let found = discoverer(2).discover(&sub(&double), None).await.unwrap();
    // Page two repeats page one: listing stops with what it has.
    assert_eq!(found.stats.tag_list_requests, 2);
    assert_eq!(found.stats.tags_seen, 2);
}
