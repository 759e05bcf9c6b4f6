//! Who is calling, and what they may do: [`Caller`] (user, groups, cluster-wide roles)
//! answers RBAC questions from the project's RoleBindings; [`Permissions`] is one read of
//! them for pages that ask about many resources. Authenticating (who the caller is) is the
//! middleware's job, not this module's.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::api::{Actor, Kind, ObjectKey, Role, RoleBinding, SubjectKind, Verb};
use crate::pipeline::door::{AuthorizeError, Authorizer};
use crate::store::{Store, StoreError};

use super::super::error::ApiError;
use super::{ANONYMOUS, TOKEN_HINT};

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
}

impl Caller {
    /// The caller under `--auth none`.
    pub fn anonymous() -> Self {
        Caller {
            user: ANONYMOUS.to_owned(),
            groups: Vec::new(),
            cluster_roles: Vec::new(),
            unrestricted: true,
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
        if self.may(store, verb, resource, project, name).await? {
            return Ok(());
        }
        Err(self.forbidden(verb, resource, project, name))
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
        if self.unrestricted || self.cluster_allows(verb, resource, name) {
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
        let roles = if self.unrestricted {
            Vec::new()
        } else {
            self.bound_roles(store, project).await?
        };
        Ok(Permissions {
            caller: self.clone(),
            project: project.to_owned(),
            roles,
        })
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

    fn forbidden(
        &self,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> ApiError {
        let (message, hint) = self.denial(verb, resource, project, name);
        ApiError::forbidden(message).with_hint(hint)
    }

    /// What a refusal says, and what to do about it; logged.
    fn denial(
        &self,
        verb: Verb,
        resource: &str,
        project: Option<&str>,
        name: Option<&str>,
    ) -> (String, String) {
        let what = match name {
            Some(name) => format!("{resource}/{name}"),
            None => resource.to_owned(),
        };
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

    async fn authorize(
        &self,
        store: &dyn Store,
        verb: Verb,
        resource: &str,
        project: &str,
        name: &str,
    ) -> Result<(), AuthorizeError> {
        if self
            .may(store, verb, resource, Some(project), Some(name))
            .await?
        {
            return Ok(());
        }
        let (message, hint) = self.denial(verb, resource, Some(project), Some(name));
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
/// touching the store.
#[derive(Clone, Debug)]
pub struct Permissions {
    caller: Caller,
    project: String,
    roles: Vec<Role>,
}

impl Permissions {
    /// Whether the caller may `verb` the `resource` named `name` in this project.
    pub fn allows(&self, verb: Verb, resource: &str, name: Option<&str>) -> bool {
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
