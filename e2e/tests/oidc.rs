//! OIDC login for the web UI against a real OpenID provider (`oidc-provider-mock`: real
//! discovery, JWKS, RS256 ID tokens, authorization code flow), with real git, registry and
//! kustomize behind the quickstart pipeline:
//!
//! - HTTP level (reqwest, redirects followed by hand so every hop is checked): a user in
//!   group `release-managers` logs in through the provider's form, lands on the project
//!   page as themself, and — through a project RoleBinding for that Group — promotes with
//!   the UI's JSON call and CSRF token; a user without the group sees Promote disabled and
//!   is refused by the API.
//! - A tampered `state` is refused, and the attempt cannot be replayed afterwards.
//! - The provider's "Deny" comes back as `error=access_denied` and the page says so; an
//!   unreachable provider does not stop `dray serve`, and the login page says why.
//! - In Chromium: click `#oidc-login`, fill the provider's form, see the project page.
//! - ID tokens that must not verify are refused, each naming what is wrong, with no
//!   session: really signed by the provider but expired, for another audience, from
//!   another issuer or for another nonce (users whose claims say so), and, through
//!   [`TamperingProxy`] in front of the provider's token endpoint, one altered after
//!   signing and one unsigned (`alg: none`).
//! - An email that is not verified does not name the user: `sub` does, as `oidc:<sub>`.

use std::collections::BTreeMap;
use std::process::Output;

use anyhow::{Context, Result, bail, ensure};
use dray_e2e::browser::Browser;
use dray_e2e::oidc_provider::tamper::{Tampering, TamperingProxy};
use dray_e2e::oidc_provider::{OidcProvider, OidcUser};
use dray_e2e::{
    Dray, DrayOptions, GitRepo, GitServer, Registry, TestWorld, free_port, workspace_root,
};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

const CLIENT_ID: &str = "dray-e2e";

const BINDINGS: &str = "\
apiVersion: dray.dev/v1alpha1
kind: RoleBinding
metadata: {name: release-managers, namespace: demo}
roleRef: {name: dray-promoter}
subjects:
  - {kind: Group, name: release-managers}
---
apiVersion: dray.dev/v1alpha1
kind: RoleBinding
metadata: {name: developers, namespace: demo}
roleRef: {name: dray-viewer}
subjects:
  - {kind: Group, name: developers}
";

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn users() -> Vec<OidcUser> {
    vec![
        OidcUser::new("ann", &["release-managers", "staff"]),
        OidcUser::new("bob", &["developers"]),
        // The same name as the bootstrap token's user, who is `dray-admin` everywhere.
        OidcUser::new("admin", &[]),
        // ID tokens the provider really signs, but that Dray must refuse.
        OidcUser::new("late", &[]).with_claim("exp", json!(1_000_000_000)),
        OidcUser::new("elsewhere", &[]).with_claim("aud", json!("another-client")),
        OidcUser::new("impostor", &[]).with_claim("iss", json!("https://impostor.example")),
        OidcUser::new("replayed", &[]).with_claim("nonce", json!("a-nonce-from-another-login")),
        // Emails not verified: absent, and `false`.
        OidcUser {
            email_verified: None,
            ..OidcUser::new("eve", &["release-managers"])
        },
        OidcUser {
            email_verified: Some(false),
            ..OidcUser::new("fay", &["release-managers"])
        },
    ]
}

/// The `--oidc-*` flags for `provider`. Its token endpoint authenticates clients with a
/// secret (`client_secret_basic`, any secret accepted), so Dray is a confidential client
/// here, with the secret in a file as production would have it.
fn oidc_args(world: &TestWorld, provider: &OidcProvider) -> Result<Vec<String>> {
    oidc_args_for(world, &provider.issuer())
}

/// [`oidc_args`] for the provider at `issuer`.
fn oidc_args_for(world: &TestWorld, issuer: &str) -> Result<Vec<String>> {
    let dir = world.unique_dir("oidc-client")?;
    std::fs::create_dir_all(&dir)?;
    let secret = dir.join("client-secret");
    std::fs::write(&secret, "e2e-client-secret\n")?;
    Ok(vec![
        "--oidc-issuer".into(),
        issuer.to_owned(),
        "--oidc-client-id".into(),
        CLIENT_ID.into(),
        "--oidc-client-secret-file".into(),
        secret.to_str().context("utf-8")?.to_owned(),
    ])
}

