//! Who is calling, and what they may do: [`Caller`] (user, groups, cluster-wide roles)
//! answers RBAC questions from the project's RoleBindings; [`Permissions`] is one read of
//! them for pages that ask about many resources. Authenticating (who the caller is) is the
//! middleware's job, not this module's.
//!
//! Who answers is the caller's [`Authority`]: Dray's own RBAC (the embedded server), or in
//! Kubernetes mode Kubernetes RBAC through SubjectAccessReviews ([`super::kubernetes`]).

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::api::{Actor, Kind, ObjectKey, Role, RoleBinding, SubjectKind, Verb};
use crate::pipeline::door::{AuthorizeError, Authorizer};
use crate::store::{Store, StoreError};

use super::super::error::ApiError;
use super::kubernetes::{AccessQuestion, KubeAuth, rolebinding_hint};
use super::{ANONYMOUS, TOKEN_HINT};

/// Who answers a [`Caller`]'s RBAC questions.
#[derive(Clone, Debug, Default)]
pub enum Authority {
    /// Dray's own Roles, RoleBindings and cluster-wide bindings (the embedded server).
    #[default]
    Dray,
    /// Kubernetes RBAC, by SubjectAccessReview (`dray serve --kubernetes`).
    Kubernetes(Arc<KubeAuth>),
}

