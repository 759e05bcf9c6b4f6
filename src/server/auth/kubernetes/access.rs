//! Whether a user may do something, by one `SubjectAccessReview` (`authorization.k8s.io/v1`)
//! per question, answers kept for a short while; and how Dray's verbs and the chart's
//! ClusterRoles line up.

use std::time::Instant;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use crate::api::Verb;

use super::{GROUP, KubeAuth, KubeAuthError};

/// One question for the API server: may `user` (in `groups`) `verb` `resource`/`name` in
/// `namespace` (the project; none for cluster-scoped `projects`)?
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessQuestion {
    /// The user.
    pub user: String,
    /// Their groups, sorted (so that the cache does not care about order).
    pub groups: Vec<String>,
    /// The project.
    pub namespace: Option<String>,
    /// Dray's verb.
    pub verb: Verb,
    /// A kind's plural, e.g. `stages`.
    pub resource: String,
    /// The resource's name; none for "any of them" (and for lists).
    pub name: Option<String>,
}

impl AccessQuestion {
    /// The question, with `groups` sorted.
    pub fn new(
        user: &str,
        groups: &[String],
        namespace: Option<&str>,
        verb: Verb,
        resource: &str,
        name: Option<&str>,
    ) -> Self {
        let mut groups = groups.to_vec();
        groups.sort();
        groups.dedup();
        AccessQuestion {
            user: user.to_owned(),
            groups,
            namespace: namespace.map(str::to_owned),
            verb,
            resource: resource.to_owned(),
            name: name.map(str::to_owned),
        }
    }

    fn review(&self) -> SubjectAccessReview {
        SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(self.user.clone()),
                groups: Some(self.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(GROUP.to_owned()),
                    resource: Some(self.resource.clone()),
                    namespace: self.namespace.clone(),
                    name: self.name.clone(),
                    verb: Some(kubernetes_verb(self.verb).to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// The API server's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// `status.allowed`.
    pub allowed: bool,
    /// `status.reason` (and `status.evaluationError`), possibly empty.
    pub reason: String,
}

impl KubeAuth {
    /// The API server's answer to `question` (or a recent one).
    pub async fn review_access(&self, question: &AccessQuestion) -> Result<Answer, KubeAuthError> {
        if let Some(known) = self.lock_answers().get(question, Instant::now()) {
            return Ok(known);
        }
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &question.review())
            .await
            .map_err(|cause| KubeAuthError::AccessReview {
                user: question.user.clone(),
                verb: kubernetes_verb(question.verb).to_owned(),
                resource: match &question.name {
                    Some(name) => format!("{}/{name}", question.resource),
                    None => question.resource.clone(),
                },
                cause,
            })?;
        let status = reviewed.status.unwrap_or_default();
        let reason = [status.reason, status.evaluation_error]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        let answer = Answer {
            allowed: status.allowed && status.denied != Some(true),
            reason,
        };
        self.lock_answers()
            .insert(question.clone(), answer.clone(), Instant::now());
        Ok(answer)
    }

    fn lock_answers(&self) -> std::sync::MutexGuard<'_, super::TtlCache<AccessQuestion, Answer>> {
        self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The Kubernetes verb a ClusterRole names for Dray's `verb`: the same word. `get`, `list`,
/// `create`, `update` and `delete` are Kubernetes' own; `promote`, `approve`, `override`,
/// `verify`, `signoff` (on `stages`) and `abort` (on `promotions`) are custom verbs, which Kubernetes
/// RBAC matches like any other.
pub fn kubernetes_verb(verb: Verb) -> &'static str {
    verb.as_str()
}

/// The chart's ClusterRole that grants `verb` (the smallest one): `dray-viewer` (get,
/// list), `dray-promoter` (promote, abort), `dray-approver` (approve, override, signoff,
/// reject, freeze), and
/// `dray-project-admin` for everything else.
pub fn cluster_role_for(verb: Verb) -> &'static str {
    match verb {
        Verb::Get | Verb::List => "dray-viewer",
        Verb::Promote | Verb::Abort => "dray-promoter",
        Verb::Approve | Verb::Override | Verb::Signoff | Verb::Reject | Verb::Freeze => {
            "dray-approver"
        }
        Verb::Create | Verb::Update | Verb::Delete | Verb::Verify => "dray-project-admin",
    }
}

/// The `kubectl` command that would let `user` `verb` in `namespace` (a ClusterRole bound by
/// a RoleBinding there; cluster-wide by a ClusterRoleBinding). A ServiceAccount's username
/// (`system:serviceaccount:NS:NAME`) is bound as `--serviceaccount=NS:NAME`.
pub fn rolebinding_hint(user: &str, verb: Verb, namespace: Option<&str>) -> String {
    let role = cluster_role_for(verb);
    let subject = match user.strip_prefix("system:serviceaccount:") {
        Some(account) => format!("--serviceaccount={account}"),
        None => format!("--user={user}"),
    };
    let binding: String = format!("{}-{role}", user.rsplit(':').next().unwrap_or(user))
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    match namespace {
        Some(ns) => format!(
            "ask a cluster admin to bind a role that allows it: `kubectl create rolebinding {binding} --clusterrole={role} {subject} -n {ns}`"
        ),
        None => format!(
            "ask a cluster admin to bind a role that allows it: `kubectl create clusterrolebinding {binding} --clusterrole={role} {subject}`"
        ),
    }
}