/// A browser-like HTTP client: its own cookie jar (name → value, as `Set-Cookie` says),
/// no automatic redirects, so each hop can be checked.
struct Web {
    http: reqwest::Client,
    jar: BTreeMap<String, String>,
}

/// One answer: status, headers, body.
struct Page {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Page {
    fn location(&self) -> Result<String> {
        Ok(self
            .headers
            .get(LOCATION)
            .context("no Location header")?
            .to_str()?
            .to_owned())
    }

    /// The `Set-Cookie` header that sets `name`.
    fn set_cookie(&self, name: &str) -> Option<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .find(|c| c.starts_with(&format!("{name}=")))
            .map(str::to_owned)
    }
}

impl Web {
    fn new() -> Result<Self> {
        Ok(Web {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(std::time::Duration::from_secs(30))
                .build()?,
            jar: BTreeMap::new(),
        })
    }

    fn cookie_header(&self) -> String {
        self.jar
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Result<Page> {
        let request = if self.jar.is_empty() {
            request
        } else {
            request.header("cookie", self.cookie_header())
        };
        let response = request.send().await?;
        let status = response.status();
        let headers = response.headers().clone();
        for cookie in headers
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|h| h.to_str().ok())
        {
            let pair = cookie.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                if value.is_empty() || cookie.contains("Max-Age=0") {
                    self.jar.remove(name);
                } else {
                    self.jar.insert(name.to_owned(), value.to_owned());
                }
            }
        }
        let body = response.text().await?;
        Ok(Page {
            status,
            headers,
            body,
        })
    }

    async fn get(&mut self, url: &str) -> Result<Page> {
        let request = self.http.get(url);
        self.send(request).await
    }

    async fn post_form(&mut self, url: &str, form: &[(&str, &str)]) -> Result<Page> {
        let request = self.http.post(url).form(form);
        self.send(request).await
    }

    /// GETs `url` and follows redirects that stay on `base` (at most 5).
    async fn get_following(&mut self, base: &str, url: &str) -> Result<Page> {
        let mut url = url.to_owned();
        for _ in 0..5 {
            let page = self.get(&url).await?;
            if !page.status.is_redirection() {
                return Ok(page);
            }
            let next = page.location()?;
            url = if next.starts_with('/') {
                format!("{base}{next}")
            } else {
                next
            };
        }
        bail!("more than 5 redirects from {url}")
    }
}

