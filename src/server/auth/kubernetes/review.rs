//! Who a bearer token stands for: one `TokenReview` (`authentication.k8s.io/v1`), kept for
//! a short while by the token's SHA-256 when it was accepted.

use std::time::Instant;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};

use super::{KubeAuth, KubeAuthError};

/// The user and groups the API server vouched for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reviewed {
    /// `status.user.username`, e.g. `ann` or `system:serviceaccount:demo:ci`.
    pub user: String,
    /// `status.user.groups`.
    pub groups: Vec<String>,
}

impl KubeAuth {
    /// Who `token` stands for, by a TokenReview (or a recent accepted one).
    pub async fn review_token(&self, token: &str) -> Result<Reviewed, KubeAuthError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(known) = self.lock_reviews().get(&key, Instant::now()) {
            return Ok(known);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|cause| KubeAuthError::TokenReview { cause })?;
        let status = reviewed.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        let username = user.username.filter(|u| !u.is_empty());
        let (true, Some(username)) = (status.authenticated == Some(true), username) else {
            return Err(KubeAuthError::Unauthenticated {
                reason: status
                    .error
                    .filter(|e| !e.is_empty())
                    .unwrap_or_else(|| "the TokenReview says it is not authenticated".to_owned()),
            });
        };
        let reviewed = Reviewed {
            user: username,
            groups: user.groups.unwrap_or_default(),
        };
        self.lock_reviews()
            .insert(key, reviewed.clone(), Instant::now());
        Ok(reviewed)
    }

    fn lock_reviews(&self) -> std::sync::MutexGuard<'_, super::TtlCache<[u8; 32], Reviewed>> {
        self.reviews.lock().unwrap_or_else(|e| e.into_inner())
    }
}
