//! Route tests for the release board, `GET /api/v1/board` and the page at `/`, through
//! the whole router against a real SQLite store: a viewer bound in one project sees only
//! that project's row (even when filtering for the other by name), anonymous callers are
//! turned away, crafted query parameters get a 400 naming them (never a 500), and the
//! page shows each cell's Freight, health as a word and what differs downstream; and the
//! project page's Stage search (`?q=`), which works without script.

use axum::body::Body;
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};

use crate::api::{Kind, ObjectKey};
use crate::server::auth::AuthMode;
use crate::server::test_support::{self, Fresh, Reply};
use crate::server::tokens;
use crate::store::{Store, TokenRecord, TokenStore};

/// `tina`'s token: `dray-viewer` in project `shop` only.
const SHOP_VIEWER: &str = "dray_shop-viewer-token-for-tests";

const SHOP: &str = "\
apiVersion: dray.dev/v1alpha1
kind: Project
metadata: {name: shop}
---
apiVersion: dray.dev/v1alpha1
kind: Warehouse
metadata: {name: cart, namespace: shop}
spec:
  subscriptions:
    - image: {repoURL: 127.0.0.1:5000/shop/cart}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: dev, namespace: shop}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: cart}
      sources: {direct: true}
---
apiVersion: dray.dev/v1alpha1
kind: Stage
metadata: {name: qa, namespace: shop}
spec:
  requestedFreight:
    - origin: {kind: Warehouse, name: cart}
      sources: {stages: [dev]}
---
apiVersion: dray.dev/v1alpha1
kind: RoleBinding
metadata: {name: tina, namespace: shop}
roleRef: {name: dray-viewer}
subjects: [{kind: User, name: tina}]
";

/// Two projects: `demo` (dev → staging → prod, dev holding `f1` and Unhealthy) and
/// `shop` (dev → qa); `tina` may read `shop` only.
async fn world() -> Fresh {
    let fresh = test_support::fresh(AuthMode::Token).await;
    let yaml = format!("{}---\n{SHOP}", test_support::three_stages(None));
    let applied = send(
        &fresh,
        test_support::json_request(
            Some(&fresh.admin),
            Method::POST,
            "/api/v1/apply",
            Some(json!({"files": [{"path": "p.yaml", "content": yaml}]})),
        ),
    )
    .await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    fresh
        .store
        .create(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Freight",
            "metadata": {"name": "f1", "namespace": "demo"},
            "alias": "brave-badger", "origin": {"kind": "Warehouse", "name": "app"},
            "images": [{"repoURL": "127.0.0.1:5000/demo/app", "tag": "1.4.2", "digest": "sha256:aa"}],
            "commits": [{"repoURL": "http://127.0.0.1:9/config.git", "id": "abcdef0123456789"}]
        }))
        .await
        .unwrap();
    let key = ObjectKey::namespaced(Kind::Stage, "demo", "dev");
    fresh
        .store
        .update_status(
            &key,
            json!({"currentFreight": {"name": "f1", "alias": "brave-badger", "since": "2026-01-01T00:00:00Z"},
                   "health": {"status": "Unhealthy", "message": "Degraded"}}),
            None,
        )
        .await
        .unwrap();
    fresh
        .store
        .create_token(
            TokenRecord {
                hash: tokens::hash(SHOP_VIEWER),
                user: "tina".into(),
                groups: vec![],
                created_at: "2026-01-01T00:00:00Z".into(),
            },
            None,
        )
        .await
        .unwrap();
    fresh
}

async fn send(fresh: &Fresh, request: Request<Body>) -> Reply {
    test_support::send(&fresh.state, request).await
}

async fn api(fresh: &Fresh, token: Option<&str>, uri: &str) -> (StatusCode, Value) {
    let reply = send(
        fresh,
        test_support::json_request(token, Method::GET, uri, None),
    )
    .await;
    (reply.status, reply.json())
}

