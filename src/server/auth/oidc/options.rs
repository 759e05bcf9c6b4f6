//! The `--oidc-*` settings of `dray serve` ([`OidcOptions`]), and what can be wrong with
//! them ([`OidcConfigError`], naming the flag and what to give instead).

/// What an OIDC username not taken from `email` starts with, unless
/// `--oidc-username-prefix` says otherwise (as Kubernetes prefixes such names with the
/// issuer): ``oidc:bob``.
pub const DEFAULT_USERNAME_PREFIX: &str = "oidc:";

/// How `dray serve` talks to an OpenID provider.
#[derive(Clone)]
pub struct OidcOptions {
    /// The issuer URL, exactly as the provider writes it in `iss`.
    pub issuer: String,
    /// The client id registered at the provider.
    pub client_id: String,
    /// The client secret (read from `--oidc-client-secret-file`); none for a public client.
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back: `<dray URL>/auth/callback`.
    pub redirect_url: String,
    /// The claim that names the user (`email`, else `sub` when the token has no such claim,
    /// or, for `email`, when `email_verified` is not `true`).
    pub username_claim: String,
    /// The claim listing the user's groups (a list of strings, or one string).
    pub groups_claim: String,
    /// Put before every OIDC username (`Some("")`: nothing). `None`, the default: a name
    /// from a verified `email` claim is kept as it is, any other (another claim, or `sub`)
    /// gets [`DEFAULT_USERNAME_PREFIX`], so that no provider-side name can be taken for an
    /// API token's user (the bootstrap `admin`, say) and inherit its cluster-wide roles.
    pub username_prefix: Option<String>,
    /// The scopes asked for (`openid` is always asked for).
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for OidcOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcOptions")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("redirect_url", &self.redirect_url)
            .field("username_claim", &self.username_claim)
            .field("groups_claim", &self.groups_claim)
            .field("username_prefix", &self.username_prefix)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// A bad OIDC setting of `dray serve`.
#[derive(Debug, thiserror::Error)]
pub enum OidcConfigError {
    /// `--oidc-issuer` is not a URL.
    #[error(
        "--oidc-issuer `{url}` is not a valid URL ({cause}); give the issuer exactly as the provider's `iss` claim has it, e.g. https://login.example.com/realms/main"
    )]
    Issuer {
        /// The value given.
        url: String,
        /// Why it does not parse.
        cause: String,
    },
    /// `--oidc-redirect-url` is not a URL ending in `/auth/callback`.
    #[error(
        "--oidc-redirect-url `{url}` {cause}; give Dray's external URL followed by /auth/callback, e.g. https://dray.example.com/auth/callback, and register it at the provider"
    )]
    RedirectUrl {
        /// The value given.
        url: String,
        /// What is wrong with it.
        cause: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot set up the HTTP client for the OpenID provider: {0}")]
    Http(String),
}
