//! The provider's metadata and signing keys: read from its
//! `/.well-known/openid-configuration` with a finite timeout ([`Oidc::discover`]), kept
//! with why the last try failed (for the login page), and read again when older than an
//! hour or when a signature does not verify (keys rotated).

use std::time::Instant;

use openidconnect::core::CoreProviderMetadata;
use openidconnect::{ClientId, ClientSecret};

use super::errors::{OidcLoginError, error_chain};
use super::protocol::OidcClient;
use super::{METADATA_MAX_AGE, Oidc, PROVIDER_TIMEOUT, lock};

impl Oidc {
    /// Reads the provider's `/.well-known/openid-configuration` and keys, waiting at most
    /// [`PROVIDER_TIMEOUT`]; remembers the result (or why it failed) for the login page.
    pub async fn discover(&self) -> Result<(), OidcLoginError> {
        let discovered = tokio::time::timeout(
            PROVIDER_TIMEOUT,
            CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http),
        )
        .await;
        let result = match discovered {
            Ok(Ok(metadata)) => Ok(metadata),
            Ok(Err(error)) => Err(error_chain(&error)),
            Err(_) => Err(format!(
                "its /.well-known/openid-configuration did not answer within {}s",
                PROVIDER_TIMEOUT.as_secs()
            )),
        };
        let mut provider = lock(&self.provider);
        match result {
            Ok(metadata) => {
                provider.metadata = Some((metadata, Instant::now()));
                provider.unavailable = None;
                Ok(())
            }
            Err(cause) => {
                provider.unavailable = Some(cause.clone());
                Err(OidcLoginError::Unavailable {
                    issuer: self.options.issuer.clone(),
                    cause,
                })
            }
        }
    }

    /// The client for the current metadata, discovering first when there is none yet or
    /// it is older than an hour (a stale copy is used if rediscovery fails).
    pub(super) async fn client(&self) -> Result<OidcClient, OidcLoginError> {
        let current = lock(&self.provider).metadata.clone();
        let metadata = match current {
            Some((metadata, at)) if at.elapsed() < METADATA_MAX_AGE => metadata,
            stale => match (self.discover().await, stale) {
                (Ok(()), _) => match lock(&self.provider).metadata.clone() {
                    Some((metadata, _)) => metadata,
                    None => {
                        return Err(OidcLoginError::Unavailable {
                            issuer: self.options.issuer.clone(),
                            cause: "no provider metadata".to_owned(),
                        });
                    }
                },
                (Err(_), Some((metadata, _))) => metadata,
                (Err(error), None) => return Err(error),
            },
        };
        Ok(OidcClient::from_provider_metadata(
            metadata,
            ClientId::new(self.options.client_id.clone()),
            self.options.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(self.redirect.clone()))
    }
}