fn projects(board: &Value) -> Vec<&str> {
    board["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["project"].as_str())
        .collect()
}

async fn login(fresh: &Fresh, token: &str) -> String {
    let request = Request::post("/login")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("host", "127.0.0.1:8080")
        .body(Body::from(format!("token={token}")))
        .unwrap();
    let reply = send(fresh, request).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    reply.headers[SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

async fn page(fresh: &Fresh, cookie: &str, uri: &str) -> (StatusCode, String, Option<String>) {
    let request = Request::get(uri)
        .header(COOKIE, cookie)
        .body(Body::empty())
        .unwrap();
    let reply = send(fresh, request).await;
    let location = reply
        .headers
        .get(LOCATION)
        .and_then(|l| l.to_str().ok())
        .map(str::to_owned);
    (
        reply.status,
        String::from_utf8_lossy(&reply.body).into_owned(),
        location,
    )
}

#[tokio::test]
async fn the_board_shows_only_the_projects_the_caller_may_read() {
    let fresh = world().await;
    let (status, all) = api(&fresh, Some(&fresh.admin), "/api/v1/board").await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(projects(&all), ["demo", "shop"]);
    assert_eq!(all["columns"], json!(["dev", "qa", "staging", "prod"]));
    assert_eq!(all["projects"], 2);
    let dev = &all["rows"][0]["cells"][0];
    assert_eq!(dev["stage"], "dev");
    assert_eq!(dev["freight"]["alias"], "brave-badger");
    assert_eq!(dev["freight"]["images"], json!(["app:1.4.2"]));
    assert_eq!(dev["freight"]["commit"], "abcdef0");
    assert_eq!(dev["health"], "Unhealthy");
    assert_eq!(dev["attention"], json!(["unhealthy"]));
    assert_eq!(dev["differsFrom"], json!(["staging"]));

    let (status, mine) = api(&fresh, Some(SHOP_VIEWER), "/api/v1/board").await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(projects(&mine), ["shop"]);
    assert_eq!(mine["projects"], 1);
    // Asking for the other project by name finds nothing, and says nothing of it.
    let (status, other) = api(&fresh, Some(SHOP_VIEWER), "/api/v1/board?name=demo").await;
    assert_eq!(status, StatusCode::OK);
    assert!(projects(&other).is_empty(), "{other}");
    assert!(!other.to_string().contains("brave-badger"), "{other}");

    let (status, _) = api(&fresh, None, "/api/v1/board").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, stuck) = api(&fresh, Some(&fresh.admin), "/api/v1/board?attention=true").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(projects(&stuck), ["demo"]);
    let (_, by_warehouse) = api(&fresh, Some(&fresh.admin), "/api/v1/board?warehouse=cart").await;
    assert_eq!(projects(&by_warehouse), ["shop"]);
}

#[tokio::test]
async fn crafted_board_queries_get_a_400_naming_the_parameter() {
    let fresh = world().await;
    let long = "x".repeat(400);
    for (query, says) in [
        ("attention=maybe", "`attention` is `maybe`"),
        ("pages=99999999999999999999", "no filter `pages`"),
        ("name=a&name=b", "`name` is given twice"),
        (
            &format!("warehouse={long}") as &str,
            "`warehouse` is 400 characters",
        ),
    ] {
        let (status, body) = api(
            &fresh,
            Some(&fresh.admin),
            &format!("/api/v1/board?{query}"),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(body.to_string().contains(says), "{query}: {body}");
        let cookie = login(&fresh, &fresh.admin).await;
        let (status, html, _) = page(&fresh, &cookie, &format!("/?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert!(html.contains(says), "{query}: {html}");
    }
    let cookie = login(&fresh, &fresh.admin).await;
    for (query, says) in [
        ("cols=0", "board paging `cols` is `0`"),
        ("colpage=x", "board paging `colpage` is `x`"),
        ("page=99999999999999999999", "board paging `page`"),
        ("stuck=maybe", "board filter `stuck` is `maybe`"),
    ] {
        let (status, html, _) = page(&fresh, &cookie, &format!("/?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {html}");
        assert!(html.contains(says), "{query}: {html}");
    }
}

#[tokio::test]
async fn the_board_page_draws_each_cell_with_words_and_filters_without_script() {
    let fresh = world().await;
    let cookie = login(&fresh, &fresh.admin).await;
    let (status, html, _) = page(&fresh, &cookie, "/").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("<tr data-project=\"demo\">"), "{html}");
    assert!(html.contains("<tr data-project=\"shop\">"), "{html}");
    assert!(
        html.contains("<th scope=\"col\" data-column=\"qa\">qa</th>"),
        "{html}"
    );
    assert!(html.contains(">brave-badger</a>"), "{html}");
    assert!(html.contains("data-health=\"Unhealthy\""), "{html}");
    // A stuck cell: its state in a colour and a word, the details in its title.
    assert!(
        html.contains("<strong data-attention=\"unhealthy\">unhealthy</strong>"),
        "{html}"
    );
    assert!(html.contains("health: Unhealthy · "), "{html}");
    assert!(html.contains("ahead of </span>staging"), "{html}");
    assert!(html.contains("1 stuck"), "{html}");
    assert!(html.contains("href=\"/?stuck=1\""), "{html}");
    assert!(html.contains("<label for=\"board-name\">"), "{html}");
    let (_, filtered, _) = page(&fresh, &cookie, "/?name=sho&warehouse=&attention=").await;
    assert!(filtered.contains("data-project=\"shop\""), "{filtered}");
    assert!(!filtered.contains("data-project=\"demo\""), "{filtered}");
    assert!(filtered.contains("1 of 2 projects"), "{filtered}");
    let (_, stuck, _) = page(&fresh, &cookie, "/?stuck=1").await;
    assert!(stuck.contains("data-project=\"demo\""), "{stuck}");
    assert!(!stuck.contains("data-project=\"shop\""), "{stuck}");
    assert!(stuck.contains("checked"), "{stuck}");

    // One project to see and no filter: straight to its page; with a filter, the board.
    let tina = login(&fresh, SHOP_VIEWER).await;
    let (status, _, location) = page(&fresh, &tina, "/").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location.as_deref(), Some("/projects/shop"));
    let (status, html, _) = page(&fresh, &tina, "/?name=").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("data-project=\"shop\"") && !html.contains("data-project=\"demo\""));
}

#[tokio::test]
async fn the_project_page_finds_a_stage_by_name_without_script() {
    let fresh = world().await;
    let cookie = login(&fresh, &fresh.admin).await;
    let (status, html, _) = page(&fresh, &cookie, "/projects/demo?q=STAG").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(
        html.contains("<label for=\"stage-q\">Find a Stage</label>"),
        "{html}"
    );
    assert!(
        html.contains("class=\"node stage\" data-stage=\"staging\""),
        "{html}"
    );
    assert!(
        !html.contains("class=\"node stage\" data-stage=\"prod\""),
        "{html}"
    );
    assert!(html.contains("Showing 1 of 3 Stages"), "{html}");
    // Promote stays a button on the Stages drawn.
    assert!(
        html.contains("data-action=\"promote\" data-stage=\"staging\""),
        "{html}"
    );
    let (_, whole, _) = page(&fresh, &cookie, "/projects/demo").await;
    assert!(whole.contains("class=\"node stage\" data-stage=\"prod\""));
    assert!(
        !whole.contains("id=\"scope\""),
        "a small project is drawn whole"
    );
    let (status, none, _) = page(
        &fresh,
        &cookie,
        &format!("/projects/demo?q={}", "z".repeat(5000)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(none.contains("Showing 0 of 3 Stages"), "{none}");
}

#[tokio::test]
async fn the_board_pages_its_columns_and_rows_with_plain_links() {
    let fresh = world().await;
    let cookie = login(&fresh, &fresh.admin).await;
    let header = |c: &str| format!("<th scope=\"col\" data-column=\"{c}\">{c}</th>");
    let (status, first, _) = page(&fresh, &cookie, "/?cols=2").await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert!(
        first.contains(&header("dev")) && first.contains(&header("qa")),
        "{first}"
    );
    assert!(!first.contains(&header("staging")), "{first}");
    assert!(
        first.contains("Stage names 1–2 of 4 · <strong>2 hidden</strong>"),
        "{first}"
    );
    assert!(first.contains("href=\"/?cols=2&amp;colpage=2\""), "{first}");
    let (_, second, _) = page(&fresh, &cookie, "/?cols=2&colpage=2&name=o").await;
    assert!(
        second.contains(&header("prod")) && !second.contains(&header("dev")),
        "{second}"
    );
    assert!(second.contains("href=\"/?name=o&amp;cols=2\""), "{second}");
    assert!(second.contains("aria-current=\"page\""), "{second}");
    // Rows: one project a page, the second page is shop's; a page past the end, the last.
    let (_, rows, _) = page(&fresh, &cookie, "/?rows=1&page=2").await;
    assert!(
        rows.contains("data-project=\"shop\"") && !rows.contains("data-project=\"demo\""),
        "{rows}"
    );
    assert!(
        rows.contains("projects 2–2 of 2 · <strong>1 hidden</strong>"),
        "{rows}"
    );
    let (_, past, _) = page(&fresh, &cookie, "/?rows=1&page=9").await;
    assert!(past.contains("data-project=\"shop\""), "{past}");
    // Everything on one page: no paging drawn.
    let (_, all, _) = page(&fresh, &cookie, "/").await;
    assert!(!all.contains("board-pages"), "{all}");
}
