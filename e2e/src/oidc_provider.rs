//! A real OpenID Connect provider for tests: the PyPI package `oidc-provider-mock`
//! (authlib under Flask/uvicorn), run as `python3 -m oidc_provider_mock` on a free
//! 127.0.0.1 port. Discovery, JWKS, RS256-signed ID tokens, the authorization code flow
//! and its token endpoint are the real thing; only the login is a form where the user
//! types (or clicks) a subject instead of a password.
//!
//! Users and their claims are given at start ([`OidcUser`], passed as `--user-claims`);
//! the form's `sub` field (`input[name=sub]`, button "Authorize") logs in as any of them, a
//! "Deny" button sends the user back with `error=access_denied`. Any client id is accepted
//! with any redirect URI (`--require-registration` is off). The issuer is
//! `http://127.0.0.1:PORT` (no trailing slash). Installed by `e2e/test.sh`; killed on drop.
//!
//! A user's claims are put into the ID token after the provider's own (`iss`, `aud`,
//! `exp`, `nonce`…), so a user given such a claim ([`OidcUser::with_claim`]) gets ID
//! tokens that the provider really signs but that are for another audience, from another
//! issuer, expired, or for another nonce. What the provider cannot be made to sign, a
//! token altered after signing or not signed at all, [`tamper::TamperingProxy`] makes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::process::{READY_TIMEOUT, Service};
use crate::world::{TestWorld, free_port, loopback};

pub mod tamper;

/// The Python module that runs the provider.
pub const MODULE: &str = "oidc_provider_mock";

/// A user the provider knows, with the claims its ID tokens carry.
#[derive(Clone, Debug)]
pub struct OidcUser {
    /// The subject (what the login form asks for).
    pub sub: String,
    /// `email`.
    pub email: String,
    /// `groups`.
    pub groups: Vec<String>,
    /// `email_verified`; left out of the token when `None`.
    pub email_verified: Option<bool>,
    /// More claims, put over the provider's own ones (`exp`, `aud`…) and the above.
    pub extra: serde_json::Map<String, Value>,
}

impl OidcUser {
    /// A user with this subject, `<sub>@example.com` (verified) and these groups.
    pub fn new(sub: &str, groups: &[&str]) -> Self {
        OidcUser {
            sub: sub.to_owned(),
            email: format!("{sub}@example.com"),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            email_verified: Some(true),
            extra: serde_json::Map::new(),
        }
    }

    /// The same user with `name: value` in their ID tokens, in place of what the provider
    /// would put there (`"exp": 1000000000` makes tokens that expired in 2001).
    pub fn with_claim(mut self, name: &str, value: Value) -> Self {
        self.extra.insert(name.to_owned(), value);
        self
    }

    fn claims(&self) -> Value {
        let mut claims = json!({"sub": self.sub, "email": self.email, "groups": self.groups});
        if let Some(verified) = self.email_verified {
            claims["email_verified"] = json!(verified);
        }
        for (name, value) in &self.extra {
            claims[name] = value.clone();
        }
        claims
    }
}

/// A running `oidc-provider-mock` on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct OidcProvider {
    addr: SocketAddr,
    log: PathBuf,
    _service: Service,
    _world: TestWorld,
}

impl OidcProvider {
    /// Whether `python3 -m oidc_provider_mock` can run here.
    pub fn is_available() -> bool {
        Command::new("python3")
            .args(["-c", &format!("import {MODULE}")])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Starts the provider knowing `users`, and waits (at most the harness' readiness
    /// timeout) until its `/.well-known/openid-configuration` answers 200.
    /// Fails at once, saying what to install, when the provider is not
    /// [available](Self::is_available).
    pub fn start(world: &TestWorld, users: &[OidcUser]) -> Result<Self> {
        if !Self::is_available() {
            bail!(
                "the OIDC provider needs the Python package `oidc-provider-mock` \
                 (`import {MODULE}` fails); run e2e/test.sh, which installs it"
            );
        }
        let dir = world.unique_dir("oidc")?;
        let log = dir.join("oidc-provider.log");
        let port = free_port()?;
        let mut cmd = Command::new("python3");
        cmd.args(["-m", MODULE, "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .env("NO_COLOR", "1")
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(&dir);
        for user in users {
            cmd.arg("--user-claims").arg(user.claims().to_string());
        }
        let mut service = Service::spawn("oidc-provider-mock", &mut cmd, &log).context(
            "cannot run `python3 -m oidc_provider_mock`; hint: `pip install oidc-provider-mock` or run e2e/test.sh",
        )?;
        let addr = loopback(port);
        service
            .wait_http(
                addr,
                "/.well-known/openid-configuration",
                |s| s == 200,
                READY_TIMEOUT,
            )
            .context("waiting for oidc-provider-mock's discovery document")?;
        Ok(OidcProvider {
            addr,
            log,
            _service: service,
            _world: world.clone(),
        })
    }

    /// The issuer: `http://127.0.0.1:PORT`.
    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Everything the provider logged.
    pub fn log(&self) -> String {
        crate::process::read_lossy(&self.log)
    }
}
