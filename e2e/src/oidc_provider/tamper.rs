//! A tampering proxy in front of a real [`OidcProvider`], for ID tokens the provider
//! cannot be made to sign: one whose claims were changed after signing, and one with its
//! signature taken off (`alg: none`). Test tooling only; the provider behind it stays real.
//!
//! Every request is passed on to the provider with the proxy's own address as `Host`, so
//! the provider's discovery document, endpoints and `iss` all name the proxy
//! (`http://127.0.0.1:PROXY_PORT`), and Dray, given that as `--oidc-issuer`, talks only to
//! the proxy. Only the token endpoint's answer is changed, and only while a
//! [`Tampering`] is set ([`TamperingProxy::set`]); [`TamperingProxy::tampered`] counts the
//! ID tokens it rewrote, so a test can tell that its refusal came from the tampering.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::OidcProvider;
use crate::double_server::{self, Server};

/// How the proxy changes the ID token in the token endpoint's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tampering {
    /// `sub` and `email` changed to `admin` after signing; header and signature kept, so
    /// the provider's signature no longer matches the claims.
    AlteredClaims,
    /// The header replaced by `{"alg": "none"}` and the signature dropped.
    Unsigned,
}

/// The provider's token endpoint path (`oidc-provider-mock`'s discovery says so).
const TOKEN_PATH: &str = "/oauth2/token";

struct Upstream {
    provider: SocketAddr,
    own: SocketAddr,
    http: reqwest::Client,
    tampering: Mutex<Option<Tampering>>,
    tampered: AtomicUsize,
}

/// A running tampering proxy; stopped on drop.
#[derive(Debug)]
pub struct TamperingProxy {
    addr: SocketAddr,
    upstream: Arc<Upstream>,
    _server: Server,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

impl TamperingProxy {
    /// Starts a proxy in front of `provider`, passing everything through untouched until
    /// [`set`](Self::set) says otherwise.
    pub fn start(provider: &OidcProvider) -> Result<Self> {
        let (listener, addr) = double_server::bind("OIDC tampering proxy")?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .context("cannot build the tampering proxy's HTTP client")?;
        let upstream = Arc::new(Upstream {
            provider: provider.addr,
            own: addr,
            http,
            tampering: Mutex::new(None),
            tampered: AtomicUsize::new(0),
        });
        let app = Router::new().fallback(forward).with_state(upstream.clone());
        let server = Server::spawn("OIDC tampering proxy", listener, addr, app)?;
        Ok(TamperingProxy {
            addr,
            upstream,
            _server: server,
        })
    }

    /// The issuer as seen through the proxy: `http://127.0.0.1:PROXY_PORT`.
    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on, change ID tokens so (`None`: pass them through).
    pub fn set(&self, tampering: Option<Tampering>) {
        *self
            .upstream
            .tampering
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = tampering;
    }

    /// How many ID tokens it has changed so far.
    pub fn tampered(&self) -> usize {
        self.upstream.tampered.load(Ordering::SeqCst)
    }
}

/// Passes one request on to the provider (as if it had been sent to the proxy's address)
/// and its answer back, changing the token endpoint's ID token when asked to.
async fn forward(
    State(upstream): State<Arc<Upstream>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match pass_on(&upstream, method, &uri, headers, body).await {
        Ok(response) => response,
        Err(error) => (
            StatusCode::BAD_GATEWAY,
            format!("the tampering proxy could not reach the OIDC provider: {error:#}"),
        )
            .into_response(),
    }
}

async fn pass_on(
    upstream: &Upstream,
    method: Method,
    uri: &Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = upstream
        .http
        .request(method, format!("http://{}{path}", upstream.provider))
        .header(header::HOST, upstream.own.to_string())
        .body(body);
    for (name, value) in &headers {
        if ![header::HOST, header::CONTENT_LENGTH, header::CONNECTION].contains(name) {
            request = request.header(name, value);
        }
    }
    let answer = request.send().await?;
    let status = answer.status();
    let answer_headers = answer.headers().clone();
    let mut bytes = answer.bytes().await?.to_vec();
    let tampering = *upstream
        .tampering
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(tampering) = tampering
        && uri.path() == TOKEN_PATH
        && status.is_success()
    {
        let mut token: Value =
            serde_json::from_slice(&bytes).context("the token endpoint's answer is not JSON")?;
        let id_token = token["id_token"]
            .as_str()
            .context("the token endpoint's answer has no id_token")?;
        token["id_token"] = json!(tamper(id_token, tampering)?);
        bytes = serde_json::to_vec(&token)?;
        upstream.tampered.fetch_add(1, Ordering::SeqCst);
    }
    let mut response = Response::builder().status(status);
    for (name, value) in &answer_headers {
        if ![
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::CONNECTION,
        ]
        .contains(name)
        {
            response = response.header(name, value);
        }
    }
    Ok(response.body(Body::from(bytes))?)
}

/// `id_token` (a compact JWS) changed as `tampering` says.
fn tamper(id_token: &str, tampering: Tampering) -> Result<String> {
    let mut parts = id_token.split('.');
    let (Some(head), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        anyhow::bail!("the ID token is not a compact JWS (three dot-separated parts)");
    };
    match tampering {
        Tampering::AlteredClaims => {
            let decoded = URL_SAFE_NO_PAD
                .decode(payload)
                .context("the ID token's payload is not base64url")?;
            let mut claims: Value =
                serde_json::from_slice(&decoded).context("the ID token's payload is not JSON")?;
            claims["sub"] = json!("admin");
            claims["email"] = json!("admin@example.com");
            let altered = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims)?);
            Ok(format!("{head}.{altered}.{signature}"))
        }
        Tampering::Unsigned => {
            let none = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
            Ok(format!("{none}.{payload}."))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(value: &Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap())
    }

    #[test]
    fn altered_claims_keep_the_signature_and_unsigned_drops_it() {
        let token = format!(
            "{}.{}.c2lnbmF0dXJl",
            part(&json!({"alg": "RS256", "kid": "k"})),
            part(&json!({"sub": "ann", "email": "ann@example.com", "aud": "dray"}))
        );
        let altered = tamper(&token, Tampering::AlteredClaims).unwrap();
        let parts: Vec<&str> = altered.split('.').collect();
        assert_eq!(parts[0], token.split('.').next().unwrap());
        assert_eq!(parts[2], "c2lnbmF0dXJl");
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            json!({"sub": "admin", "email": "admin@example.com", "aud": "dray"})
        );
        let unsigned = tamper(&token, Tampering::Unsigned).unwrap();
        let parts: Vec<&str> = unsigned.split('.').collect();
        assert_eq!(
            URL_SAFE_NO_PAD.decode(parts[0]).unwrap(),
            br#"{"alg":"none","typ":"JWT"}"#
        );
        assert_eq!(parts[1], token.split('.').nth(1).unwrap());
        assert_eq!(parts[2], "");
        assert!(tamper("not-a-jwt", Tampering::Unsigned).is_err());
    }
}
