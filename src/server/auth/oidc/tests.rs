//! Tests of OIDC login without a provider: cookies, settings, the user and groups from
//! claims, and an unreachable provider. The routes are tested with the UI's pages
//! (`src/ui/oidc_pages.rs`), and against a real provider in `e2e/tests/oidc.rs`.

use std::time::Duration;

use serde_json::Value;

use super::claims::user_and_groups;
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

#[test]
fn the_state_cookie_is_lax_http_only_short_and_scoped_to_auth() {
    let cookie = state_cookie("abc", true);
    for part in [
        "dray_oidc_state=abc",
        "HttpOnly",
        "SameSite=Lax",
        "Path=/auth",
        "Max-Age=600",
        "Secure",
    ] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!state_cookie("abc", false).contains("Secure"));
    let cleared = clear_state_cookie(false);
    assert!(cleared.contains("Max-Age=0") && cleared.starts_with("dray_oidc_state=;"));
}

#[test]
fn the_secret_is_not_in_debug_output() {
    let text = format!("{:?}", options());
    assert!(!text.contains("s3cret-value"), "{text}");
    assert!(text.contains("<redacted>"));
}

#[test]
fn bad_urls_are_refused_naming_the_flag() {
    let mut bad = options();
    bad.redirect_url = "https://dray.example.com/".into();
    let error = Oidc::new(bad).unwrap_err().to_string();
    assert!(
        error.contains("--oidc-redirect-url") && error.contains("/auth/callback"),
        "{error}"
    );
    let mut bad = options();
    bad.issuer = "not a url".into();
    let error = Oidc::new(bad).unwrap_err().to_string();
    assert!(error.contains("--oidc-issuer"), "{error}");
    let oidc = Oidc::new(options()).unwrap();
    assert_eq!(oidc.issuer_host(), "login.example.com");
}

#[test]
fn an_email_names_the_user_only_when_it_is_verified() {
    let ttl = Duration::from_secs(60);
    let user = |claims: Value| user_and_groups(&claims, &options(), ttl).unwrap().user;
    let cases = [
        ("verified", serde_json::json!(true), "ann@example.com"),
        ("unverified", serde_json::json!(false), "oidc:u-1"),
        (
            "verified as a string",
            serde_json::json!("true"),
            "oidc:u-1",
        ),
        ("verified as a number", serde_json::json!(1), "oidc:u-1"),
        ("null", Value::Null, "oidc:u-1"),
    ];
    for (case, verified, expected) in cases {
        let claims = serde_json::json!({"sub": "u-1", "email": "ann@example.com", "email_verified": verified});
        assert_eq!(user(claims), expected, "email_verified {case}");
    }
    let absent = serde_json::json!({"sub": "u-1", "email": "ann@example.com"});
    assert_eq!(user(absent), "oidc:u-1", "email_verified absent");
    // A prefix that is set applies to the fallback too, as to any name.
    let mut prefixed = options();
    prefixed.username_prefix = Some("corp/".into());
    let claims = serde_json::json!({"sub": "u-1", "email": "ann@example.com"});
    assert_eq!(
        user_and_groups(&claims, &prefixed, ttl).unwrap().user,
        "corp/u-1"
    );
    // `email_verified` is about `email` only: another username claim ignores it.
    let mut by_username = options();
    by_username.username_claim = "preferred_username".into();
    let claims =
        serde_json::json!({"sub": "u-1", "preferred_username": "ann", "email_verified": false});
    assert_eq!(
        user_and_groups(&claims, &by_username, ttl).unwrap().user,
        "oidc:ann"
    );
}

#[test]
fn user_comes_from_the_claim_then_sub_and_groups_from_a_list_or_string() {
    let ttl = Duration::from_secs(60);
    let claims = serde_json::json!({"sub": "u-1", "email": "ann@example.com",
        "email_verified": true, "groups": ["a", "b", 3]});
    let who = user_and_groups(&claims, &options(), ttl).unwrap();
    assert_eq!(who.user, "ann@example.com");
    assert_eq!(who.groups, vec!["a".to_owned(), "b".to_owned()]);
    let claims = serde_json::json!({"sub": "u-2", "groups": "ops"});
    let who = user_and_groups(&claims, &options(), ttl).unwrap();
    assert_eq!(
        (who.user.as_str(), who.groups),
        ("oidc:u-2", vec!["ops".to_owned()])
    );
    let claims =
        serde_json::json!({"sub": "u-3", "email": "x@example.com", "email_verified": false});
    assert_eq!(
        user_and_groups(&claims, &options(), ttl).unwrap().user,
        "oidc:u-3"
    );
    let error = user_and_groups(&serde_json::json!({}), &options(), ttl).unwrap_err();
    assert!(
        error.to_string().contains("--oidc-username-claim"),
        "{error}"
    );
}

#[test]
fn a_name_not_from_email_is_prefixed_so_it_cannot_be_a_token_users() {
    let ttl = Duration::from_secs(60);
    let mut by_username = options();
    by_username.username_claim = "preferred_username".into();
    let claims = serde_json::json!({"sub": "u-9", "preferred_username": "admin"});
    let who = user_and_groups(&claims, &by_username, ttl).unwrap();
    assert_eq!(who.user, "oidc:admin");
    by_username.username_prefix = Some("corp/".into());
    assert_eq!(
        user_and_groups(&claims, &by_username, ttl).unwrap().user,
        "corp/admin"
    );
    by_username.username_prefix = Some(String::new());
    assert_eq!(
        user_and_groups(&claims, &by_username, ttl).unwrap().user,
        "admin"
    );
    let mut by_email = options();
    by_email.username_prefix = Some("corp/".into());
    let claims =
        serde_json::json!({"sub": "u-1", "email": "ann@example.com", "email_verified": true});
    assert_eq!(
        user_and_groups(&claims, &by_email, ttl).unwrap().user,
        "corp/ann@example.com"
    );
}

#[tokio::test]
async fn an_unreachable_provider_is_reported_and_a_callback_without_attempt_is_refused() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut opts = options();
    opts.issuer = format!("http://127.0.0.1:{port}");
    let oidc = Oidc::new(opts).unwrap();
    assert!(oidc.unavailable().is_none());
    assert!(oidc.discover().await.is_err());
    assert!(oidc.unavailable().is_some());
    let error = oidc.begin().await.unwrap_err();
    assert!(
        matches!(error, OidcLoginError::Unavailable { .. }),
        "{error}"
    );
    let query = CallbackQuery {
        code: Some("c".into()),
        state: Some("s".into()),
        ..Default::default()
    };
    let error = oidc.finish(None, query).await.unwrap_err();
    assert!(matches!(error, OidcLoginError::NoAttempt), "{error}");
    let query = CallbackQuery {
        code: Some("c".into()),
        state: Some("s".into()),
        ..Default::default()
    };
    let error = oidc.finish(Some("unknown"), query).await.unwrap_err();
    assert!(matches!(error, OidcLoginError::Expired), "{error}");
    let query = CallbackQuery {
        error: Some("access_denied".into()),
        error_description: Some("the user said no\u{7}".into()),
        ..Default::default()
    };
    let error = oidc.finish(None, query).await.unwrap_err().to_string();
    assert!(
        error.contains("access_denied: the user said no;"),
        "{error}"
    );
}