impl PartialEq for Authority {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Authority::Dray, Authority::Dray) => true,
            (Authority::Kubernetes(a), Authority::Kubernetes(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Authority {}

/// What the [`Authority`] said.
enum Verdict {
    Allowed,
    /// Not allowed; Kubernetes' reason when it gave one.
    Denied(Option<String>),
}

/// What a Kubernetes-mode [`Permissions`] snapshot asks, once per project: every
/// `(verb, resource)` the web UI's pages check, for any name (see [`Permissions::allows`]).
const SNAPSHOT_QUESTIONS: [(Verb, &str); 15] = [
    (Verb::Get, "stages"),
    (Verb::List, "stages"),
    (Verb::Promote, "stages"),
    (Verb::Approve, "stages"),
    (Verb::Override, "stages"),
    (Verb::Verify, "stages"),
    (Verb::Signoff, "stages"),
    (Verb::Get, "promotions"),
    (Verb::List, "promotions"),
    (Verb::Abort, "promotions"),
    (Verb::Get, "freight"),
    (Verb::List, "freight"),
    (Verb::Reject, "freight"),
    (Verb::Freeze, "stages"),
    (Verb::Freeze, "projects"),
];

/// At most this many more questions a snapshot asks: per Stage of the project, for each
/// verb on `stages` not allowed for every Stage (a Role limited by `resourceNames`).
const SNAPSHOT_NAMED_LIMIT: usize = 48;

/// The authenticated user of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The user's name, recorded as the actor of what they do.
    pub user: String,
    /// The groups the user belongs to.
    pub groups: Vec<String>,
    /// The built-in roles the user holds in every project.
    pub(super) cluster_roles: Vec<String>,
    /// Set under `--auth none`: everything is allowed.
    pub(super) unrestricted: bool,
    /// Who answers RBAC questions.
    pub(super) authority: Authority,
}

impl Caller {
    /// The caller under `--auth none`.
    pub fn anonymous() -> Self {
        Caller {
            user: ANONYMOUS.to_owned(),
            groups: Vec::new(),
            cluster_roles: Vec::new(),
            unrestricted: true,
            authority: Authority::Dray,
        }
    }

    /// A user Kubernetes vouched for (a TokenReview, or an OIDC session in Kubernetes
    /// mode), whose every RBAC question goes to Kubernetes.
    pub fn kubernetes(user: String, groups: Vec<String>, kube: Arc<KubeAuth>) -> Self {
        Caller {
            user,
            groups,
            cluster_roles: Vec::new(),
            unrestricted: false,
            authority: Authority::Kubernetes(kube),
        }
    }

    /// Ok when the caller may `verb` the `resource` (a kind's plural or `tokens`) named
    /// `name` in `project`; otherwise a 403 naming all of them.
    pub async fn authorize(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), ApiError> {
        match self.verdict(store, verb, resource, project, name).await? {
            Verdict::Allowed => Ok(()),
            Verdict::Denied(why) => {
                let (message, hint) = self.denial(verb, resource, project, name, why.as_deref());
                Err(ApiError::forbidden(message).with_hint(hint))
            }
        }
    }

    /// Whether the caller may `verb` the `resource` named `name` in `project`. A Project
    /// (no `project`, `resource` = `projects`) is governed by the bindings inside it too.
    pub async fn may(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> Result<bool, StoreError> {
        let verdict = self.verdict(store, verb, resource, project, name).await?;
        Ok(matches!(verdict, Verdict::Allowed))
    }

    async fn verdict(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> Result<Verdict, StoreError> {
        if self.unrestricted {
            return Ok(Verdict::Allowed);
        }
        if let Authority::Kubernetes(kube) = &self.authority {
            return self
                .ask_kubernetes(kube, verb, resource, project, name)
                .await;
        }
        if self
            .may_by_dray_rbac(store, verb, resource, project, name)
            .await?
        {
            Ok(Verdict::Allowed)
        } else {
            Ok(Verdict::Denied(None))
        }
    }

    /// One SubjectAccessReview (or a recent answer). A Project's own name is its namespace:
    /// RoleBindings in a project's namespace govern the Project, as Dray's do.
    async fn ask_kubernetes(
        &self,
        kube: &KubeAuth,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> Result<Verdict, StoreError> {
        let namespace = match (project, resource) {
            (Some(project), _) => Some(project),
            (None, "projects") => name,
            (None, _) => None,
        };
        let question =
            AccessQuestion::new(&self.user, &self.groups, namespace, verb, resource, name);
        match kube.review_access(&question).await {
            Ok(answer) if answer.allowed => Ok(Verdict::Allowed),
            Ok(answer) => Ok(Verdict::Denied(Some(answer.reason))),
            Err(error) => {
                tracing::warn!(%error, "cannot authorize with Kubernetes");
                Err(error.into_store_error())
            }
        }
    }

    async fn may_by_dray_rbac(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> Result<bool, StoreError> {
        if self.cluster_allows(verb, resource, name) {
            return Ok(true);
        }
        let scope = match (project, resource) {
            (Some(project), _) => project,
            (None, "projects") => match name {
                Some(name) => name,
                None => return Ok(false),
            },
            (None, _) => return Ok(false),
        };
        let roles = self.bound_roles(store, scope).await?;
        Ok(roles
            .iter()
            .any(|role| role_allows(role, verb, resource, name)))
    }

    /// Everything the caller may do in `project`, read once (one list of RoleBindings, and
    /// the project's own Roles they name), for pages that ask about many resources: the
    /// UI asks it per Stage, which [`Caller::may`] would answer with a query each.
    pub async fn permissions(
        &self,
        store: &dyn Store,
        project: &str,
    ) -> Result<Permissions, ApiError> {
        let mut answers = Vec::new();
        let mut named = Vec::new();
        let roles = match &self.authority {
            _ if self.unrestricted => Vec::new(),
            Authority::Dray => self.bound_roles(store, project).await?,
            Authority::Kubernetes(kube) => {
                let asked = SNAPSHOT_QUESTIONS
                    .iter()
                    .map(|&(verb, resource)| async move {
                        let verdict = self
                            .ask_kubernetes(kube, verb, resource, Some(project), None)
                            .await?;
                        Ok::<_, StoreError>((verb, resource, matches!(verdict, Verdict::Allowed)))
                    });
                answers = futures::future::try_join_all(asked).await?;
                named = self.ask_per_stage(kube, store, project, &answers).await?;
                Vec::new()
            }
        };
        Ok(Permissions {
            caller: self.clone(),
            project: project.to_owned(),
            roles,
            answers,
            named,
        })
    }

    /// For each verb on `stages` that `answers` does not allow for every Stage: whether it
    /// is allowed for each Stage of `project` (at most [`SNAPSHOT_NAMED_LIMIT`] questions).
    async fn ask_per_stage(
        &self,
        kube: &KubeAuth,
        store: &dyn Store,
        project: &str,
        answers: &[(Verb, &'static str, bool)],
    ) -> Result<Vec<(Verb, &'static str, String, bool)>, StoreError> {
        let denied: Vec<Verb> = answers
            .iter()
            .filter(|&&(verb, resource, allowed)| {
                resource == "stages" && !allowed && verb != Verb::List
            })
            .map(|&(verb, _, _)| verb)
            .collect();
        if denied.is_empty() {
            return Ok(Vec::new());
        }
        let stages = store.list(Kind::Stage, Some(project)).await?;
        let questions: Vec<(Verb, String)> = stages
            .iter()
            .flat_map(|stage| denied.iter().map(|&verb| (verb, stage.key.name.clone())))
            .take(SNAPSHOT_NAMED_LIMIT)
            .collect();
        let asked = questions.into_iter().map(|(verb, name)| async move {
            let verdict = self
                .ask_kubernetes(kube, verb, "stages", Some(project), Some(&name))
                .await?;
            Ok::<_, StoreError>((verb, "stages", name, matches!(verdict, Verdict::Allowed)))
        });
        futures::future::try_join_all(asked).await
    }

    fn cluster_allows(&self, verb: Verb, resource: &str, name: Option<&str>) -> bool {
        self.cluster_roles
            .iter()
            .filter_map(|name| Role::builtin(name))
            .any(|role| role_allows(&role, verb, resource, name))
    }

    /// The roles RoleBindings of `scope` give the caller (built-in or the project's own).
    async fn bound_roles(&self, store: &dyn Store, scope: &str) -> Result<Vec<Role>, StoreError> {
        let mut roles = Vec::new();
        for stored in store.list(Kind::RoleBinding, Some(scope)).await? {
            let Ok(binding) = stored.to_typed::<RoleBinding>() else {
                continue;
            };
            if !binding
                .spec
                .subjects
                .iter()
                .any(|s| self.is(s.kind, &s.name))
            {
                continue;
            }
            let role_name = &binding.spec.role_ref.name;
            let role = match Role::builtin(role_name) {
                Some(role) => Some(role),
                None => {
                    let key = ObjectKey::namespaced(Kind::Role, scope, role_name);
                    store
                        .get(&key)
                        .await?
                        .and_then(|r| r.to_typed::<Role>().ok())
                }
            };
            roles.extend(role);
        }
        Ok(roles)
    }

    /// The sentence a refusal says: ``user `vic` may not promote stages/staging``.
    pub fn refusal(&self, verb: Verb, resource: &str, name: Option<&str>) -> String {
        let what = match name {
            Some(name) => format!("{resource}/{name}"),
            None => resource.to_owned(),
        };
        format!("user `{}` may not {verb} {what}", self.user)
    }

    fn is(&self, kind: SubjectKind, name: &str) -> bool {
        match kind {
            SubjectKind::User => self.user == name,
            SubjectKind::Group => self.groups.iter().any(|g| g == name),
        }
    }

    /// What a refusal says, and what to do about it; logged. `why` is Kubernetes' reason
    /// (Kubernetes mode only).
    fn denial(
        &self,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
        why: Option<&str>,
    ) -> (String, String) {
        let what = match name {
            Some(name) => format!("{resource}/{name}"),
            None => resource.to_owned(),
        };
        if let Authority::Kubernetes(_) = self.authority {
            let place = project
                .map(|p| format!(" in project `{p}`"))
                .unwrap_or_default();
            let why = why
                .filter(|w| !w.is_empty())
                .unwrap_or("no RoleBinding or ClusterRoleBinding allows it");
            tracing::info!(user = %self.user, %verb, resource = %what, project = project.unwrap_or(""), reason = %why, "forbidden by Kubernetes RBAC");
            let namespace = project.or(if resource == "projects" { name } else { None });
            return (
                format!(
                    "{}{place} (Kubernetes RBAC: {why})",
                    self.refusal(verb, resource, name)
                ),
                rolebinding_hint(&self.user, verb, namespace),
            );
        }
        let (place, hint) = match project {
            Some(project) => (
                format!(" in project `{project}`"),
                format!(
                    "ask an admin for a RoleBinding in project `{project}` whose role allows `{verb}` on `{resource}`; `dray get rolebindings -p {project}` lists the bindings"
                ),
            ),
            None => (
                String::new(),
                "this needs a cluster-wide role such as `dray-admin`; ask an admin".to_owned(),
            ),
        };
        tracing::info!(user = %self.user, %verb, resource = %what, project = project.unwrap_or(""), "forbidden");
        (
            format!("{}{place}", self.refusal(verb, resource, name)),
            hint,
        )
    }
}

/// The promote path asks the authenticated caller, and records them as the actor.
#[async_trait::async_trait]
impl Authorizer for Caller {
    fn actor(&self) -> Actor {
        Actor::Person(self.user.clone())
    }

    fn groups(&self) -> Vec<String> {
        self.groups.clone()
    }

    async fn authorize(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: &str,
        name: &str,
    ) -> Result<(), AuthorizeError> {
        let verdict = self
            .verdict(store, verb, resource, Some(project), Some(name))
            .await?;
        let Verdict::Denied(why) = verdict else {
            return Ok(());
        };
        let (message, hint) =
            self.denial(verb, resource, Some(project), Some(name), why.as_deref());
        Err(AuthorizeError::Denied { message, hint })
    }
}

fn role_allows(role: &Role, verb: Verb, resource: &str, name: Option<&str>) -> bool {
    role.spec
        .rules
        .iter()
        .any(|r| r.allows(verb, resource, name))
}

/// What a [`Caller`] may do in one project, from [`Caller::permissions`]; answers without
/// touching the store (or, in Kubernetes mode, the API server).
#[derive(Clone, Debug)]
pub struct Permissions {
    caller: Caller,
    project: String,
    roles: Vec<Role>,
    /// Kubernetes mode: the answers to [`SNAPSHOT_QUESTIONS`], for any name.
    answers: Vec<(Verb, &'static str, bool)>,
    /// Kubernetes mode: answers for one Stage each, where `answers` said no.
    named: Vec<(Verb, &'static str, String, bool)>,
}

impl Permissions {
    /// Whether the caller may `verb` the `resource` named `name` in this project. In
    /// Kubernetes mode the snapshot asked for any name, then per Stage where that was no
    /// (up to a limit): a Stage past the limit, or another kind's Role limited by
    /// `resourceNames`, shows as not allowed here (the route itself asks about the name and
    /// lets them in), and a `(verb, resource)` not in the snapshot is not allowed.
    pub fn allows(&self, verb: Verb, resource: &str, name: Option<&str>) -> bool {
        if let Authority::Kubernetes(_) = self.caller.authority {
            let for_any = self
                .answers
                .iter()
                .any(|&(v, r, allowed)| allowed && v == verb && r == resource);
            let for_this = name.is_some_and(|name| {
                self.named
                    .iter()
                    .any(|(v, r, n, allowed)| *allowed && *v == verb && *r == resource && n == name)
            });
            return self.caller.unrestricted || for_any || for_this;
        }
        self.caller.unrestricted
            || self.caller.cluster_allows(verb, resource, name)
            || self
                .roles
                .iter()
                .any(|role| role_allows(role, verb, resource, name))
    }

    /// `None` when allowed; otherwise why not, as a sentence naming user, verb and resource.
    pub fn refusal(&self, verb: Verb, resource: &str, name: Option<&str>) -> Option<String> {
        (!self.allows(verb, resource, name)).then(|| self.caller.refusal(verb, resource, name))
    }

    /// The project these permissions are for.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// Who.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            ApiError::unauthenticated("this request was not authenticated").with_hint(TOKEN_HINT)
        })
    }
}
