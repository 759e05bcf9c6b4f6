//! Route tests for the web UI: the whole server router (API and UI) against a real SQLite
//! store in a temp dir, through `oneshot`. Login, cookie attributes, CSRF on cookie
//! requests, logout, escaping, RBAC-disabled buttons, availability reasons, pagination,
//! the confirmation's diff, the Promotion view and the event stream.

use std::time::Duration;

use axum::body::Body;
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::api::{Kind, ObjectKey, SubjectKind};
use crate::server::auth::AuthMode;
use crate::server::{AppState, router, test_support, tokens};
use crate::store::{ClusterBinding, Store, TokenRecord, TokenStore};

const VIEWER_TOKEN: &str = "dray_viewer-token-for-tests";

struct Ui {
    state: AppState,
    admin: String,
    _dir: tempfile::TempDir,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn cookie(&self) -> String {
        self.headers
            .get(SET_COOKIE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }
}

fn freight(name: &str, alias: &str, tag: &str) -> Value {
    json!({
        "apiVersion": "dray.dev/v1alpha1",
        "kind": "Freight",
        "metadata": {"name": name, "namespace": "demo"},
        "alias": alias,
        "origin": {"kind": "Warehouse", "name": "app"},
        "images": [{"repoURL": "127.0.0.1:5000/demo/app", "tag": tag,
                    "digest": format!("sha256:{}", tag.replace('.', "").repeat(8))}],
        "commits": [{"repoURL": "http://127.0.0.1:9/config.git",
                     "id": format!("{}{}", tag.replace('.', ""), "0".repeat(37)),
                     "message": format!("config for {tag}")}]
    })
}

impl Ui {
    async fn new(mode: AuthMode) -> Self {
        let fresh = test_support::fresh(mode).await;
        fresh
            .store
            .create_token(
                TokenRecord {
                    hash: tokens::hash(VIEWER_TOKEN),
                    user: "vic".into(),
                    groups: vec![],
                    created_at: "2026-01-01T00:00:00Z".into(),
                },
                Some(ClusterBinding {
                    kind: SubjectKind::User,
                    name: "vic".into(),
                    role: "dray-viewer".into(),
                }),
            )
            .await
            .unwrap();
        let ui = Ui {
            state: fresh.state,
            admin: fresh.admin,
            _dir: fresh.dir,
        };
        let body = json!({"files": [{"path": "p.yaml", "content": &test_support::three_stages(Some("1h"))}]});
        let applied = ui
            .send(test_support::json_request(
                Some(&ui.admin),
                Method::POST,
                "/api/v1/apply",
                Some(body),
            ))
            .await;
        assert_eq!(applied.status, StatusCode::OK, "{}", applied.body);
        ui
    }

    fn store(&self) -> &dyn Store {
        self.state.store.as_ref()
    }

    async fn send(&self, request: Request<Body>) -> Answer {
        let reply = test_support::send(&self.state, request).await;
        Answer {
            status: reply.status,
            headers: reply.headers,
            body: String::from_utf8_lossy(&reply.body).into_owned(),
        }
    }

    async fn login_with(&self, token: &str, extra: &[(&str, &str)]) -> Answer {
        let mut request = Request::post("/login")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("host", "127.0.0.1:8080");
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let form = format!("token={}", token.replace('+', "%2B"));
        self.send(request.body(Body::from(form)).unwrap()).await
    }

    /// Logs in and returns the `Cookie` header value to send.
    async fn login(&self, token: &str) -> String {
        let answer = self.login_with(token, &[]).await;
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
        answer.cookie().split(';').next().unwrap().to_owned()
    }

    /// The body of `GET uri`.
    async fn body(&self, uri: &str, cookie: Option<&str>) -> String {
        self.get(uri, cookie).await.body
    }

    async fn get(&self, uri: &str, cookie: Option<&str>) -> Answer {
        let mut request = Request::get(uri);
        if let Some(cookie) = cookie {
            request = request.header(COOKIE, cookie);
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    async fn post_json(&self, uri: &str, cookie: &str, csrf: Option<&str>, body: Value) -> Answer {
        let mut request = Request::post(uri)
            .header(COOKIE, cookie)
            .header("content-type", "application/json");
        if let Some(csrf) = csrf {
            request = request.header("x-csrf-token", csrf);
        }
        self.send(request.body(Body::from(body.to_string())).unwrap())
            .await
    }

    async fn add_freight(&self, name: &str, alias: &str, tag: &str) {
        self.store()
            .create(freight(name, alias, tag))
            .await
            .unwrap();
    }

    async fn set_stage_status(&self, stage: &str, status: Value) {
        let key = ObjectKey::namespaced(Kind::Stage, "demo", stage);
        self.store()
            .update_status(&key, status, None)
            .await
            .unwrap();
    }
}

/// The CSRF token a page embeds.
fn csrf_of(page: &str) -> String {
    let start = page
        .find("name=\"csrf-token\" content=\"")
        .expect("a csrf meta tag")
        + 27;
    page[start..].split('"').next().unwrap().to_owned()
}

/// The opening tag of the first element matching all `needles` (attribute texts).
fn tag_with<'a>(page: &'a str, needles: &[&str]) -> Option<&'a str> {
    page.split('<')
        .find(|tag| {
            needles
                .iter()
                .all(|n| tag.split('>').next().unwrap_or("").contains(n))
        })
        .map(|tag| tag.split('>').next().unwrap_or(""))
}

#[tokio::test]
async fn pages_need_a_session_and_login_sets_a_strict_http_only_cookie() {
    let ui = Ui::new(AuthMode::Token).await;
    let anonymous = ui.get("/projects/demo", None).await;
    assert_eq!(anonymous.status, StatusCode::SEE_OTHER);
    assert_eq!(anonymous.headers[LOCATION], "/login");
    let form = ui.get("/login", None).await;
    assert!(form.body.contains("id=\"token\"") && form.body.contains("id=\"login\""));

    let wrong = ui.login_with("dray_not-a-real-token", &[]).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.body.contains("not valid"));
    assert!(!wrong.body.contains("dray_not-a-real-token"));
    assert!(wrong.cookie().is_empty());

    let ok = ui.login_with(&ui.admin, &[]).await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER);
    let cookie = ok.cookie();
    for part in ["dray_session=", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "{cookie}");
    assert!(
        !cookie.contains(&ui.admin),
        "the token must never be the cookie"
    );

    let behind_tls = ui
        .login_with(&ui.admin, &[("x-forwarded-proto", "https")])
        .await;
    assert!(
        behind_tls.cookie().contains("; Secure"),
        "{}",
        behind_tls.cookie()
    );

    let session = cookie.split(';').next().unwrap();
    let page = ui.get("/projects/demo", Some(session)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("data-stage=\"dev\""));
    assert!(page.body.contains("id=\"user\">admin<"));
    assert!(
        !page.body.contains(&ui.admin),
        "the token must never be on a page"
    );
    assert_eq!(page.headers["x-frame-options"], "DENY");
    assert!(
        page.headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
}

