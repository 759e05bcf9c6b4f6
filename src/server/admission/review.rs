//! The `admission.k8s.io/v1` AdmissionReview as the API server sends and expects it (the
//! Kubernetes documentation, "Dynamic Admission Control": a review with a `request` in,
//! the same `uid` with `allowed` and a `status` out). Only the fields Dray reads are
//! typed; the rest are ignored.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `apiVersion` of every review, in and out.
pub const API_VERSION: &str = "admission.k8s.io/v1";

/// The body the API server POSTs, before its `request` is read (so that a review of
/// another version is named as such rather than as a missing field).
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReview {
    /// `admission.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `AdmissionReview`.
    #[serde(default)]
    pub kind: String,
    /// What is asked: an [`AdmissionRequest`].
    #[serde(default)]
    pub request: Option<Value>,
}

/// `request` of an [`AdmissionReview`].
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Copied into the response.
    pub uid: String,
    /// The object's kind.
    pub kind: GroupVersionKind,
    /// The resource.
    pub resource: GroupVersionResource,
    /// `status`, `scale`, …
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// The object's name (empty on a create with `generateName`).
    #[serde(default)]
    pub name: String,
    /// The object's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// What is done.
    pub operation: AdmissionOperation,
    /// Who does it.
    pub user_info: UserInfo,
    /// The object after the operation (none on a delete).
    #[serde(default)]
    pub object: Option<Value>,
    /// The object before it (updates and deletes).
    #[serde(default)]
    pub old_object: Option<Value>,
    /// A dry run: answered the same way.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// `metav1.GroupVersionKind`.
#[derive(Deserialize, Debug)]
pub struct GroupVersionKind {
    /// `dray.dev` (empty for the core group).
    #[serde(default)]
    pub group: String,
    /// `v1alpha1`.
    #[serde(default)]
    pub version: String,
    /// `Promotion`.
    pub kind: String,
}

/// `metav1.GroupVersionResource`.
#[derive(Deserialize, Debug)]
pub struct GroupVersionResource {
    /// `dray.dev`.
    #[serde(default)]
    pub group: String,
    /// `v1alpha1`.
    #[serde(default)]
    pub version: String,
    /// `promotions`.
    pub resource: String,
}

/// `request.operation`.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum AdmissionOperation {
    /// A create.
    Create,
    /// An update (also of a sub-resource).
    Update,
    /// A delete.
    Delete,
    /// A connect (exec, port-forward, …).
    Connect,
}

/// `request.userInfo` (authentication.k8s.io/v1 UserInfo).
#[derive(Deserialize, Debug, Default)]
pub struct UserInfo {
    /// The user.
    #[serde(default)]
    pub username: String,
    /// Their groups.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// The body answered.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewOut {
    /// `admission.k8s.io/v1`.
    pub api_version: &'static str,
    /// `AdmissionReview`.
    pub kind: &'static str,
    /// The answer.
    pub response: AdmissionResponse,
}

/// `response` of an answered review.
#[derive(Serialize, Debug, PartialEq)]
pub struct AdmissionResponse {
    /// The request's `uid`.
    pub uid: String,
    /// Whether the operation may go ahead.
    pub allowed: bool,
    /// Why not (denials only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

/// `metav1.Status`, as much as a denial says.
#[derive(Serialize, Debug, PartialEq)]
pub struct Status {
    /// An HTTP status code: 403, 405, 409, 422.
    pub code: u16,
    /// `Forbidden`, `MethodNotAllowed`, `Conflict`, `Invalid` (a `metav1.StatusReason`).
    pub reason: &'static str,
    /// What the user reads after `admission webhook "…" denied the request: `.
    pub message: String,
}

/// A denial's code, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The HTTP status code.
    pub code: u16,
    /// The `metav1.StatusReason`.
    pub reason: &'static str,
    /// The message, ending with what to do.
    pub message: String,
}

impl AdmissionReviewOut {
    /// The answer to the review with `uid`: allowed, or denied as `denial` says.
    pub fn answer(uid: String, denial: Option<Denial>) -> Self {
        AdmissionReviewOut {
            api_version: API_VERSION,
            kind: "AdmissionReview",
            response: AdmissionResponse {
                uid,
                allowed: denial.is_none(),
                status: denial.map(|d| Status {
                    code: d.code,
                    reason: d.reason,
                    message: d.message,
                }),
            },
        }
    }
}