/// The value of `name` in a URL's query (percent-decoding `%XX` and `+`).
fn query_param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| decode(v))
    })
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `GET /auth/login`: checks the 302 (to the provider at `issuer`) and the attempt
/// cookie; returns the provider's URL.
async fn start_login(web: &mut Web, base: &str, issuer: &str) -> Result<String> {
    let started = web.get(&format!("{base}/auth/login")).await?;
    ensure!(
        started.status == StatusCode::FOUND,
        "/auth/login answered {}: {}",
        started.status,
        started.body
    );
    let cookie = started
        .set_cookie("dray_oidc_state")
        .context("/auth/login set no dray_oidc_state cookie")?;
    for part in ["HttpOnly", "SameSite=Lax", "Path=/auth", "Max-Age=600"] {
        ensure!(cookie.contains(part), "state cookie lacks {part}: {cookie}");
    }
    ensure!(
        !cookie.contains("Secure"),
        "plain http must not set Secure: {cookie}"
    );
    let authorize = started.location()?;
    ensure!(
        authorize.starts_with(&format!("{issuer}/oauth2/authorize?")),
        "{authorize}"
    );
    assert_eq!(
        query_param(&authorize, "client_id").as_deref(),
        Some(CLIENT_ID)
    );
    assert_eq!(
        query_param(&authorize, "redirect_uri"),
        Some(format!("{base}/auth/callback"))
    );
    assert_eq!(
        query_param(&authorize, "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert_eq!(
        query_param(&authorize, "response_type").as_deref(),
        Some("code")
    );
    for name in ["state", "nonce", "code_challenge"] {
        let value = query_param(&authorize, name).unwrap_or_default();
        assert!(
            value.len() >= 22,
            "{name} is too short or missing: {authorize}"
        );
        assert!(
            !cookie.contains(&value),
            "the cookie must not carry the {name}"
        );
    }
    let scope = query_param(&authorize, "scope").unwrap_or_default();
    assert!(scope.split(' ').any(|s| s == "openid"), "{scope}");
    assert!(scope.split(' ').any(|s| s == "email"), "{scope}");
    Ok(authorize)
}

/// The provider's form: GET it, then submit `form`; returns the redirect back to Dray.
async fn at_provider(web: &mut Web, authorize: &str, form: &[(&str, &str)]) -> Result<String> {
    let page = web.get(authorize).await?;
    ensure!(
        page.status == StatusCode::OK && page.body.contains("name=\"sub\""),
        "the provider's form: {} {}",
        page.status,
        page.body
    );
    let answered = web.post_form(authorize, form).await?;
    ensure!(
        answered.status.is_redirection(),
        "the provider answered {}: {}",
        answered.status,
        answered.body
    );
    answered.location()
}

/// A whole login as `sub`; returns the project page and its CSRF token.
async fn log_in(
    web: &mut Web,
    base: &str,
    provider: &OidcProvider,
    sub: &str,
) -> Result<(Page, String)> {
    log_in_at(web, base, &provider.issuer(), sub).await
}

/// [`log_in`] through the provider at `issuer`.
async fn log_in_at(web: &mut Web, base: &str, issuer: &str, sub: &str) -> Result<(Page, String)> {
    let authorize = start_login(web, base, issuer).await?;
    let back = at_provider(web, &authorize, &[("sub", sub)]).await?;
    ensure!(
        back.starts_with(&format!("{base}/auth/callback?")),
        "{back}"
    );
    let landed = web.get(&back).await?;
    ensure!(
        landed.status == StatusCode::OK,
        "the callback answered {}: {}",
        landed.status,
        landed.body
    );
    let session = landed
        .set_cookie("dray_session")
        .context("the callback started no session")?;
    // The provider's ID tokens live an hour: the session ends with the token, not in 12h.
    let max_age: u64 = session
        .split("Max-Age=")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .context("no Max-Age")?
        .parse()?;
    ensure!(
        (3000..=3600).contains(&max_age),
        "the session must end with the ID token (1h): {session}"
    );
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        ensure!(
            session.contains(part),
            "session cookie lacks {part}: {session}"
        );
    }
    let cleared = landed
        .set_cookie("dray_oidc_state")
        .context("the callback did not clear the state cookie")?;
    ensure!(cleared.contains("Max-Age=0"), "{cleared}");
    ensure!(
        landed.body.contains("http-equiv=\"refresh\"") && landed.body.contains("url=/"),
        "the callback page must move on to /: {}",
        landed.body
    );
    ensure!(
        !web.jar.contains_key("dray_oidc_state"),
        "the state cookie must be gone"
    );
    let page = web.get_following(base, &format!("{base}/")).await?;
    ensure!(
        page.status == StatusCode::OK,
        "/ answered {}: {}",
        page.status,
        page.body
    );
    let csrf = page
        .body
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .context("the page has no CSRF token")?
        .to_owned();
    Ok((page, csrf))
}

/// The quickstart project (auto-promotion off), its Freight, and the OIDC bindings.
struct Pipeline {
    _registry: Registry,
    _git: GitServer,
    provider: OidcProvider,
    dray: Dray,
    freight: String,
}