/// The page's text with maud's escapes undone, for comparing with a JSON message.
fn unescaped(page: &str) -> String {
    page.replace("&#96;", "`")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Logs in with `token`, which must be refused: a 401 page, no session, the token not
/// echoed, and the API's bearer door saying the same. The page's text, and the API's error.
async fn refused_login(ui: &Ui, token: &str) -> (String, Value) {
    let refused = ui.login_with(token, &[]).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    let page = unescaped(&refused.body);
    assert!(!page.contains(token), "the token must not be echoed");
    assert!(
        refused.cookie().is_empty(),
        "no session: {}",
        refused.cookie()
    );
    let api = ui
        .send(test_support::json_request(
            Some(token),
            Method::GET,
            "/api/v1/projects",
            None,
        ))
        .await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED, "{}", api.body);
    let error: Value = serde_json::from_str(&api.body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(page.contains(message), "{message} / {page}");
    (page, error)
}

#[tokio::test]
async fn a_login_with_an_expired_token_says_when_it_expired_and_makes_no_session() {
    let ui = Ui::new(AuthMode::Token).await;
    let token = "dray_expired-token-for-tests";
    let details = crate::store::TokenDetails {
        created_by: Some("admin".into()),
        description: None,
        expires_at: Some("2020-01-01T00:00:00Z".into()),
    };
    let record = TokenRecord {
        hash: tokens::hash(token),
        user: "ann".into(),
        groups: vec![],
        created_at: "2019-01-01T00:00:00Z".into(),
    };
    let id = ui
        .state
        .auth
        .tokens
        .add_token(record, details, None)
        .await
        .unwrap();

    let (page, _) = refused_login(&ui, token).await;
    for part in [
        format!("the API token `{id}` of user `ann` expired at 2020-01-01T00:00:00Z"),
        "create a new one with `dray token create`".to_owned(),
    ] {
        assert!(page.contains(&part), "the page must say `{part}`: {page}");
    }
    assert!(
        !page.contains("not valid"),
        "not the generic refusal: {page}"
    );
}

#[tokio::test]
async fn a_login_with_a_revoked_token_says_it_was_revoked_and_makes_no_session() {
    let ui = Ui::new(AuthMode::Token).await;
    let made = ui
        .send(test_support::json_request(
            Some(&ui.admin),
            Method::POST,
            "/api/v1/tokens",
            Some(json!({"user": "ann", "role": "dray-viewer"})),
        ))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let made: Value = serde_json::from_str(&made.body).unwrap();
    let (token, id) = (
        made["token"].as_str().unwrap(),
        made["id"].as_str().unwrap(),
    );
    // Works, then is revoked.
    let _ = ui.login(token).await;
    let revoked = ui
        .send(test_support::json_request(
            Some(&ui.admin),
            Method::DELETE,
            &format!("/api/v1/tokens/{id}"),
            None,
        ))
        .await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.body);

    let (page, error) = refused_login(&ui, token).await;
    for part in [
        "the API token is not valid: it was revoked at ".to_owned(),
        format!("(token `{id}` of user `ann`)"),
        "ask an admin for a new one".to_owned(),
    ] {
        assert!(page.contains(&part), "the page must say `{part}`: {page}");
    }
    assert!(
        !page.contains("it is unknown"),
        "not the unknown-token refusal: {page}"
    );
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("revoked at"), "{message}");
    let hint = error["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("ask an admin for a new one"), "{hint}");
    // An unknown token is still told apart.
    let unknown = ui.login_with("dray_never-made", &[]).await;
    assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
    assert!(unknown.body.contains("it is unknown"), "{}", unknown.body);
}

#[tokio::test]
async fn a_login_posted_from_another_site_is_refused() {
    let ui = Ui::new(AuthMode::Token).await;
    let answer = ui
        .login_with(&ui.admin, &[("origin", "https://evil.example")])
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(answer.cookie().is_empty());
}

#[tokio::test]
async fn cookie_requests_that_change_state_need_the_csrf_token() {
    let ui = Ui::new(AuthMode::Token).await;
    ui.add_freight("f1", "first", "1.0.0").await;
    let cookie = ui.login(&ui.admin).await;
    let page = ui.get("/projects/demo", Some(&cookie)).await;
    let csrf = csrf_of(&page.body);
    assert!(csrf.len() >= 32);
    let approve = "/api/v1/projects/demo/stages/staging/approve";
    let body = json!({"freight": "f1", "reason": "hotfix"});

    let without = ui.post_json(approve, &cookie, None, body.clone()).await;
    assert_eq!(without.status, StatusCode::FORBIDDEN, "{}", without.body);
    assert!(without.body.contains("x-csrf-token"), "{}", without.body);
    let wrong = ui
        .post_json(approve, &cookie, Some("forged"), body.clone())
        .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let key = ObjectKey::namespaced(Kind::Freight, "demo", "f1");
    let stored = ui.store().get(&key).await.unwrap().unwrap();
    assert!(
        stored
            .object
            .pointer("/status/approvedFor/staging")
            .is_none()
    );

    let with = ui.post_json(approve, &cookie, Some(&csrf), body).await;
    assert_eq!(with.status, StatusCode::OK, "{}", with.body);
    let stored = ui.store().get(&key).await.unwrap().unwrap();
    assert_eq!(
        stored.object.pointer("/status/approvedFor/staging/by"),
        Some(&json!("admin"))
    );

    // Reads need no CSRF token; bearer requests need none either.
    let read = ui.get("/api/v1/projects/demo/stages", Some(&cookie)).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    let bearer = ui
        .send(test_support::json_request(
            Some(&ui.admin),
            Method::POST,
            "/api/v1/projects/demo/stages/prod/approve",
            Some(json!({"freight": "f1", "reason": "x"})),
        ))
        .await;
    assert_eq!(bearer.status, StatusCode::OK, "{}", bearer.body);
}

