//! Knocking on the webhook receivers from outside: a [`Doors`] world (the quickstart
//! pipeline, Warehouse `app` on the registry's `demo/app` and the config repository, the
//! test's receivers and Warehouses), [`Knock`]s sent to it, and the checks every door
//! test makes: a refused knock answers 401 and refreshes no Warehouse; an admitted one
//! refreshes exactly the Warehouses expected and no other; a replay answers 200
//! `replay: true` and refreshes nothing. What a refresh is: a new `dray.dev/refresh`
//! annotation, set by the receiver before it answers.
//!
//! The payloads are the services' documented examples (`tests/fixtures/webhooks`, sources
//! in its `SOURCES.md`), adapted only in the repository they name.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::pipeline::Pipeline;
use crate::workspace_root;

/// The hex HMAC-SHA256 of `body` under `secret`, as the signing services send it.
pub fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A secret no receiver has.
pub const WRONG_SECRET: &str = "a-wrong-secret-of-some-length";

/// A documented example payload from `tests/fixtures/webhooks`.
pub fn fixture(name: &str) -> Result<String> {
    let path = workspace_root().join("tests/fixtures/webhooks").join(name);
    std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// One request to a receiver.
pub struct Knock<'a> {
    /// What the knock tries, for messages.
    pub what: &'a str,
    /// The path, e.g. `/webhooks/demo/github`.
    pub path: String,
    /// The headers sent.
    pub headers: Vec<(&'a str, String)>,
    /// The body sent.
    pub body: Vec<u8>,
}

/// A [`Knock`].
pub fn knock<'a>(
    what: &'a str,
    path: &str,
    headers: Vec<(&'a str, String)>,
    body: &[u8],
) -> Knock<'a> {
    Knock {
        what,
        path: path.to_owned(),
        headers,
        body: body.to_vec(),
    }
}

/// The quickstart's world with the test's receivers, and the Warehouses watched.
pub struct Doors {
    /// The pipeline: registry, config repository, `dray serve`.
    pub p: Pipeline,
    client: reqwest::Client,
    /// The receivers' secret: no answer or log line may contain it.
    secret: String,
    /// The Warehouses whose refresh tokens every check compares.
    watched: Vec<String>,
}

impl Doors {
    /// The quickstart's base (Warehouse `app`) and `yaml` (receivers, Credentials, more
    /// Warehouses, localised), applied; `watched` Warehouses checked by every knock.
    pub async fn start(yaml: &str, secret: &str, watched: &[&str]) -> Result<Self> {
        let p = tokio::task::block_in_place(|| -> Result<Pipeline> {
            let p = Pipeline::start()?;
            p.apply_base()?;
            p.apply(yaml)?;
            Ok(p)
        })?;
        Ok(Doors {
            p,
            client: crate::http_client()?,
            secret: secret.to_owned(),
            watched: watched.iter().map(|w| (*w).to_owned()).collect(),
        })
    }

    /// Warehouse `name` of project `demo`.
    pub async fn warehouse(&self, name: &str) -> Result<Value> {
        let url = format!(
            "{}/api/v1/projects/demo/warehouses/{name}",
            self.p.dray.url()
        );
        let reply = self
            .client
            .get(url)
            .bearer_auth(self.p.dray.token())
            .send()
            .await?
            .error_for_status()?;
        Ok(reply.json().await?)
    }

    /// Warehouse `name`'s `dray.dev/refresh` annotation: a new value is a refresh.
    pub async fn refresh_token(&self, name: &str) -> Result<Option<String>> {
        Ok(
            self.warehouse(name).await?["metadata"]["annotations"]["dray.dev/refresh"]
                .as_str()
                .map(str::to_owned),
        )
    }

    /// Every watched Warehouse's refresh token.
    async fn tokens(&self) -> Result<BTreeMap<String, Option<String>>> {
        let mut tokens = BTreeMap::new();
        for name in &self.watched {
            tokens.insert(name.clone(), self.refresh_token(name).await?);
        }
        Ok(tokens)
    }