impl Pipeline {
    async fn start() -> Result<Self> {
        let world = TestWorld::new()?;
        let registry = Registry::start(&world, Default::default())?;
        let git = GitServer::start(&world, Default::default())?;
        let config_url = git.create_repo("config")?;
        GitRepo::seed(
            &world,
            &config_url,
            &workspace_root().join("examples/quickstart/config-repo"),
        )?;
        let provider = OidcProvider::start(&world, &users())?;
        let dray = Dray::start(
            &world,
            DrayOptions {
                args: oidc_args(&world, &provider)?,
                ..Default::default()
            },
        )?;
        let dir = world.unique_dir("project")?;
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(workspace_root().join("examples/quickstart/project"))? {
            let path = entry?.path();
            if path.file_name().is_some_and(|n| n == "config.yaml") {
                continue;
            }
            let yaml = std::fs::read_to_string(&path)?
                .replace("127.0.0.1:5000", &registry.host())
                .replace("http://127.0.0.1:8080/config.git", &config_url)
                .replace("interval: 5m", "interval: 1h");
            std::fs::write(dir.join(path.file_name().context("name")?), yaml)?;
        }
        std::fs::write(dir.join("bindings.yaml"), BINDINGS)?;
        let applied = dray.cli(["apply", "-f", dir.to_str().context("utf-8")?])?;
        ensure!(applied.status.success(), "apply failed: {}", text(&applied));
        dray_e2e::oci::push_image(&registry, "demo/app", "1.0.0").await?;
        let refreshed = dray.cli(["-p", "demo", "refresh", "warehouse", "app", "--wait"])?;
        ensure!(
            refreshed.status.success(),
            "refresh failed: {}",
            text(&refreshed)
        );
        let listed = dray.cli(["-p", "demo", "get", "freight", "-o", "json"])?;
        let freight: Vec<Value> = serde_json::from_slice(&listed.stdout)
            .with_context(|| format!("freight list: {}", text(&listed)))?;
        let freight = freight
            .first()
            .and_then(|f| f["metadata"]["name"].as_str())
            .context("no Freight after refresh")?
            .to_owned();
        Ok(Pipeline {
            _registry: registry,
            _git: git,
            provider,
            dray,
            freight,
        })
    }
}