#[tokio::test]
async fn logout_ends_the_session_and_needs_its_csrf_token() {
    let ui = Ui::new(AuthMode::Token).await;
    let cookie = ui.login(&ui.admin).await;
    let csrf = csrf_of(&ui.body("/projects/demo", Some(&cookie)).await);
    let logout = |form: String| {
        Request::post("/logout")
            .header(COOKIE, cookie.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(form))
            .unwrap()
    };
    let forged = ui.send(logout("csrf=nope".into())).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(
        ui.get("/projects/demo", Some(&cookie)).await.status,
        StatusCode::OK
    );
    let out = ui.send(logout(format!("csrf={csrf}"))).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(out.cookie().contains("Max-Age=0"));
    assert_eq!(
        ui.get("/projects/demo", Some(&cookie)).await.status,
        StatusCode::SEE_OTHER
    );
    let api = ui.get("/api/v1/projects/demo/stages", Some(&cookie)).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn user_supplied_strings_are_escaped() {
    let ui = Ui::new(AuthMode::None).await;
    ui.add_freight("f1", "<script>alert(1)</script>", "1.0.0")
        .await;
    let page = ui.get("/projects/demo", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("<script>alert(1)"));
    assert!(page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    let missing = ui.get("/projects/%3Cb%3Enope", None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(!missing.body.contains("<b>nope"));
    assert!(missing.body.contains("&lt;b&gt;nope"));
}

#[tokio::test]
async fn a_viewer_sees_actions_disabled_with_the_reason() {
    let ui = Ui::new(AuthMode::Token).await;
    ui.add_freight("f1", "first", "1.0.0").await;
    let viewer = ui.login(VIEWER_TOKEN).await;
    let page = ui.body("/projects/demo", Some(&viewer)).await;
    let promote = tag_with(
        &page,
        &["data-action=\"promote\"", "data-stage=\"staging\""],
    )
    .expect("a promote button for staging");
    assert!(promote.contains("disabled"), "{promote}");
    assert!(
        promote.contains("title=\"user `vic` may not promote stages/staging\""),
        "{promote}"
    );
    assert!(page.contains(">user <code>vic</code> may not promote stages/staging<"));
    let confirm = ui
        .get(
            "/projects/demo/stages/staging/confirm?action=promote&freight=f1",
            Some(&viewer),
        )
        .await;
    assert!(
        confirm
            .body
            .contains("data-refused=\"user `vic` may not promote stages/staging\"")
    );
    // And the API agrees.
    let csrf = csrf_of(&page);
    let refused = ui
        .post_json(
            "/api/v1/projects/demo/stages/dev/promote",
            &viewer,
            Some(&csrf),
            json!({"freight": "f1"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let admin = ui.login(&ui.admin).await;
    let page = ui.body("/projects/demo", Some(&admin)).await;
    let promote = tag_with(
        &page,
        &["data-action=\"promote\"", "data-stage=\"staging\""],
    )
    .unwrap();
    assert!(!promote.contains("disabled"), "{promote}");
}

#[tokio::test]
async fn the_selected_freight_shows_each_stage_available_or_why_not() {
    let ui = Ui::new(AuthMode::None).await;
    ui.add_freight("f1", "first", "1.0.0").await;
    ui.add_freight("f2", "second", "2.0.0").await;
    // `second` is verified in dev and staging, and has been in staging for half a minute:
    // 59m30s of the hour's soak are left, so the page says `59m…` however long it takes
    // to draw (up to half a minute), never `58m59s` as one a whole minute in could.
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(30);
    let key = ObjectKey::namespaced(Kind::Freight, "demo", "f2");
    ui.store()
        .update_status(
            &key,
            json!({"currentlyIn": {"staging": {"since": since.to_string()}},
                   "verifiedIn": {"dev": {}, "staging": {}}}),
            None,
        )
        .await
        .unwrap();
    let row = |page: &str, stage: &str| -> String {
        let start = page
            .find(&format!("<tr data-stage=\"{stage}\""))
            .unwrap_or_else(|| panic!("no row for {stage}"));
        page[start..].split("</tr>").next().unwrap().to_owned()
    };
    let first = ui.body("/projects/demo?freight=f1", None).await;
    assert!(first.contains("id=\"availability\" data-freight=\"f1\""));
    assert!(row(&first, "dev").contains("available"));
    assert!(row(&first, "staging").contains("not verified in <code>dev</code>"));
    assert!(row(&first, "prod").contains("not verified in <code>staging</code>"));
    // The newest Freight is selected by default.
    let second = ui.body("/projects/demo", None).await;
    assert!(second.contains("id=\"availability\" data-freight=\"f2\""));
    let prod = row(&second, "prod");
    assert!(
        prod.contains("soaking in <code>staging</code>: 59m"),
        "{prod}"
    );
    assert!(row(&second, "staging").contains("here now"));
}

#[tokio::test]
async fn the_timeline_shows_the_newest_fifty_and_pages_back() {
    let ui = Ui::new(AuthMode::None).await;
    for i in 0..55 {
        ui.add_freight(&format!("f{i:02}"), &format!("alias-{i:02}"), "1.0.0")
            .await;
    }
    let page = ui.body("/projects/demo", None).await;
    let items = |page: &str| page.matches("<li data-freight=").count();
    assert_eq!(items(&page), 50);
    assert!(page.contains("<li data-freight=\"f54\""));
    assert!(!page.contains("<li data-freight=\"f04\""));
    assert!(
        page.contains("href=\"?before=f05\""),
        "the cursor is the last shown"
    );
    let older = ui.body("/projects/demo?before=f05", None).await;
    assert_eq!(items(&older), 5);
    assert!(older.contains("<li data-freight=\"f00\""));
    assert!(!older.contains("older →"));
}

#[tokio::test]
async fn freight_lanes_show_each_warehouse_and_page_one_lane() {
    let ui = Ui::new(AuthMode::None).await;
    ui.store()
        .create(
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Warehouse",
            "metadata": {"name": "web", "namespace": "demo"},
            "spec": {"subscriptions": [{"image": {"repoURL": "127.0.0.1:5000/demo/web"}}]}}),
        )
        .await
        .unwrap();
    for i in 0..60 {
        ui.add_freight(&format!("a{i:02}"), &format!("app-{i:02}"), "1.0.0")
            .await;
    }
    for i in 0..3 {
        let mut web = freight(&format!("w{i:02}"), &format!("web-{i:02}"), "2.0.0");
        web["origin"]["name"] = json!("web");
        ui.store().create(web).await.unwrap();
    }
    let items = |page: &str| page.matches("<li data-freight=").count();
    // Every lane: the newest few of each Warehouse, however many the other one has.
    let page = ui.body("/projects/demo", None).await;
    let lane = |page: &str, w: &str| {
        let start = page
            .find(&format!("data-lane=\"{w}\""))
            .unwrap_or_else(|| panic!("no lane {w}"));
        let rest = &page[start..];
        rest[..rest.find("</section>").unwrap()].to_owned()
    };
    let (app, web) = (lane(&page, "app"), lane(&page, "web"));
    assert_eq!(items(&app), super::project_page::LANE_PAGE);
    assert!(app.contains("<li data-freight=\"a59\""));
    assert!(app.contains("href=\"?lane=app\""), "{app}");
    assert_eq!(items(&web), 3);
    assert!(!web.contains("?lane=web"), "all of web is shown");
    // Each row links to its diff with the previous Freight of its Warehouse.
    assert!(
        web.contains("/projects/demo/diff?from=w01&amp;to=w02"),
        "{web}"
    );
    // One lane, paged newest first within it.
    let one = ui.body("/projects/demo?lane=app", None).await;
    assert_eq!(items(&one), 50);
    assert!(!one.contains("data-freight=\"w0"));
    assert!(
        one.contains("href=\"?before=a10&amp;lane=app\""),
        "the cursor stays in the lane"
    );
    let older = ui.body("/projects/demo?lane=app&before=a10", None).await;
    assert_eq!(items(&older), 10);
    assert!(older.contains("<li data-freight=\"a00\""));
    assert!(!older.contains("data-freight=\"w0"));
}

#[tokio::test]
async fn the_promote_confirmation_shows_what_changes_and_who_you_are() {
    let ui = Ui::new(AuthMode::Token).await;
    ui.add_freight("f1", "first", "1.0.0").await;
    ui.add_freight("f2", "second", "2.0.0").await;
    ui.set_stage_status(
        "dev",
        json!({"currentFreight": {"name": "f1", "alias": "first"},
               "hold": {"by": "ann", "freight": "f1", "reason": "rolled back"}}),
    )
    .await;
    let cookie = ui.login(&ui.admin).await;
    let confirm = ui
        .get(
            "/projects/demo/stages/dev/confirm?action=promote&freight=f2",
            Some(&cookie),
        )
        .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    let body = confirm.body;
    assert!(body.contains("Promote second to dev"));
    assert!(body.contains("1.0.0@sha256:100100100"), "{body}");
    assert!(body.contains("2.0.0@sha256:200200200"), "{body}");
    assert!(body.contains("config for 1.0") && body.contains("config for 2.0"));
    assert!(body.contains("href=\"http://127.0.0.1:9/config/commit/200"));
    assert!(body.contains("available to dev"));
    assert!(body.contains("promotion window open"));
    assert!(body.contains("held by ann (rolled back)"));
    assert!(body.contains("you are <strong>admin</strong>"));
    assert!(body.contains("data-url=\"/api/v1/projects/demo/stages/dev/promote\""));
    assert!(body.contains("data-body=\"{&quot;freight&quot;:&quot;f2&quot;}\""));
    // Gates that refuse are listed too.
    let staging = ui
        .body(
            "/projects/demo/stages/staging/confirm?action=promote&freight=f2",
            Some(&cookie),
        )
        .await;
    assert!(staging.contains("not verified in <code>dev</code>"));
    // A red gate disables Confirm, and what would unblock it is offered to the admin.
    assert!(
        staging.contains(
            "data-refused=\"a gate refuses `second` into `staging`: see the gates above\""
        ),
        "{staging}"
    );
    assert!(staging.contains("What would unblock it"), "{staging}");
    assert!(
        tag_with(
            &staging,
            &["data-action=\"approve\"", "data-stage=\"staging\""]
        )
        .is_some(),
        "{staging}"
    );
    // An open gate does not.
    assert!(!body.contains("data-refused"), "{body}");
    assert!(!body.contains("What would unblock it"), "{body}");
    // The page shows the hold and offers to lift it.
    let page = ui.body("/projects/demo", Some(&cookie)).await;
    assert!(tag_with(&page, &["data-action=\"lift-hold\"", "data-stage=\"dev\""]).is_some());
    assert!(
        tag_with(
            &page,
            &["data-action=\"lift-hold\"", "data-stage=\"staging\""]
        )
        .is_none()
    );
}

#[tokio::test]
async fn a_failed_promotion_shows_the_step_and_its_reason() {
    let ui = Ui::new(AuthMode::None).await;
    ui.store()
        .create(json!({
            "apiVersion": "dray.dev/v1alpha1",
            "kind": "Promotion",
            "metadata": {"name": "dev-first-1", "namespace": "demo",
                         "annotations": {"dray.dev/actor": "ann"}},
            "spec": {"stage": "dev", "freight": "f1",
                     "steps": [{"uses": "git-clone", "as": "clone"}, {"uses": "git-push", "as": "push"}]}
        }))
        .await
        .unwrap();
    let key = ObjectKey::namespaced(Kind::Promotion, "demo", "dev-first-1");
    ui.store()
        .update_status(
            &key,
            json!({"phase": "Failed", "message": "step `push` failed: rejected",
                   "stepExecutionMetadata": [
                       {"alias": "clone", "status": "Succeeded", "attempts": 1},
                       {"alias": "push", "status": "Failed", "attempts": 3, "message": "remote rejected the push",
                        "log": ["13:50:01 pushing to <stage/dev>", "13:50:02 rejected: non-fast-forward"]}],
                   "state": {"outputs": {
                       "open": {"pr": {"url": "https://forge.example/pr/9"}},
                       "push": {"repoURL": "http://127.0.0.1:9/config.git", "branch": "stage/dev", "commit": "abcdef0123456789"}}}}),
            None,
        )
        .await
        .unwrap();
    let view = ui
        .body("/projects/demo/promotions/dev-first-1/view", None)
        .await;
    assert!(
        view.contains("id=\"promotion\" data-phase=\"Failed\""),
        "{view}"
    );
    assert!(view.contains("step <strong>push</strong> failed: remote rejected the push"));
    assert!(view.contains("data-step=\"clone\" data-status=\"Succeeded\""));
    assert!(view.contains("3 attempts"));
    // The failed step's log is open and escaped.
    assert!(view.contains("<details class=\"step-log\" open>"), "{view}");
    assert!(
        view.contains("13:50:01 pushing to &lt;stage/dev&gt;\n13:50:02 rejected"),
        "{view}"
    );
    assert!(view.contains("href=\"https://forge.example/pr/9\""));
    assert!(view.contains("data-commit=\"abcdef0123456789\""), "{view}");
    assert!(view.contains("href=\"http://127.0.0.1:9/config/commit/abcdef0123456789\""));
    let stage = ui.body("/projects/demo/stages/dev", None).await;
    let row = stage
        .split("data-promotion=\"dev-first-1\"")
        .nth(1)
        .unwrap();
    assert!(row.contains(">ann<") && row.contains(">Failed<"), "{row}");
    assert!(row.contains("step push: remote rejected the push"));
    // No git mirrors in this server: the audit section says so instead of failing.
    assert!(stage.contains("id=\"audit\""));
}

#[tokio::test]
async fn the_event_stream_announces_changes_in_its_project() {
    let ui = Ui::new(AuthMode::None).await;
    let response = router(ui.state.clone(), super::router())
        .oneshot(
            Request::get("/ui/events?project=demo")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body().into_data_stream();
    // A write elsewhere is not announced; one in `demo` is.
    ui.store()
        .create(json!({"apiVersion": "dray.dev/v1alpha1", "kind": "Project", "metadata": {"name": "other"}}))
        .await
        .unwrap();
    ui.add_freight("f1", "first", "1.0.0").await;
    let latest = ui.store().changes().latest();
    let read = async {
        use futures::StreamExt;
        let mut seen = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("event: change") && seen.contains("\n\n") {
                return seen;
            }
        }
        seen
    };
    let seen = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an event within 10s");
    assert!(seen.contains("event: change"), "{seen}");
    assert!(seen.contains(&format!("data: {latest}")), "{seen}");
}

#[tokio::test]
async fn assets_are_embedded_and_the_index_goes_to_the_only_project() {
    let ui = Ui::new(AuthMode::None).await;
    let js = ui.get("/ui/assets/app.js", None).await;
    assert_eq!(js.status, StatusCode::OK);
    assert!(js.body.contains("X-CSRF-Token"));
    assert!(!js.body.contains("http://") && !js.body.contains("https://"));
    let css = ui.get("/ui/assets/app.css", None).await;
    assert!(!css.body.contains("@import") && !css.body.contains("url("));
    let index = ui.get("/", None).await;
    assert_eq!(index.status, StatusCode::SEE_OTHER);
    assert_eq!(index.headers[LOCATION], "/projects/demo");
    // The API's 404 for unknown paths is unchanged.
    let unknown = ui.get("/nope", None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.body.contains("no route"));
}

#[tokio::test]
#[ignore = "slow in debug builds: run with --ignored; prints the page's server time"]
async fn the_project_page_at_scale_reads_one_page_of_freight() {
    use crate::store::Write;
    let ui = Ui::new(AuthMode::None).await;
    let mut writes = Vec::new();
    for i in 0..1000 {
        let upstream = if i == 0 {
            "dev".to_owned()
        } else {
            format!("s{:04}", (i - 1) / 3)
        };
        writes.push(Write::Create(json!({
            "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
            "metadata": {"name": format!("s{i:04}"), "namespace": "demo"},
            "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                     "sources": {"stages": [upstream]}}]}
        })));
    }
    ui.store().commit(writes).await.unwrap();
    let writes: Vec<Write> = (0..10_000)
        .map(|i| Write::Create(freight(&format!("f{i:05}"), &format!("a{i:05}"), "1.0.0")))
        .collect();
    ui.store().commit(writes).await.unwrap();
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let page = ui.get("/projects/demo", None).await;
        eprintln!(
            "project page: {:?}, {} bytes",
            started.elapsed(),
            page.body.len()
        );
        assert_eq!(page.status, StatusCode::OK);
        assert_eq!(page.body.matches("<li data-freight=").count(), 50);
        // 1,003 Stages: the graph collapses by depth to at most GRAPH_LIMIT cards.
        let cards = page.body.matches("class=\"node stage\"").count();
        assert!((1..=120).contains(&cards), "{cards} Stage cards");
        assert!(page.body.contains("of 1003 Stages"), "the rest is counted");
        assert!(
            page.body.contains("<li data-freight=\"f09999\""),
            "the newest first"
        );
        assert!(
            page.body
                .contains("src=\"/projects/demo/minimap.svg\" loading=\"lazy\""),
            "the overview is loaded apart from the page"
        );
    }
    // Columns taller than the overview draws are cut and counted.
    let map = ui.body("/projects/demo/minimap.svg", None).await;
    let cut: usize = map
        .split(">+")
        .skip(1)
        .filter_map(|t| t.split('<').next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(
        map.matches("data-stage=").count() + cut,
        1003,
        "every Stage, drawn or counted"
    );
}

#[tokio::test]
async fn the_overview_minimap_draws_every_stage_coloured_by_health() {
    use crate::store::Write;
    let ui = Ui::new(AuthMode::None).await;
    let writes = (0..150)
        .map(|i| {
            let upstream = if i == 0 {
                "dev".to_owned()
            } else {
                format!("s{:03}", (i - 1) / 2)
            };
            Write::Create(json!({
                "apiVersion": "dray.dev/v1alpha1", "kind": "Stage",
                "metadata": {"name": format!("s{i:03}"), "namespace": "demo"},
                "spec": {"requestedFreight": [{"origin": {"kind": "Warehouse", "name": "app"},
                         "sources": {"stages": [upstream]}}]}
            }))
        })
        .collect();
    ui.store().commit(writes).await.unwrap();
    ui.set_stage_status("s001", json!({"health": {"status": "Healthy"}}))
        .await;
    ui.set_stage_status(
        "s002",
        json!({"health": {"status": "Unhealthy", "message": "x"}}),
    )
    .await;
    let page = ui.body("/projects/demo", None).await;
    assert!(
        page.contains("src=\"/projects/demo/minimap.svg\" loading=\"lazy\""),
        "the overview is loaded apart from the page"
    );
    assert!(!page.contains("<svg xmlns"), "and not inlined into it");
    let map = ui.get("/projects/demo/minimap.svg", None).await;
    assert_eq!(map.status, StatusCode::OK);
    assert_eq!(
        map.headers.get(axum::http::header::CONTENT_TYPE).unwrap(),
        "image/svg+xml; charset=utf-8"
    );
    // The fixture's 3 Stages and these 150, one mark each.
    assert_eq!(map.body.matches("data-stage=").count(), 153, "every Stage");
    assert!(
        map.body.contains("fill=\"#1a7f37\" data-stage=\"s001\""),
        "healthy is green"
    );
    assert!(
        map.body.contains("fill=\"#cf222e\" data-stage=\"s002\""),
        "unhealthy is red"
    );
    assert!(
        map.body
            .contains("<title>Pipeline of demo: 1 Warehouses, 153 Stages</title>")
    );
    // Marks do not overlap: each (x, y) once.
    let mut places: Vec<(String, String)> = map
        .body
        .split("<rect ")
        .skip(1)
        .map(|r| {
            let attr = |name: &str| {
                r.split(&format!("{name}=\""))
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_owned()
            };
            (attr("x"), attr("y"))
        })
        .collect();
    let all = places.len();
    places.sort();
    places.dedup();
    assert_eq!(places.len(), all, "two marks share a place");
    // A small project has no overview.
    let small = Ui::new(AuthMode::None).await;
    assert!(
        !small
            .body("/projects/demo", None)
            .await
            .contains("minimap.svg")
    );
}

#[tokio::test]
async fn a_closed_window_shows_as_frozen_and_the_confirmation_offers_an_override() {
    let ui = Ui::new(AuthMode::None).await;
    ui.add_freight("f1", "first", "1.0.0").await;
    let start = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
    let freeze = format!(
        "apiVersion: dray.dev/v1alpha1
kind: ProjectConfig
metadata: {{name: demo, namespace: demo}}
spec:
  promotionWindows:
    - name: holiday-freeze
      kind: Deny
      rrule: \"DTSTART:{}\\nRRULE:FREQ=DAILY;COUNT=1\"
      duration: 2h
      stageSelector: {{name: dev}}
",
        start.strftime("%Y%m%dT%H%M%SZ")
    );
    let body = json!({"files": [{"path": "c.yaml", "content": freeze}]});
    let applied = ui
        .send(
            Request::post("/api/v1/apply")
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.body);
    let page = ui.body("/projects/demo", None).await;
    let dev = page
        .split("<tr data-stage=\"dev\"")
        .nth(1)
        .unwrap()
        .split("</tr>")
        .next()
        .unwrap();
    assert!(
        dev.contains("frozen by window <code>holiday-freeze</code> until"),
        "{dev}"
    );
    let staging = page.split("<tr data-stage=\"staging\"").nth(1).unwrap();
    assert!(!staging.split("</tr>").next().unwrap().contains("frozen"));
    let confirm = ui
        .body(
            "/projects/demo/stages/dev/confirm?action=promote&freight=f1",
            None,
        )
        .await;
    assert!(
        confirm.contains("frozen by window <code>holiday-freeze</code> until"),
        "{confirm}"
    );
    assert!(confirm.contains("id=\"confirm-override\""));
    // Someone who may override: Confirm waits for the reason, not refused.
    assert!(confirm.contains("data-required=\"true\""), "{confirm}");
    assert!(!confirm.contains("data-refused"), "{confirm}");
    assert!(confirm.contains("override the closed window"), "{confirm}");
    let open = ui
        .body(
            "/projects/demo/stages/staging/confirm?action=promote&freight=f1",
            None,
        )
        .await;
    assert!(!open.contains("confirm-override"));
}

#[tokio::test]
async fn a_fragment_without_a_session_is_a_401_not_a_login_page() {
    let ui = Ui::new(AuthMode::Token).await;
    let answer = ui
        .send(
            Request::get("/projects/demo/live")
                .header("x-dray-fragment", "1")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    let page = ui.get("/projects/demo/live", None).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn every_action_confirms_with_its_api_call() {
    let ui = Ui::new(AuthMode::None).await;
    ui.add_freight("f1", "first", "1.0.0").await;
    ui.set_stage_status(
        "dev",
        json!({"currentFreight": {"name": "f1", "alias": "first"},
               "currentPromotion": "dev-first-1",
               "hold": {"by": "ann", "freight": "f1", "reason": "rolled back"}}),
    )
    .await;
    let confirm = |action: &'static str| {
        let ui = &ui;
        async move {
            ui.get(
                &format!("/projects/demo/stages/dev/confirm?action={action}&freight=f1"),
                None,
            )
            .await
        }
    };
    let approve = confirm("approve").await.body;
    assert!(approve.contains("data-url=\"/api/v1/projects/demo/stages/dev/approve\""));
    assert!(approve.contains("id=\"confirm-reason\""));
    let abort = confirm("abort").await.body;
    assert!(abort.contains("data-url=\"/api/v1/projects/demo/promotions/dev-first-1/abort\""));
    let verify = confirm("verify").await.body;
    assert!(verify.contains("data-url=\"/api/v1/projects/demo/stages/dev/verify\""));
    assert!(verify.contains("data-body=\"{&quot;abort&quot;:false}\""));
    let lift = confirm("lift-hold").await.body;
    assert!(lift.contains("data-url=\"/api/v1/projects/demo/stages/dev/hold/lift\""));
    assert!(lift.contains("held by <strong>ann</strong>: rolled back"));
    let unknown = confirm("explode").await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert!(unknown.body.contains("unknown action"));
    // The node offers Abort for the running promotion.
    let page = ui.body("/projects/demo", None).await;
    let abort_button = tag_with(&page, &["data-action=\"abort\"", "data-stage=\"dev\""]).unwrap();
    assert!(
        abort_button.contains("data-promotion=\"dev-first-1\""),
        "{abort_button}"
    );
}

/// A Running Promotion of `freight` into `stage` that has pushed `commit` and waits for
/// Argo CD to sync it.
async fn written_to_git_promotion(ui: &Ui, name: &str, stage: &str, freight: &str, commit: &str) {
    ui.store()
        .create(json!({
            "apiVersion": "dray.dev/v1alpha1",
            "kind": "Promotion",
            "metadata": {"name": name, "namespace": "demo",
                         "annotations": {"dray.dev/actor": "ann"}},
            "spec": {"stage": stage, "freight": freight,
                     "steps": [{"uses": "git-push", "as": "push"}, {"uses": "argocd-update", "as": "deploy"}]}
        }))
        .await
        .unwrap();
    let key = ObjectKey::namespaced(Kind::Promotion, "demo", name);
    ui.store()
        .update_status(
            &key,
            json!({"phase": "Running",
                   "message": format!("written to git (`stage/{stage}` at {commit}), waiting for sync: step `deploy` is waiting for Application `shop` to sync"),
                   "writtenToGit": {"repoURL": "http://127.0.0.1:9/config.git", "name": format!("stage/{stage}"), "commit": commit},
                   "stepExecutionMetadata": [
                       {"alias": "push", "status": "Succeeded", "attempts": 1},
                       {"alias": "deploy", "status": "Running", "attempts": 1, "message": "waiting for Application `shop` to sync"}]}),
            None,
        )
        .await
        .unwrap();
}

/// `dev` Unhealthy with a failed verification, `staging` Healthy and measuring, `prod`
/// written to git and waiting for sync; messages carry markup that must stay text.
async fn deploy_and_verify_world(ui: &Ui) {
    ui.add_freight("f1", "first", "1.0.0").await;
    ui.add_freight("f2", "second", "2.0.0").await;
    let apps = json!([{"name": "shop", "apiServer": "http://127.0.0.1:9", "desiredRevisions": ["100000000000000000000000000000000000000"]}]);
    ui.set_stage_status(
        "dev",
        json!({"currentFreight": {"name": "f1", "alias": "first"},
               "branch": {"repoURL": "http://127.0.0.1:9/config.git", "name": "stage/dev", "commit": "100000000000000000000000000000000000000"},
               "applications": apps,
               "health": {"status": "Unhealthy", "message": "shop: <img src=x onerror=alert(1)> CrashLoopBackOff",
                          "applications": [{"name": "shop", "status": "Unhealthy", "argocdHealth": "Degraded",
                                            "syncedRevision": "100000000000000000000000000000000000000",
                                            "message": "<b>0 of 2</b> replicas available"}]},
               "verification": {"id": "v2", "freight": "f1", "phase": "Failed", "actor": "ann",
                                "message": "metric `rate`: failed (2) > failureLimit (1) <i>x</i>",
                                "startTime": "2026-01-01T10:00:00Z", "finishTime": "2026-01-01T10:01:00Z",
                                "metrics": [{"name": "rate", "phase": "Failed", "count": 2, "successful": 0, "failed": 2,
                                             "message": "failed (2) > failureLimit (1)",
                                             "measurements": [
                                                 {"phase": "Failed", "value": "[0.42]", "message": "<u>cond</u> false"},
                                                 {"phase": "Failed", "value": "[0.41]"}]}]},
               "verificationHistory": [
                   {"id": "v2", "freight": "f1", "phase": "Failed", "actor": "ann", "message": "metric `rate`: failed (2) > failureLimit (1) <i>x</i>"},
                   {"id": "v1", "freight": "f1", "phase": "Successful", "actor": "dray", "message": "all 1 metrics successful",
                    "metrics": [{"name": "rate", "phase": "Successful", "count": 2, "successful": 2}]}]}),
    )
    .await;
    ui.set_stage_status(
        "staging",
        json!({"currentFreight": {"name": "f1", "alias": "first"},
               "applications": apps,
               "health": {"status": "Healthy", "message": "all 1 Applications Healthy"},
               "verification": {"id": "v3", "freight": "f1", "phase": "Running", "actor": "dray",
                                "message": "analysis running",
                                "metrics": [{"name": "rate", "phase": "Running", "count": 3, "successful": 2, "failed": 1}]}}),
    )
    .await;
    written_to_git_promotion(
        ui,
        "prod-second-1",
        "prod",
        "f2",
        "abcdef0123456789abcdef0123456789abcdef01",
    )
    .await;
    ui.set_stage_status(
        "prod",
        json!({"currentPromotion": "prod-second-1",
               "health": {"status": "Progressing", "message": "shop: not synced to abcdef0 yet"}}),
    )
    .await;
}

/// The element (its opening tag up to the next node) of the first tag matching `needles`.
fn node_of<'a>(page: &'a str, stage: &str) -> &'a str {
    let start = page
        .find(&format!("class=\"node stage\" data-stage=\"{stage}\""))
        .unwrap_or_else(|| panic!("no node for {stage}"));
    let rest = &page[start..];
    let end = rest[1..]
        .find("class=\"node ")
        .map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

#[tokio::test]
async fn stage_nodes_show_health_verification_and_written_to_git_escaped() {
    let ui = Ui::new(AuthMode::None).await;
    deploy_and_verify_world(&ui).await;
    let page = ui.get("/projects/demo", None).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    assert!(!body.contains("<img src=x"), "unescaped health message");
    assert!(!body.contains("<i>x</i>"), "unescaped verification message");

    // What the script re-stacks the graph with: each node's place, each edge's ends.
    let graph = tag_with(body, &["class=\"graph\""]).expect("the graph");
    assert!(
        graph.contains("data-margin=\"16\" data-gap=\"20\""),
        "{graph}"
    );
    assert!(
        tag_with(
            body,
            &[
                "data-warehouse=\"app\"",
                "data-layer=\"0\"",
                "data-row=\"0\""
            ]
        )
        .is_some()
    );
    assert!(tag_with(body, &["path d=", "data-from=\"0\"", "data-to="]).is_some());

    let dev = node_of(body, "dev");
    let health = tag_with(dev, &["data-health=\"Unhealthy\""]).expect("dev's health");
    assert!(
        health.contains("class=\"state health unhealthy\""),
        "{health}"
    );
    assert!(
        health.contains("title=\"shop: &lt;img src=x onerror=alert(1)&gt; CrashLoopBackOff\""),
        "{health}"
    );
    // Unhealthy: Argo CD's message is on the node, not only in the title.
    assert!(dev.contains(
        "<div class=\"detail\">shop: &lt;img src=x onerror=alert(1)&gt; CrashLoopBackOff</div>"
    ));
    let verification = tag_with(dev, &["data-phase=\"Failed\""]).expect("dev's verification");
    assert!(
        verification.contains("state verification failed"),
        "{verification}"
    );
    assert!(dev.contains("verification: Failed"));
    assert!(dev.contains(
        "<div class=\"detail\">metric <code>rate</code>: failed (2) &gt; failureLimit (1) &lt;i&gt;x&lt;/i&gt;</div>"
    ));
    // Ended: Verify again, no Stop.
    assert!(tag_with(dev, &["data-action=\"verify\""]).is_some());
    assert!(tag_with(dev, &["data-action=\"abort-verification\""]).is_none());
    assert!(!dev.contains("written-to-git"));

    let staging = node_of(body, "staging");
    assert!(
        tag_with(staging, &["data-health=\"Healthy\""]).is_some(),
        "{staging}"
    );
    // Healthy: the message stays in the title.
    assert!(!staging.contains("<div class=\"detail\">all 1 Applications Healthy"));
    assert!(
        tag_with(staging, &["data-phase=\"Running\""]).is_some(),
        "{staging}"
    );
    assert!(staging.contains("verifying: 2/3 successful"), "{staging}");
    let stop = tag_with(
        staging,
        &[
            "data-action=\"abort-verification\"",
            "data-stage=\"staging\"",
        ],
    )
    .expect("Stop verification while it runs");
    assert!(!stop.contains("disabled"), "{stop}");
    assert!(staging.contains(">Stop verification<"));

    let prod = node_of(body, "prod");
    assert!(
        tag_with(prod, &["data-health=\"Progressing\""]).is_some(),
        "{prod}"
    );
    let written = tag_with(prod, &["class=\"state written-to-git\""]).expect("written to git");
    assert!(written.contains("waiting for sync"), "{written}");
    assert!(prod.contains("written to git, waiting for sync"), "{prod}");
    assert!(prod.contains(
        "href=\"http://127.0.0.1:9/config/commit/abcdef0123456789abcdef0123456789abcdef01\""
    ));
    // Not a failure: nothing on the node is in the failed or unhealthy style.
    assert!(
        !prod.contains("failed") && !prod.contains("unhealthy"),
        "{prod}"
    );
    // A Stage that judges no health shows no health at all.
    ui.set_stage_status("prod", json!({})).await;
    let body = ui.body("/projects/demo", None).await;
    assert!(!node_of(&body, "prod").contains("data-health"));
}

#[tokio::test]
async fn a_viewer_sees_verify_and_stop_verification_disabled_with_the_reason() {
    let ui = Ui::new(AuthMode::Token).await;
    deploy_and_verify_world(&ui).await;
    let viewer = ui.login(VIEWER_TOKEN).await;
    let page = ui.body("/projects/demo", Some(&viewer)).await;
    let staging = node_of(&page, "staging");
    let why = "user `vic` may not verify stages/staging";
    for action in ["verify", "abort-verification"] {
        let button = tag_with(
            staging,
            &[
                &format!("data-action=\"{action}\""),
                "data-stage=\"staging\"",
            ],
        )
        .unwrap_or_else(|| panic!("a {action} button"));
        assert!(button.contains("disabled"), "{button}");
        assert!(button.contains(&format!("title=\"{why}\"")), "{button}");
    }
    // The reason is said once under the buttons, not once per button.
    let shown = why.replace("`vic`", "<code>vic</code>");
    assert_eq!(
        staging.matches(&format!(">{shown}<")).count(),
        1,
        "{staging}"
    );
    let confirm = ui
        .get(
            "/projects/demo/stages/staging/confirm?action=abort-verification",
            Some(&viewer),
        )
        .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    assert!(confirm.body.contains(&format!("data-refused=\"{why}\"")));
    // And the API agrees.
    let refused = ui
        .post_json(
            "/api/v1/projects/demo/stages/staging/verify",
            &viewer,
            Some(&csrf_of(&page)),
            json!({"abort": true}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let admin = ui.login(&ui.admin).await;
    let page = ui.body("/projects/demo", Some(&admin)).await;
    let staging = node_of(&page, "staging");
    for action in ["verify", "abort-verification"] {
        let button = tag_with(staging, &[&format!("data-action=\"{action}\"")]).unwrap();
        assert!(!button.contains("disabled"), "{button}");
    }
    let confirm = ui
        .body(
            "/projects/demo/stages/staging/confirm?action=abort-verification",
            Some(&admin),
        )
        .await;
    assert!(confirm.contains("data-url=\"/api/v1/projects/demo/stages/staging/verify\""));
    assert!(
        confirm.contains("data-body=\"{&quot;abort&quot;:true}\""),
        "{confirm}"
    );
    assert!(!confirm.contains("data-refused"));
    // Nothing to stop once it ended.
    let ended = ui
        .get(
            "/projects/demo/stages/dev/confirm?action=abort-verification",
            Some(&admin),
        )
        .await;
    assert_eq!(ended.status, StatusCode::CONFLICT, "{}", ended.body);
    assert!(ended.body.contains("no verification waiting or running"));
}

#[tokio::test]
async fn the_stage_page_shows_health_and_each_verification_with_aliases() {
    let ui = Ui::new(AuthMode::None).await;
    deploy_and_verify_world(&ui).await;
    let page = ui.get("/projects/demo/stages/dev", None).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    assert!(
        !body.contains("<img src=x") && !body.contains("<b>0 of 2") && !body.contains("<u>cond")
    );
    let health = body
        .split("id=\"health\"")
        .nth(1)
        .expect("a Health section");
    let app = health
        .split("data-application=\"shop\"")
        .nth(1)
        .expect("the Application");
    let app = app.split("</tr>").next().unwrap();
    assert!(app.contains(">Degraded<"), "{app}");
    assert!(
        app.contains(
            "href=\"http://127.0.0.1:9/config/commit/100000000000000000000000000000000000000\""
        ),
        "{app}"
    );
    assert!(app.contains("<code>1000000</code>"), "{app}");
    assert!(
        app.contains("&lt;b&gt;0 of 2&lt;/b&gt; replicas available"),
        "{app}"
    );

    let verifications = body.split("id=\"verifications\"").nth(1).unwrap();
    let failed = verifications
        .split("data-verification=\"v2\"")
        .nth(1)
        .unwrap()
        .split("</tr>")
        .next()
        .unwrap();
    assert!(
        failed.contains("<strong class=\"alias\">first</strong>"),
        "{failed}"
    );
    assert!(failed.contains(">Failed<") && failed.contains(">ann<"));
    assert!(
        failed.contains("2026-01-01 10:00:00 UTC") && failed.contains("2026-01-01 10:01:00 UTC")
    );
    assert!(failed.contains("0/2/0/0"), "{failed}");
    assert!(failed.contains("failed (2) &gt; failureLimit (1)"));
    // The newest measurement first, with value, phase and message.
    let newest = failed.find("[0.41]").expect("the newest measurement");
    let older = failed.find("[0.42]").expect("an older measurement");
    assert!(newest < older, "{failed}");
    assert!(failed.contains("&lt;u&gt;cond&lt;/u&gt; false"));
    // The current run is not listed twice; the older one follows.
    assert_eq!(verifications.matches("data-verification=\"v2\"").count(), 1);
    let ok = verifications
        .split("data-verification=\"v1\"")
        .nth(1)
        .unwrap()
        .split("</tr>")
        .next()
        .unwrap();
    assert!(
        ok.contains(">Successful<") && ok.contains("2/0/0/0"),
        "{ok}"
    );

    // The promotion history names Freight by alias.
    let prod = ui.body("/projects/demo/stages/prod", None).await;
    let row = prod
        .split("data-promotion=\"prod-second-1\"")
        .nth(1)
        .unwrap();
    assert!(
        row.contains("<strong class=\"alias\">second</strong>"),
        "{row}"
    );
    // So does the Promotion view, which says it is written to git.
    let view = ui
        .body("/projects/demo/promotions/prod-second-1/view", None)
        .await;
    assert!(
        view.contains("<strong class=\"alias\" title=\"f2\">second</strong>"),
        "{view}"
    );
    assert!(view.contains("data-commit=\"abcdef0123456789abcdef0123456789abcdef01\""));
}

#[tokio::test]
async fn a_missing_promotion_or_stage_is_a_404_that_says_where_to_look() {
    let ui = Ui::new(AuthMode::None).await;
    let answer = ui.get("/projects/demo/promotions/nope", None).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    assert!(
        answer
            .body
            .contains("Promotion `nope` does not exist in project `demo`"),
        "{}",
        answer.body
    );
    assert!(
        answer.body.contains("open /projects/demo and a Stage"),
        "{}",
        answer.body
    );
    let answer = ui.get("/projects/demo/stages/nope", None).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    assert!(
        answer
            .body
            .contains("open /projects/demo to see its Stages"),
        "{}",
        answer.body
    );
}

/// Stage `staging` of [`Ui::new`]'s project asks for `required` sign-offs.
async fn ask_for_signoffs(ui: &Ui, required: u32) {
    let key = ObjectKey::namespaced(Kind::Stage, "demo", "staging");
    let current = ui.store().get(&key).await.unwrap().unwrap();
    let mut object = crate::store::desired_state(&current.object);
    object["metadata"]["resourceVersion"] = json!(current.resource_version.to_string());
    object["spec"]["signoff"] = json!({"required": required});
    ui.store().update(object).await.unwrap();
}

#[tokio::test]
async fn sign_off_is_offered_where_asked_refused_to_a_viewer_and_lists_who_signed() {
    let ui = Ui::new(AuthMode::Token).await;
    ui.add_freight("f1", "first", "1.0.0").await;
    ask_for_signoffs(&ui, 2).await;
    let viewer = ui.login(VIEWER_TOKEN).await;
    let page = ui.body("/projects/demo", Some(&viewer)).await;
    let button = tag_with(
        &page,
        &["data-action=\"signoff\"", "data-stage=\"staging\""],
    )
    .expect("a Sign off button for staging");
    assert!(button.contains("disabled"), "{button}");
    assert!(
        button.contains("title=\"user `vic` may not signoff stages/staging\""),
        "{button}"
    );
    assert!(
        tag_with(&page, &["data-action=\"signoff\"", "data-stage=\"dev\""]).is_none(),
        "dev asks for no sign-offs"
    );
    let confirm = ui
        .get(
            "/projects/demo/stages/staging/confirm?action=signoff&freight=f1",
            Some(&viewer),
        )
        .await;
    assert!(
        confirm
            .body
            .contains("data-refused=\"user `vic` may not signoff stages/staging\""),
        "{}",
        confirm.body
    );
    // The API refuses the viewer too, and stores nothing.
    let signoffs = "/api/v1/projects/demo/stages/staging/signoffs";
    let csrf = csrf_of(&page);
    let refused = ui
        .post_json(signoffs, &viewer, Some(&csrf), json!({"freight": "f1"}))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused.body.contains("may not signoff stages/staging"),
        "{}",
        refused.body
    );
    let key = ObjectKey::namespaced(Kind::Freight, "demo", "f1");
    let stored = ui.store().get(&key).await.unwrap().unwrap();
    assert!(stored.object.pointer("/status/signedOffFor").is_none());

    let admin = ui.login(&ui.admin).await;
    let page = ui.body("/projects/demo", Some(&admin)).await;
    let button = tag_with(
        &page,
        &["data-action=\"signoff\"", "data-stage=\"staging\""],
    )
    .unwrap();
    assert!(!button.contains("disabled"), "{button}");
    // The promote dialog's red sign-off gate offers the admin, who has not signed, a Sign off.
    let promote = ui
        .body(
            "/projects/demo/stages/staging/confirm?action=promote&freight=f1",
            Some(&admin),
        )
        .await;
    assert!(promote.contains("What would unblock it"), "{promote}");
    assert!(
        tag_with(
            &promote,
            &["data-action=\"signoff\"", "data-stage=\"staging\""]
        )
        .is_some(),
        "{promote}"
    );
    let csrf = csrf_of(&page);
    let signed = ui
        .post_json(
            signoffs,
            &admin,
            Some(&csrf),
            json!({"freight": "f1", "reason": "lgtm"}),
        )
        .await;
    assert_eq!(signed.status, StatusCode::OK, "{}", signed.body);
    let confirm = ui
        .body(
            "/projects/demo/stages/staging/confirm?action=signoff&freight=f1",
            Some(&admin),
        )
        .await;
    assert!(
        confirm.contains("data-url=\"/api/v1/projects/demo/stages/staging/signoffs\""),
        "{confirm}"
    );
    assert!(
        confirm.contains("sign-offs: 1 of 2; the promoter's own does not count, signed off by <span class=\"signer\">admin</span> (lgtm)"),
        "{confirm}"
    );
    let promote = ui
        .body(
            "/projects/demo/stages/staging/confirm?action=promote&freight=f1",
            Some(&admin),
        )
        .await;
    assert!(
        promote.contains("needs sign-offs from 2 people, has 1 (<code>admin</code>)"),
        "{promote}"
    );
    // Once signed, the admin is not offered a second sign-off, only told who else must.
    assert!(
        tag_with(
            &promote,
            &["data-action=\"signoff\"", "data-stage=\"staging\""]
        )
        .is_none(),
        "{promote}"
    );
    assert!(
        promote.contains("more sign-offs for <code>staging</code>"),
        "{promote}"
    );
}

#[tokio::test]
async fn the_project_page_shows_how_notifications_went() {
    let ui = Ui::new(AuthMode::None).await;
    let page = ui.get("/projects/demo", None).await;
    assert!(
        !page.body.contains("id=\"deliveries\""),
        "no notifications, no section"
    );
    ui.store()
        .create(
            json!({"apiVersion": "dray.dev/v1alpha1", "kind": "ProjectConfig",
            "metadata": {"name": "demo", "namespace": "demo"},
            "spec": {"notifications": [{"name": "chat", "slack": {"urlSecretRef": "s"},
                                         "events": ["PromotionFailed"]}]}}),
        )
        .await
        .unwrap();
    let key = ObjectKey::namespaced(Kind::ProjectConfig, "demo", "demo");
    ui.store()
        .update_status(
            &key,
            json!({"notifications": [{"name": "chat", "failures": 2,
                   "lastError": "PromotionFailed for `f1` in `prod`: gave up after 5 attempts: the Slack webhook answered 404"}]}),
            None,
        )
        .await
        .unwrap();
    let page = ui.get("/projects/demo", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("<h2>Notifications</h2>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("data-notification=\"chat\""));
    assert!(page.body.contains("the Slack webhook answered 404"));
    assert!(
        page.body.contains("<td>never</td><td>2</td>"),
        "{}",
        page.body
    );
}
