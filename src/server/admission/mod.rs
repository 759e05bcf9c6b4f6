//! The validating admission webhook of Kubernetes mode: `POST /admission/validate` takes an
//! `admission.k8s.io/v1` AdmissionReview from the API server and answers one with the same
//! `uid`, `allowed`, and for a denial a `status {code, reason, message}`. It is how the one
//! door holds for `kubectl create` and every other client of the Kubernetes API: the
//! rules are in [`rules`] (the pipeline's door, put to a review), the shapes in [`review`].
//!
//! [`admission_router`] is its own router, served over HTTPS (`app::tls::serve_tls`) on the
//! port a `ValidatingWebhookConfiguration` names; it needs no authentication of its own
//! (the API server calls it; an answer changes nothing). A body that is not an
//! AdmissionReview is a 400 saying what is wrong. `dryRun` reviews are answered the same
//! way as others: judging writes nothing.

pub mod review;
pub mod rules;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};

use crate::store::Store;

use super::error::ApiError;
use review::{API_VERSION, AdmissionRequest, AdmissionReview, AdmissionReviewOut};

/// The path the webhook configuration's `clientConfig.service.path` names.
pub const VALIDATE_PATH: &str = "/admission/validate";

/// What the webhook needs: the store (to read the Stage and Freight a Promotion names) and
/// Dray's own ServiceAccount's username (e.g. `system:serviceaccount:dray:dray`), whose
/// writes are the promote path's and the controllers'.
#[derive(Clone)]
struct Webhook {
    store: Arc<dyn Store>,
    service_account: Arc<str>,
}

/// The webhook's routes (`POST /admission/validate`).
pub fn admission_router(store: Arc<dyn Store>, service_account: String) -> Router {
    Router::new()
        .route(VALIDATE_PATH, post(validate))
        .with_state(Webhook {
            store,
            service_account: service_account.into(),
        })
}

const REVIEW_HINT: &str = "send an `admission.k8s.io/v1` AdmissionReview with a `request`, as the Kubernetes API server does";

async fn validate(
    State(webhook): State<Webhook>,
    body: Bytes,
) -> Result<Json<AdmissionReviewOut>, ApiError> {
    let review: AdmissionReview = serde_json::from_slice(&body).map_err(|error| {
        ApiError::bad_request(format!("the body is not an AdmissionReview: {error}"))
            .with_hint(REVIEW_HINT)
    })?;
    if review.api_version != API_VERSION || review.kind != "AdmissionReview" {
        return Err(ApiError::bad_request(format!(
            "the body is a `{}` `{}`, not an `{API_VERSION}` `AdmissionReview`",
            review.api_version, review.kind
        ))
        .with_hint("set the webhook's admissionReviewVersions to [v1]"));
    }
    let Some(request) = review.request.filter(|r| !r.is_null()) else {
        return Err(
            ApiError::bad_request("the AdmissionReview has no `request`").with_hint(REVIEW_HINT),
        );
    };
    let request: AdmissionRequest = serde_json::from_value(request).map_err(|error| {
        ApiError::bad_request(format!(
            "the AdmissionReview's `request` is malformed: {error}"
        ))
        .with_hint(REVIEW_HINT)
    })?;
    let denial = rules::judge(webhook.store.as_ref(), &webhook.service_account, &request).await?;
    if let Some(denial) = &denial {
        tracing::info!(
            user = %request.user_info.username,
            operation = ?request.operation,
            resource = %request.resource.resource,
            sub_resource = request.sub_resource.as_deref().unwrap_or(""),
            namespace = request.namespace.as_deref().unwrap_or(""),
            name = %request.name,
            dry_run = request.dry_run.unwrap_or(false),
            reason = %denial.message,
            "admission denied"
        );
    }
    Ok(Json(AdmissionReviewOut::answer(request.uid, denial)))
}