    /// Sends `knock`; the status and the JSON answer.
    pub async fn send(&self, knock: &Knock<'_>) -> Result<(u16, Value)> {
        let mut request = self
            .client
            .post(format!("{}{}", self.p.dray.url(), knock.path))
            .header("Content-Type", "application/json")
            .body(knock.body.clone());
        for (name, value) in &knock.headers {
            request = request.header(*name, value);
        }
        let reply = request.send().await?;
        let status = reply.status().as_u16();
        let text = reply.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(json!(text))))
    }

    /// Every knock answers 401 `unauthenticated` and refreshes no watched Warehouse.
    pub async fn refused(&self, knocks: &[Knock<'_>]) -> Result<()> {
        let before = self.tokens().await?;
        for knock in knocks {
            let (status, body) = self.send(knock).await?;
            assert_eq!(status, 401, "{}: {body}", knock.what);
            assert_eq!(body["error"]["code"], "unauthenticated", "{}", knock.what);
            assert!(
                !body.to_string().contains(&self.secret),
                "{}: {body}",
                knock.what
            );
            assert_eq!(
                self.tokens().await?,
                before,
                "{} refreshed a Warehouse",
                knock.what
            );
        }
        Ok(())
    }

    /// The knock answers 200 and refreshes exactly `expected` among the watched
    /// Warehouses; discovery answers `app`'s refresh. Returns the new refresh tokens.
    pub async fn admitted(
        &self,
        knock: &Knock<'_>,
        expected: &[&str],
    ) -> Result<BTreeMap<String, Option<String>>> {
        let before = self.tokens().await?;
        let (status, body) = self.send(knock).await?;
        assert_eq!(status, 200, "{}: {body}", knock.what);
        let answered = if body.get("projects").is_some() {
            &body["projects"][0]["warehouses"]
        } else {
            &body["warehouses"]
        };
        assert_eq!(answered, &json!(expected), "{}: {body}", knock.what);
        let after = self.tokens().await?;
        for name in &self.watched {
            if expected.contains(&name.as_str()) {
                assert!(
                    after[name].is_some(),
                    "{}: `{name}` not refreshed",
                    knock.what
                );
                assert_ne!(
                    after[name], before[name],
                    "{}: `{name}` not refreshed",
                    knock.what
                );
            } else {
                assert_eq!(
                    after[name], before[name],
                    "{}: `{name}` refreshed",
                    knock.what
                );
            }
        }
        if expected.contains(&"app") {
            let token = after["app"].clone().context("app has no refresh token")?;
            self.wait_handled("app", &token).await?;
        }
        Ok(after)
    }

    /// Waits (at most 30s) until Warehouse `name` reports the refresh `token` handled.
    pub async fn wait_handled(&self, name: &str, token: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let warehouse = self.warehouse(name).await?;
            if warehouse["status"]["lastHandledRefresh"] == token {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "waited 30s in vain for discovery to answer refresh `{token}` of `{name}`: {warehouse:#}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every knock answers 200 `replay: true` and refreshes no watched Warehouse.
    pub async fn replayed(&self, knocks: &[Knock<'_>]) -> Result<()> {
        let before = self.tokens().await?;
        for knock in knocks {
            let (status, answer) = self.send(knock).await?;
            assert_eq!(status, 200, "{}: {answer}", knock.what);
            let answer = if answer.get("projects").is_some() {
                answer["projects"][0].clone()
            } else {
                answer
            };
            assert_eq!(answer["replay"], true, "{}: {answer}", knock.what);
            assert_eq!(answer["refreshed"], 0, "{}: {answer}", knock.what);
            assert_eq!(
                self.tokens().await?,
                before,
                "{} refreshed a Warehouse",
                knock.what
            );
        }
        Ok(())
    }

    /// As long as the secret, its last byte different.
    pub fn forged_secret(&self) -> String {
        let mut forged = self.secret.clone();
        let last = forged
            .pop()
            .map_or('X', |c| if c == 'X' { 'Y' } else { 'X' });
        forged.push(last);
        forged
    }

    /// The forged, unsigned, empty and wrong-secret knocks on a receiver at `path` whose
    /// door is the `header` carrying `prefix` and the hex HMAC-SHA256 of the body; each
    /// also sends `base` (the event header, a delivery id).
    pub fn forged_signatures<'a>(
        &self,
        path: &str,
        base: &[(&'a str, String)],
        (header, prefix): (&'a str, &str),
        body: &[u8],
    ) -> Vec<Knock<'a>> {
        let with = |extra: Option<(&'a str, String)>| {
            let mut headers = base.to_vec();
            headers.extend(extra);
            headers
        };
        let signed = |secret: &str| Some((header, format!("{prefix}{}", hmac_hex(secret, body))));
        vec![
            knock("forged", path, with(signed(&self.forged_secret())), body),
            knock("unsigned", path, with(None), body),
            knock(
                "empty signature",
                path,
                with(Some((header, String::new()))),
                body,
            ),
            knock(
                "empty digest",
                path,
                with(Some((header, prefix.to_owned()))),
                body,
            ),
            knock("wrong secret", path, with(signed(WRONG_SECRET)), body),
            knock("the empty key's signature", path, with(signed("")), body),
            knock(
                "signed, then the body changed",
                path,
                with(signed(&self.secret)),
                &[body, b" "].concat(),
            ),
        ]
    }

    /// The forged, missing, empty and wrong path tokens on a receiver of project `demo`
    /// that takes the secret as the last segment of `/webhooks/demo/{receiver}/…`.
    pub fn forged_path_tokens<'a>(&self, receiver: &str, body: &[u8]) -> Vec<Knock<'a>> {
        let bare = format!("/webhooks/demo/{receiver}");
        let at = |token: &str| format!("{bare}/{token}");
        let prefix = &self.secret[..self.secret.len() / 2];
        vec![
            knock("forged", &at(&self.forged_secret()), vec![], body),
            knock("no token", &bare, vec![], body),
            knock(
                "no token, the secret as a bearer token",
                &bare,
                vec![("Authorization", format!("Bearer {}", self.secret))],
                body,
            ),
            knock("wrong secret", &at(WRONG_SECRET), vec![], body),
            knock("a prefix of the secret", &at(prefix), vec![], body),
        ]
    }

    /// The config repository's URL without `.git`.
    pub fn config_repo(&self) -> String {
        self.p.config_url.trim_end_matches(".git").to_owned()
    }

    /// No secret in any log line.
    pub fn logs_keep_the_secret(&self) {
        let log = self.p.dray.log();
        assert!(
            !log.contains(&self.secret),
            "the secret is in the server's log"
        );
    }
}