async fn promote(web: &mut Web, base: &str, csrf: Option<&str>, freight: &str) -> Result<Page> {
    let mut request = web
        .http
        .post(format!("{base}/api/v1/projects/demo/stages/dev/promote"))
        .header("accept", "application/json")
        .json(&json!({"freight": freight}));
    if let Some(csrf) = csrf {
        request = request.header("x-csrf-token", csrf);
    }
    web.send(request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_member_logs_in_with_oidc_and_promotes_and_a_non_member_may_not() -> Result<()> {
    let p = Pipeline::start().await?;
    let base = p.dray.url();

    // The login page offers the provider.
    let mut ann = Web::new()?;
    let login = ann.get(&format!("{base}/login")).await?;
    assert!(login.body.contains("id=\"oidc-login\""), "{}", login.body);
    let host = p.provider.issuer().trim_start_matches("http://").to_owned();
    assert!(
        login.body.contains(&format!("Log in with {host}")),
        "{}",
        login.body
    );
    assert!(!login.body.contains("oidc-unavailable"), "{}", login.body);

    // ann (group release-managers) lands on the project page as herself.
    let (page, csrf) = log_in(&mut ann, &base, &p.provider, "ann").await?;
    assert!(page.body.contains("ann@example.com"), "{}", page.body);
    assert!(
        page.body.contains("data-action=\"promote\""),
        "{}",
        page.body
    );

    // Without the CSRF token the cookie alone may not promote.
    let refused = promote(&mut ann, &base, None, &p.freight).await?;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(refused.body.contains("CSRF"), "{}", refused.body);

    // With it, the Group binding lets her promote; she is the Promotion's actor.
    let promoted = promote(&mut ann, &base, Some(&csrf), &p.freight).await?;
    assert_eq!(promoted.status, StatusCode::CREATED, "{}", promoted.body);
    let created: Value = serde_json::from_str(&promoted.body)?;
    assert_eq!(
        created["metadata"]["annotations"]["dray.dev/actor"], "ann@example.com",
        "{created}"
    );

    // bob (group developers: dray-viewer) sees Promote disabled, and the API agrees.
    let mut bob = Web::new()?;
    let (page, csrf) = log_in(&mut bob, &base, &p.provider, "bob").await?;
    assert!(page.body.contains("bob@example.com"), "{}", page.body);
    let refusal = "user `bob@example.com` may not promote stages/dev";
    assert!(
        page.body.contains(&refusal.replace('`', "&#96;")) || page.body.contains(refusal),
        "{}",
        page.body
    );
    let promote_button = page
        .body
        .split("<button")
        .find(|b| b.contains("data-action=\"promote\"") && b.contains("data-stage=\"dev\""))
        .context("no Promote button for dev")?;
    assert!(promote_button.contains("disabled"), "{promote_button}");
    let refused = promote(&mut bob, &base, Some(&csrf), &p.freight).await?;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(refused.body.contains("may not promote"), "{}", refused.body);

    // Logging out ends the OIDC session like any other.
    let logout = bob
        .post_form(&format!("{base}/logout"), &[("csrf", csrf.as_str())])
        .await?;
    assert!(logout.status.is_redirection(), "{}", logout.body);
    let after = bob.get(&format!("{base}/projects/demo")).await?;
    assert_eq!(after.location()?, "/login");

    // No code, state or token reached the server's log.
    let log = p.dray.log();
    assert!(log.contains("logged in to the UI with OIDC"), "{log}");
    assert!(!log.contains("code="), "{log}");
    assert!(!log.contains("e2e-client-secret"), "{log}");
    Ok(())
}

/// Dray and the provider only (a bare project for the pages).
async fn small(world: &TestWorld) -> Result<(OidcProvider, Dray)> {
    small_with(world, &[]).await
}

/// [`small`] with more `dray serve` flags.
async fn small_with(world: &TestWorld, extra: &[&str]) -> Result<(OidcProvider, Dray)> {
    let provider = OidcProvider::start(world, &users())?;
    let mut args = oidc_args(world, &provider)?;
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let dray = Dray::start(
        world,
        DrayOptions {
            args,
            ..Default::default()
        },
    )?;
    apply_project(world, &dray)?;
    Ok((provider, dray))
}

/// Applies a bare project `demo` with the OIDC bindings.
fn apply_project(world: &TestWorld, dray: &Dray) -> Result<()> {
    let dir = world.unique_dir("project")?;
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("project.yaml"),
        format!(
            "apiVersion: dray.dev/v1alpha1\nkind: Project\nmetadata: {{name: demo}}\n---\n{BINDINGS}"
        ),
    )?;
    let applied = dray.cli(["apply", "-f", dir.to_str().context("utf-8")?])?;
    ensure!(applied.status.success(), "apply failed: {}", text(&applied));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_user_named_like_a_token_user_gets_none_of_its_roles() -> Result<()> {
    let world = TestWorld::new()?;
    // Users named by `sub`, which the provider lets anyone pick here: `admin` is not Dray's.
    let (provider, dray) = small_with(&world, &["--oidc-username-claim", "sub"]).await?;
    let base = dray.url();
    let mut web = Web::new()?;
    let (page, csrf) = log_in(&mut web, &base, &provider, "admin").await?;
    assert!(page.body.contains("oidc:admin"), "{}", page.body);
    let refused = promote(&mut web, &base, Some(&csrf), "any-freight").await?;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused.body.contains("user `oidc:admin` may not promote"),
        "{}",
        refused.body
    );
    // The token user `admin` keeps its roles.
    let listed = dray.cli(["-p", "demo", "get", "stages"])?;
    assert!(listed.status.success(), "{}", text(&listed));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_of_dray_logs_nobody_out() -> Result<()> {
    let world = TestWorld::new()?;
    let (provider, mut dray) = small(&world).await?;
    let base = dray.url();
    let mut web = Web::new()?;
    let (_, csrf) = log_in(&mut web, &base, &provider, "ann").await?;
    tokio::task::block_in_place(|| -> Result<()> {
        dray.kill9()?;
        dray.restart()
    })?;
    let page = web.get_following(&base, &format!("{base}/")).await?;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("ann@example.com"), "{}", page.body);
    assert!(
        page.body
            .contains(&format!("name=\"csrf-token\" content=\"{csrf}\"")),
        "the same session, with its CSRF token: {}",
        page.body
    );
    // Logging out still ends it, for good.
    let out = web
        .send(
            web.http
                .post(format!("{base}/logout"))
                .form(&[("csrf", csrf.as_str())]),
        )
        .await?;
    assert_eq!(out.status, StatusCode::SEE_OTHER, "{}", out.body);
    let after = web.get(&format!("{base}/")).await?;
    assert_eq!(after.location()?, "/login");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_state_is_refused_and_an_attempt_works_once() -> Result<()> {
    let world = TestWorld::new()?;
    let (provider, dray) = small(&world).await?;
    let base = dray.url();
    let mut web = Web::new()?;
    let authorize = start_login(&mut web, &base, &provider.issuer()).await?;
    let back = at_provider(&mut web, &authorize, &[("sub", "ann")]).await?;
    let state = query_param(&back, "state").context("no state in the callback")?;
    let tampered = back.replace(&format!("state={state}"), "state=forged-by-someone-else");
    assert_ne!(tampered, back);
    let refused = web.get(&tampered).await?;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    assert!(refused.body.contains("does not match"), "{}", refused.body);
    assert!(refused.body.contains("start again"), "{}", refused.body);
    assert!(refused.set_cookie("dray_session").is_none());

    // The refusal cleared the attempt's cookie: the genuine redirect no longer works here.
    let replay = web.get(&back).await?;
    assert_eq!(replay.status, StatusCode::UNAUTHORIZED, "{}", replay.body);
    assert!(
        replay.body.contains("state cookie is missing"),
        "{}",
        replay.body
    );
    assert!(replay.set_cookie("dray_session").is_none());

    // The same id again with its cookie restored: expired or already used.
    let mut again = Web::new()?;
    let authorize = start_login(&mut again, &base, &provider.issuer()).await?;
    let attempt = again
        .jar
        .get("dray_oidc_state")
        .cloned()
        .context("no attempt cookie")?;
    let back = at_provider(&mut again, &authorize, &[("sub", "ann")]).await?;
    let first = again.get(&back).await?;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    again.jar.insert("dray_oidc_state".into(), attempt);
    let second = again.get(&back).await?;
    assert_eq!(second.status, StatusCode::UNAUTHORIZED, "{}", second.body);
    assert!(second.body.contains("already used"), "{}", second.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_login_says_why_and_an_unreachable_provider_does_not_stop_dray() -> Result<()> {
    let world = TestWorld::new()?;
    let (provider, dray) = small(&world).await?;
    let base = dray.url();
    let mut web = Web::new()?;
    let authorize = start_login(&mut web, &base, &provider.issuer()).await?;
    let back = at_provider(&mut web, &authorize, &[("action", "deny")]).await?;
    assert_eq!(
        query_param(&back, "error").as_deref(),
        Some("access_denied"),
        "{back}"
    );
    let page = web.get(&back).await?;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(
        page.body.contains("refused the login: access_denied"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("id=\"oidc-login\""),
        "a way to try again: {}",
        page.body
    );
    assert!(page.set_cookie("dray_session").is_none());

    // A provider nobody listens for: dray serve starts, and the login page says why.
    let nowhere = format!("http://127.0.0.1:{}", free_port()?);
    let lonely = Dray::start(
        &world,
        DrayOptions {
            args: vec![
                "--oidc-issuer".into(),
                nowhere.clone(),
                "--oidc-client-id".into(),
                CLIENT_ID.into(),
            ],
            ..Default::default()
        },
    )?;
    let mut web = Web::new()?;
    let login = web.get(&format!("{}/login", lonely.url())).await?;
    assert_eq!(login.status, StatusCode::OK);
    assert!(
        login.body.contains("id=\"oidc-unavailable\""),
        "{}",
        login.body
    );
    assert!(
        login.body.contains("id=\"token\""),
        "the token form stays: {}",
        login.body
    );
    let started = web.get(&format!("{}/auth/login", lonely.url())).await?;
    assert_eq!(started.status, StatusCode::BAD_GATEWAY, "{}", started.body);
    assert!(
        started.body.contains(&nowhere) && started.body.contains("unavailable"),
        "{}",
        started.body
    );
    assert!(started.set_cookie("dray_oidc_state").is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_the_oidc_button_logs_in_through_the_providers_form() -> Result<()> {
    if !Browser::is_available() {
        bail!("this test needs chromium and chromedriver (e2e/test.sh installs them)");
    }
    let world = TestWorld::new()?;
    let (provider, dray) = small(&world).await?;
    let base = dray.url();
    let browser = Browser::start().await?;
    browser.goto(&format!("{base}/login")).await?;
    browser
        .wait_for("#oidc-login", "the OIDC login button")
        .await?
        .click()
        .await?;
    let sub = browser
        .wait_for("input[name=\"sub\"]", "the provider's subject field")
        .await?;
    ensure!(
        browser.current_url().await.starts_with(&provider.issuer()),
        "not at the provider: {}",
        browser.current_url().await
    );
    sub.send_keys("ann").await?;
    browser
        .wait_for(
            "button[type=\"submit\"]:not([name])",
            "the provider's Authorize button",
        )
        .await?
        .click()
        .await?;
    browser.wait_for_text("#user", "ann@example.com").await?;
    browser
        .wait_for("[data-stage], .graph, #logout", "the project page")
        .await?;
    ensure!(
        browser
            .current_url()
            .await
            .starts_with(&format!("{base}/projects/demo")),
        "{}",
        browser.current_url().await
    );
    browser.screenshot("oidc-logged-in").await?;
    Ok(())
}

/// A login as `sub` through the provider at `issuer` that the callback must refuse (the
/// `case`): 401, a page saying each of `says`, that the ID token was refused and to log in
/// again, with the login button; no session cookie, and the browser is still logged out.
async fn refused_login(
    dray: &Dray,
    issuer: &str,
    sub: &str,
    case: &str,
    says: &[&str],
) -> Result<()> {
    let base = dray.url();
    let mut web = Web::new()?;
    let authorize = start_login(&mut web, &base, issuer).await?;
    let back = at_provider(&mut web, &authorize, &[("sub", sub)]).await?;
    ensure!(
        back.starts_with(&format!("{base}/auth/callback?code=")),
        "{case}: the provider must send a code back: {back}"
    );
    let page = web.get(&back).await?;
    ensure!(
        page.status == StatusCode::UNAUTHORIZED,
        "{case}: the callback answered {}: {}",
        page.status,
        page.body
    );
    let said = page.body.replace("&#96;", "`");
    for part in says
        .iter()
        .chain(&["the OpenID provider's ID token was refused", "log in again"])
    {
        ensure!(
            said.contains(part),
            "{case}: the page must say `{part}`: {}",
            page.body
        );
    }
    ensure!(
        page.body.contains("id=\"oidc-login\""),
        "{case}: the page must offer to log in again: {}",
        page.body
    );
    ensure!(
        page.set_cookie("dray_session").is_none() && !web.jar.contains_key("dray_session"),
        "{case}: no session may be made: {:?}",
        page.headers
    );
    let after = web.get(&format!("{base}/projects/demo")).await?;
    ensure!(
        after.status.is_redirection() && after.location()? == "/login",
        "{case}: the next page must still ask to log in: {} {}",
        after.status,
        after.body
    );
    let api = web.get(&format!("{base}/api/v1/projects")).await?;
    ensure!(
        api.status == StatusCode::UNAUTHORIZED,
        "{case}: the API must still refuse: {} {}",
        api.status,
        api.body
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn id_tokens_the_provider_signs_wrongly_are_refused_and_make_no_session() -> Result<()> {
    let world = TestWorld::new()?;
    let (provider, dray) = small(&world).await?;
    let issuer = provider.issuer();
    let cases: [(&str, &str, &[&str]); 4] = [
        (
            "expired",
            "late",
            &["it has expired", "expired at 2001-09-09", "clock"],
        ),
        (
            "wrong audience",
            "elsewhere",
            &[
                "it was issued to another client",
                "`another-client`",
                "--oidc-client-id",
            ],
        ),
        (
            "wrong issuer",
            "impostor",
            &[
                "it was not issued by the configured provider",
                "found `https://impostor.example`",
                "--oidc-issuer",
            ],
        ),
        (
            "wrong nonce",
            "replayed",
            &[
                "its nonce is not the one this login sent",
                "replayed or injected",
            ],
        ),
    ];
    for (case, sub, says) in cases {
        refused_login(&dray, &issuer, sub, case, says).await?;
    }
    // Each refusal is logged with its reason, never with the token (a JWT starts `eyJ`).
    let log = dray.log();
    for reason in [
        "it has expired",
        "issued to another client",
        "not issued by the configured provider",
        "its nonce is not the one",
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains("OIDC login refused") && l.contains(reason)),
            "the log must say why ({reason}): {log}"
        );
    }
    assert!(!log.contains("eyJ"), "no token in the log: {log}");
    // The provider itself is fine: a user without such claims gets in.
    let mut web = Web::new()?;
    let (page, _) = log_in(&mut web, &dray.url(), &provider, "ann").await?;
    assert!(page.body.contains("ann@example.com"), "{}", page.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn id_tokens_altered_after_signing_or_unsigned_are_refused_and_make_no_session() -> Result<()>
{
    let world = TestWorld::new()?;
    let provider = OidcProvider::start(&world, &users())?;
    let proxy = TamperingProxy::start(&provider)?;
    let dray = Dray::start(
        &world,
        DrayOptions {
            args: oidc_args_for(&world, &proxy.issuer())?,
            ..Default::default()
        },
    )?;
    apply_project(&world, &dray)?;
    let base = dray.url();

    // Untouched, the way through the proxy works: what follows is refused for the tampering.
    let mut web = Web::new()?;
    let (page, _) = log_in_at(&mut web, &base, &proxy.issuer(), "ann").await?;
    assert!(page.body.contains("ann@example.com"), "{}", page.body);
    assert_eq!(proxy.tampered(), 0);

    let cases: [(&str, Tampering, &[&str]); 2] = [
        (
            "claims altered after signing (ann made admin)",
            Tampering::AlteredClaims,
            &["its signature does not verify", "forged or altered"],
        ),
        (
            "unsigned (alg none)",
            Tampering::Unsigned,
            &["its signature does not verify", "forged or altered"],
        ),
    ];
    for (number, (case, tampering, says)) in cases.into_iter().enumerate() {
        proxy.set(Some(tampering));
        refused_login(&dray, &proxy.issuer(), "ann", case, says).await?;
        assert_eq!(
            proxy.tampered(),
            number + 1,
            "{case}: the proxy must have rewritten the ID token"
        );
    }
    let log = dray.log();
    assert!(
        log.lines()
            .filter(
                |l| l.contains("OIDC login refused") && l.contains("its signature does not verify")
            )
            .count()
            >= 2,
        "the log must say why: {log}"
    );
    assert!(!log.contains("eyJ"), "no token in the log: {log}");
    assert!(!log.contains("admin@example.com"), "nor its claims: {log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverified_email_does_not_name_the_user() -> Result<()> {
    let world = TestWorld::new()?;
    let (provider, dray) = small(&world).await?;
    let base = dray.url();
    for (case, sub) in [
        ("email_verified absent", "eve"),
        ("email_verified false", "fay"),
    ] {
        let mut web = Web::new()?;
        let (page, _) = log_in(&mut web, &base, &provider, sub).await?;
        assert!(
            page.body.contains(&format!("id=\"user\">oidc:{sub}<")),
            "{case}: the user is named by sub, prefixed: {}",
            page.body
        );
        assert!(
            !page.body.contains(&format!("{sub}@example.com")),
            "{case}: not by the unverified email: {}",
            page.body
        );
    }
    // A verified one still names the user.
    let mut web = Web::new()?;
    let (page, _) = log_in(&mut web, &base, &provider, "ann").await?;
    assert!(
        page.body.contains("id=\"user\">ann@example.com<"),
        "{}",
        page.body
    );
    Ok(())
}
