//! API tokens: making one (`POST /api/v1/tokens`, behind `dray token create`) with the
//! role binding that goes with it, listing them with what their users may do where (`GET
//! /api/v1/tokens`, never a secret or hash), listing the cluster-wide bindings (`GET
//! /api/v1/clusterrolebindings`), revoking one by id (`DELETE /api/v1/tokens/{id}`), and the
//! bootstrap token of a new data directory (or of `dray serve --reset-admin`).
//!
//! Revoking the last working token that gives `dray-admin` in every project is refused:
//! nobody could make tokens or bind roles any more. Revoking the bootstrap token removes
//! `<data-dir>/bootstrap-token` when it holds that token, so the file never holds a token
//! that no longer works.
//!
//! Listing needs `list` on `tokens` and revoking `delete` on `tokens` (cluster-wide), except
//! for the caller's own tokens, which they may always list and revoke. A revoked token is
//! refused from the next request on, web UI sessions made with it included (they re-resolve
//! the token on every request).
//!
//! A token is `dray_` and 32 random bytes in unpadded base64url. It is shown once; the
//! store keeps only its SHA-256 ([`hash`]). Tokens never reach the log: routes log the
//! user, never the token, and the HTTP trace layer does not record headers.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use dray_steps::duration::{self, DurationError, Units};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::api::{
    API_VERSION, BUILTIN_ROLES, Kind, ObjectKey, RoleBinding, Subject, SubjectKind,
    TOKENS_RESOURCE, Verb,
};
use crate::store::{
    BOOTSTRAP_CREATOR, ClusterBinding, Store, StoreError, TokenDetails, TokenInfo, TokenRecord,
    TokenStore,
};

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;

/// The file in the data directory that holds the bootstrap token (mode 0600).
pub const BOOTSTRAP_TOKEN_FILE: &str = "bootstrap-token";

/// The user the bootstrap token authenticates as.
pub const BOOTSTRAP_USER: &str = "admin";

/// What every token starts with, so that secret scanners can find leaked ones.
const TOKEN_PREFIX: &str = "dray_";

/// The body of `POST /api/v1/tokens`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequest {
    /// The user the token authenticates as.
    pub user: String,
    /// The role bound to the user: built in, or a Role of `project`.
    pub role: String,
    /// The project the binding is in; cluster-wide (every project) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Groups the user belongs to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// What the token is for, shown when tokens are listed (at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How long the token works, e.g. `30d`, `12h`, `90m` (see [`parse_lifetime`]);
    /// forever when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<String>,
}

/// The answer of `POST /api/v1/tokens`: the token, shown this once.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct TokenResponse {
    /// The token.
    pub token: String,
    /// Its stable id, for `dray token list` and `dray token revoke`.
    #[serde(default)]
    pub id: String,
    /// When it stops working, if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The user it authenticates as.
    pub user: String,
    /// The role bound to the user.
    pub role: String,
    /// The project of the binding; none for a cluster-wide one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The RoleBinding's name, for a binding in a project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
}

/// The answer of `GET /api/v1/tokens`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TokenList {
    /// The tokens the caller may see, oldest first: all of them with `list` on `tokens`,
    /// otherwise their own.
    pub items: Vec<ListedToken>,
}

/// A token as listed: what may be shown about it, and what its user may do where.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ListedToken {
    /// The token's id, user, creator, expiry…
    #[serde(flatten)]
    pub info: TokenInfo,
    /// The roles the token's user holds (directly or through its groups), each with its
    /// scope: every project (a cluster-wide binding) or one project (a RoleBinding).
    #[serde(default)]
    pub grants: Vec<Grant>,
}

/// A role someone holds, and where.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// The role: built in, or a Role of `project`.
    pub role: String,
    /// The project of the RoleBinding; none for a cluster-wide binding (every project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

/// The answer of `GET /api/v1/clusterrolebindings`: the bindings that hold in every
/// project (made by `dray token create --all-projects` and the bootstrap token).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ClusterBindingList {
    /// By role, then users before groups, then name.
    pub items: Vec<ListedClusterBinding>,
}

/// One cluster-wide binding.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ListedClusterBinding {
    /// `User` or `Group`.
    pub kind: SubjectKind,
    /// The user or group.
    pub name: String,
    /// The built-in role it holds in every project.
    pub role: String,
}

/// The answer of `DELETE /api/v1/tokens/{id}`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct RevokeResponse {
    /// The token that no longer works.
    pub revoked: TokenInfo,
    /// Something the caller should know, e.g. that the bootstrap token is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The longest lifetime `expiresIn` may ask for: ten years.
const MAX_LIFETIME_SECS: i64 = 10 * 366 * 86_400;

/// What a wrong `expiresIn` is told.
pub const LIFETIME_HINT: &str = "give a whole number and a unit: `s`, `m`, `h`, `d` or `w`, e.g. `30d` or `12h` (at most 10 years)";

/// A token lifetime like `30d`: a duration read by the one duration parser
/// ([`dray_steps::duration`]) with weeks allowed (`2w`), in whole seconds, from one second
/// to ten years. The error says what is wrong.
pub fn parse_lifetime(text: &str) -> Result<jiff::SignedDuration, String> {
    let text = text.trim();
    let lifetime = duration::parse_with(text, Units::WithWeeks).map_err(|e| match e {
        DurationError::Malformed(_) => format!("`{text}` is not a lifetime"),
        DurationError::TooLong(_) => out_of_range(text),
    })?;
    let secs = i64::try_from(lifetime.as_secs()).map_err(|_| out_of_range(text))?;
    if secs <= 0 || secs > MAX_LIFETIME_SECS {
        return Err(out_of_range(text));
    }
    Ok(jiff::SignedDuration::from_secs(secs))
}

fn out_of_range(text: &str) -> String {
    format!("`{text}` is not a lifetime between 1s and 10 years")
}

/// A new random token.
pub fn generate() -> String {
    let mut secret = [0u8; 32];
    OsRng.fill_bytes(&mut secret);
    format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(secret))
}

/// What the store keeps of a token: its SHA-256 in lowercase hex.
pub fn hash(token: &str) -> String {
    format!("{:x}", Sha256::digest(token.as_bytes()))
}

/// Now, to the second, in RFC 3339.
pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string()
}

/// A user or group name: letters, digits and `.`, `_`, `@`, `+`, `-`, at most 253.
fn check_subject(what: &str, name: &str) -> Result<(), ApiError> {
    if name == super::auth::ANONYMOUS {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            format!("`{name}` is reserved: it is who acts under `dray serve --auth none`, and the record must not confuse a person with it"),
        )
        .with_hint("choose the person's own name, e.g. `ann` or `ann@example.com`"));
    }
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._@+-".contains(c));
    if valid {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid",
        format!("`{name}` is not a valid {what} name"),
    )
    .with_hint(
        "use letters, digits and `.`, `_`, `@`, `+`, `-`, starting with a letter or digit, e.g. `ann` or `ann@example.com`",
    ))
}

/// The RoleBinding a token's role goes into: `<role>-<user>`, as a valid resource name.
fn binding_name(role: &str, user: &str) -> String {
    let mut name = String::new();
    for c in format!("{role}-{user}").chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && name.ends_with('-')) {
            name.push(c);
        }
    }
    name.truncate(63);
    name.trim_matches('-').to_owned()
}

/// `POST /api/v1/tokens`: makes a token for a user and binds the role to them.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Json(request): Json<TokenRequest>,
) -> Result<(StatusCode, Json<TokenResponse>), ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::Create,
            TOKENS_RESOURCE,
            None,
            None,
        )
        .await?;
    check_subject("user", &request.user)?;
    for group in &request.groups {
        check_subject("group", group)?;
    }
    let description = check_description(request.description.as_deref())?;
    let expires_at = match request.expires_in.as_deref() {
        None => None,
        Some(text) => {
            let lifetime = parse_lifetime(text).map_err(|message| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid",
                    format!("expiresIn: {message}"),
                )
                .with_hint(LIFETIME_HINT)
            })?;
            let now = jiff::Timestamp::now()
                .round(jiff::Unit::Second)
                .unwrap_or_else(|_| jiff::Timestamp::now());
            let at = now.checked_add(lifetime).map_err(ApiError::internal)?;
            Some(at.to_string())
        }
    };
    let builtin = BUILTIN_ROLES.contains(&request.role.as_str());
    let (cluster, binding) = match &request.project {
        None if !builtin => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!(
                    "a cluster-wide binding takes a built-in role, not `{}`",
                    request.role
                ),
            )
            .with_hint(format!(
                "{}use one of {}, or pass -p PROJECT to bind a Role of that project",
                crate::api::suggest::closest(&request.role, BUILTIN_ROLES)
                    .map(|m| format!("did you mean `{m}`? "))
                    .unwrap_or_default(),
                BUILTIN_ROLES.map(|r| format!("`{r}`")).join(", ")
            )));
        }
        None => (
            Some(ClusterBinding {
                kind: SubjectKind::User,
                name: request.user.clone(),
                role: request.role.clone(),
            }),
            None,
        ),
        Some(project) => {
            let name = bind_in_project(state.store.as_ref(), project, &request).await?;
            (None, Some(name))
        }
    };
    let token = generate();
    let record = TokenRecord {
        hash: hash(&token),
        user: request.user.clone(),
        groups: request.groups.clone(),
        created_at: now(),
    };
    let details = TokenDetails {
        created_by: Some(caller.user.clone()),
        description,
        expires_at: expires_at.clone(),
    };
    let id = state
        .auth
        .tokens
        .add_token(record, details, cluster)
        .await?;
    tracing::info!(
        token = %id,
        user = %request.user,
        role = %request.role,
        project = request.project.as_deref().unwrap_or("*"),
        by = %caller.user,
        "API token created"
    );
    Ok((
        StatusCode::CREATED,
        Json(TokenResponse {
            token,
            id,
            expires_at,
            user: request.user,
            role: request.role,
            project: request.project,
            binding,
        }),
    ))
}

/// A description: trimmed, none when blank, at most 200 characters without control ones.
fn check_description(description: Option<&str>) -> Result<Option<String>, ApiError> {
    let Some(text) = description.map(str::trim).filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    if text.chars().count() > 200 || text.chars().any(char::is_control) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            "the token's description must be one line of at most 200 characters",
        )
        .with_hint("shorten it, e.g. `--description \"CI deploys of demo\"`"));
    }
    Ok(Some(text.to_owned()))
}

/// `GET /api/v1/tokens`: every token with `list` on `tokens`, otherwise the caller's own;
/// never a token or its hash.
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<TokenList>, ApiError> {
    let all = caller
        .may(
            state.store.as_ref(),
            Verb::List,
            TOKENS_RESOURCE,
            None,
            None,
        )
        .await?;
    let user = (!all).then_some(caller.user.as_str());
    let tokens = state.auth.tokens.list_tokens(user).await?;
    let bindings = state.store.list(Kind::RoleBinding, None).await?;
    let bindings: Vec<(String, RoleBinding)> = bindings
        .into_iter()
        .map(|b| {
            let project = b.key.namespace.clone().unwrap_or_default();
            b.to_typed::<RoleBinding>().map(|typed| (project, typed))
        })
        .collect::<Result<_, _>>()?;
    let mut items = Vec::with_capacity(tokens.len());
    for info in tokens {
        let mut grants: Vec<Grant> = state
            .auth
            .tokens
            .cluster_roles(&info.user, &info.groups)
            .await?
            .into_iter()
            .map(|role| Grant {
                role,
                project: None,
            })
            .collect();
        for (project, binding) in &bindings {
            let applies = binding.spec.subjects.iter().any(|s| match s.kind {
                SubjectKind::User => s.name == info.user,
                SubjectKind::Group => info.groups.contains(&s.name),
            });
            let grant = Grant {
                role: binding.spec.role_ref.name.clone(),
                project: Some(project.clone()),
            };
            if applies && !grants.contains(&grant) {
                grants.push(grant);
            }
        }
        items.push(ListedToken { info, grants });
    }
    Ok(Json(TokenList { items }))
}

/// `GET /api/v1/clusterrolebindings`: every cluster-wide binding (who holds which built-in
/// role in every project). Needs `list` on `tokens`, like listing everyone's tokens.
pub(crate) async fn list_cluster_bindings(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<ClusterBindingList>, ApiError> {
    caller
        .authorize(
            state.store.as_ref(),
            Verb::List,
            TOKENS_RESOURCE,
            None,
            None,
        )
        .await?;
    let items = state
        .auth
        .tokens
        .cluster_bindings()
        .await?
        .into_iter()
        .map(|b| ListedClusterBinding {
            kind: b.kind,
            name: b.name,
            role: b.role,
        })
        .collect();
    Ok(Json(ClusterBindingList { items }))
}

/// `DELETE /api/v1/tokens/{id}`: revokes a token at once. The caller's own tokens always;
/// others' with `delete` on `tokens`. Revoking the bootstrap token warns.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<RevokeResponse>, ApiError> {
    let found = state.auth.tokens.token_by_id(&id).await?;
    let own = found.as_ref().is_some_and(|t| t.user == caller.user);
    if !own {
        // Asked before saying whether it exists: ids are not to be probed.
        caller
            .authorize(
                state.store.as_ref(),
                Verb::Delete,
                TOKENS_RESOURCE,
                None,
                Some(&id),
            )
            .await?;
    }
    let Some(token) = found else {
        return Err(ApiError::not_found(format!("there is no API token `{id}`"))
            .with_hint("run `dray token list` to see the tokens and their ids"));
    };
    let tokens = state.auth.tokens.as_ref();
    if gives_admin(tokens, &token).await? && !admin_left_without(tokens, &id).await? {
        return Err(ApiError::conflict(format!(
            "API token `{id}` of user `{}` is the last one with role `{ADMIN_ROLE}` in every project: revoking it would leave no one able to administer Dray (make tokens, bind roles)",
            token.user
        ))
        .with_hint(format!(
            "make another admin token first (`dray token create --user NAME --role {ADMIN_ROLE} --all-projects`), then revoke this one; if every admin token is lost, stop the server and run `dray serve --data-dir DIR --reset-admin`"
        )));
    }
    // The bootstrap file must never hold a token that no longer works.
    let bootstrap_file = state
        .auth
        .bootstrap_file
        .as_deref()
        .filter(|_| token.bootstrap);
    let file_holds_it = match bootstrap_file {
        Some(path) => file_holds_token(tokens, path, &id).await?,
        None => false,
    };
    if !state.auth.tokens.revoke_token(&id).await? {
        return Err(ApiError::not_found(format!("there is no API token `{id}`"))
            .with_hint("it was revoked meanwhile; run `dray token list` to see the tokens"));
    }
    tracing::info!(token = %id, user = %token.user, by = %caller.user, "API token revoked");
    let mut removed_file = None;
    if let (true, Some(path)) = (file_holds_it, bootstrap_file) {
        match std::fs::remove_file(path) {
            Ok(()) => {
                tracing::info!(token = %id, file = %path.display(), "removed the revoked bootstrap token's file");
                removed_file = Some(path.display().to_string());
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(token = %id, file = %path.display(), %error, "cannot remove the revoked bootstrap token's file");
            }
        }
    }
    let warning = token.bootstrap.then(|| {
        let file = removed_file
            .map(|path| format!(" (`{path}` is removed)"))
            .unwrap_or_default();
        format!(
            "`{id}` was the bootstrap token of user `{}`; it no longer works{file}. Administer Dray with another token with role `{ADMIN_ROLE}` in every project (`dray token create --user NAME --role {ADMIN_ROLE} --all-projects`); if every admin token is lost, `dray serve --data-dir DIR --reset-admin` writes a new one",
            token.user
        )
    });
    Ok(Json(RevokeResponse {
        revoked: token,
        warning,
    }))
}

/// The built-in role that administers Dray (makes tokens, binds roles).
const ADMIN_ROLE: &str = "dray-admin";

/// Whether `token` works now and its user holds `dray-admin` in every project.
async fn gives_admin(tokens: &dyn TokenStore, token: &TokenInfo) -> Result<bool, StoreError> {
    if token.expired(jiff::Timestamp::now()).is_some() {
        return Ok(false);
    }
    let roles = tokens.cluster_roles(&token.user, &token.groups).await?;
    Ok(roles.iter().any(|r| r == ADMIN_ROLE))
}

/// Whether a token other than `id` works now and gives `dray-admin` in every project.
async fn admin_left_without(tokens: &dyn TokenStore, id: &str) -> Result<bool, StoreError> {
    for other in tokens.list_tokens(None).await? {
        if other.id != id && gives_admin(tokens, &other).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the bootstrap file at `path` holds the token with id `id` (never read into a
/// log or an answer: only its hash is compared).
async fn file_holds_token(
    tokens: &dyn TokenStore,
    path: &Path,
    id: &str,
) -> Result<bool, StoreError> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(false);
    };
    let held = tokens.token_info(&hash(text.trim())).await?;
    Ok(held.is_some_and(|t| t.id == id))
}

/// Gives `request.role` to `request.user` in `project` with a RoleBinding (made, or
/// extended by the user); returns the binding's name.
async fn bind_in_project(
    store: &dyn Store,
    project: &str,
    request: &TokenRequest,
) -> Result<String, ApiError> {
    if store
        .get(&ObjectKey::cluster(Kind::Project, project))
        .await?
        .is_none()
    {
        return Err(
            ApiError::missing_from(store, &ObjectKey::cluster(Kind::Project, project)).await,
        );
    }
    let role = &request.role;
    if !BUILTIN_ROLES.contains(&role.as_str())
        && store
            .get(&ObjectKey::namespaced(Kind::Role, project, role))
            .await?
            .is_none()
    {
        let roles = store.list(Kind::Role, Some(project)).await?;
        let known = BUILTIN_ROLES
            .iter()
            .copied()
            .chain(roles.iter().map(|r| r.key.name.as_str()));
        let meant = crate::api::suggest::closest(role, known)
            .map(|m| format!("; did you mean `{m}`?"))
            .unwrap_or_default();
        return Err(ApiError::not_found(format!(
            "role `{role}` is neither built in nor a Role in project `{project}`{meant}"
        ))
        .with_hint(format!(
            "run `dray get roles -p {project}` to list the roles, built-in ones included"
        )));
    }
    let name = binding_name(role, &request.user);
    let subject = Subject {
        kind: SubjectKind::User,
        name: request.user.clone(),
    };
    let key = ObjectKey::namespaced(Kind::RoleBinding, project, &name);
    for _ in 0..5 {
        let result = match store.get(&key).await? {
            None => {
                let object = json!({
                    "apiVersion": API_VERSION,
                    "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": project},
                    "roleRef": {"name": role},
                    "subjects": [subject],
                });
                store.create(object).await
            }
            Some(current) => {
                let mut binding: RoleBinding = current.to_typed()?;
                if &binding.spec.role_ref.name != role {
                    return Err(ApiError::conflict(format!(
                        "RoleBinding `{name}` in project `{project}` gives role `{}`, not `{role}`",
                        binding.spec.role_ref.name
                    ))
                    .with_hint("rename or delete that RoleBinding, then create the token again"));
                }
                if binding.spec.subjects.contains(&subject) {
                    return Ok(name);
                }
                binding.spec.subjects.push(subject.clone());
                let mut object = serde_json::to_value(&binding).map_err(ApiError::internal)?;
                object["metadata"]["resourceVersion"] = json!(current.resource_version.to_string());
                store.update(object).await
            }
        };
        match result {
            Ok(_) => return Ok(name),
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists(_)) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(ApiError::conflict(format!(
        "RoleBinding `{name}` in project `{project}` kept changing"
    ))
    .with_hint("try again"))
}

/// On a data directory without tokens, makes one for `admin` with `dray-admin` in every
/// project, and writes it to `<data_dir>/bootstrap-token` (mode 0600). Returns the token
/// and the file, or `None` when tokens exist already.
pub async fn bootstrap(
    tokens: &dyn TokenStore,
    data_dir: &Path,
) -> anyhow::Result<Option<(String, PathBuf)>> {
    if tokens.has_tokens().await? {
        return Ok(None);
    }
    write_admin_token(tokens, data_dir, "the bootstrap token")
        .await
        .map(Some)
}

/// The recovery of `dray serve --reset-admin`: makes a new token for `admin` with
/// `dray-admin` in every project and writes it to `<data_dir>/bootstrap-token` (mode
/// 0600), whatever tokens exist; revokes nothing. Returns the token's id and the file.
pub async fn reset_admin(
    tokens: &dyn TokenStore,
    data_dir: &Path,
) -> anyhow::Result<(String, PathBuf)> {
    let (token, path) = write_admin_token(
        tokens,
        data_dir,
        "the bootstrap token made by --reset-admin",
    )
    .await?;
    let id = tokens
        .token_info(&hash(&token))
        .await?
        .map(|t| t.id)
        .unwrap_or_default();
    Ok((id, path))
}

/// Writes a new `admin` token to `<data_dir>/bootstrap-token` (replacing the file) and
/// stores it with `dray-admin` in every project, marked as the bootstrap token.
async fn write_admin_token(
    tokens: &dyn TokenStore,
    data_dir: &Path,
    what: &str,
) -> anyhow::Result<(String, PathBuf)> {
    let token = generate();
    let path = data_dir.join(BOOTSTRAP_TOKEN_FILE);
    // The file first: if storing fails, the next start makes a new token and file.
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => anyhow::bail!("cannot replace `{}`: {error}", path.display()),
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| {
            file.write_all(format!("{token}\n").as_bytes())?;
            file.sync_all()
        });
    if let Err(error) = written {
        anyhow::bail!("cannot write `{}`: {error}", path.display());
    }
    let record = TokenRecord {
        hash: hash(&token),
        user: BOOTSTRAP_USER.to_owned(),
        groups: Vec::new(),
        created_at: now(),
    };
    let binding = ClusterBinding {
        kind: SubjectKind::User,
        name: BOOTSTRAP_USER.to_owned(),
        role: ADMIN_ROLE.to_owned(),
    };
    let details = TokenDetails {
        created_by: Some(BOOTSTRAP_CREATOR.to_owned()),
        description: Some(format!("{what}, written to {}", path.display())),
        expires_at: None,
    };
    tokens.add_token(record, details, Some(binding)).await?;
    Ok((token, path))
}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod route_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_prefixed_and_hashed() {
        let (a, b) = (generate(), generate());
        assert_ne!(a, b);
        assert!(a.starts_with("dray_") && a.len() == 5 + 43, "{a}");
        assert_eq!(hash(&a).len(), 64);
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
    }

    #[test]
    fn lifetimes_take_a_number_and_a_unit() {
        assert_eq!(parse_lifetime("30d").unwrap().as_secs(), 30 * 86_400);
        assert_eq!(parse_lifetime("12h").unwrap().as_secs(), 12 * 3_600);
        assert_eq!(parse_lifetime("2w").unwrap().as_secs(), 14 * 86_400);
        for wrong in [
            "",
            "30",
            "d",
            "0d",
            "-1d",
            "1y",
            "30 d",
            "99999999999999999999d",
            "3651w",
        ] {
            assert!(parse_lifetime(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn binding_names_are_valid_resource_names() {
        assert_eq!(binding_name("dray-viewer", "ann"), "dray-viewer-ann");
        assert_eq!(
            binding_name("deployer", "Ann.B@example.com"),
            "deployer-ann-b-example-com"
        );
    }

    #[tokio::test]
    async fn bootstrap_happens_once_into_a_private_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::SqliteStore::open(dir.path()).unwrap();
        let (token, path) = bootstrap(&store, dir.path()).await.unwrap().unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(written.trim(), token);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let record = store.token(&hash(&token)).await.unwrap().unwrap();
        assert_eq!(record.user, "admin");
        let info = store.token_info(&hash(&token)).await.unwrap().unwrap();
        assert!(info.bootstrap, "{info:?}");
        assert!(bootstrap(&store, dir.path()).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn reset_admin_writes_a_new_admin_token_and_revokes_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::SqliteStore::open(dir.path()).unwrap();
        let (old, path) = bootstrap(&store, dir.path()).await.unwrap().unwrap();
        std::fs::remove_file(&path).unwrap();
        let (id, written) = reset_admin(&store, dir.path()).await.unwrap();
        assert_eq!(written, path);
        let new = std::fs::read_to_string(&path).unwrap().trim().to_owned();
        assert_ne!(new, old);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let info = store.token_info(&hash(&new)).await.unwrap().unwrap();
        assert_eq!(
            (info.id.as_str(), info.user.as_str()),
            (id.as_str(), "admin")
        );
        assert!(info.bootstrap);
        let roles = store.cluster_roles("admin", &[]).await.unwrap();
        assert_eq!(roles, ["dray-admin"]);
        assert!(
            store.token(&hash(&old)).await.unwrap().is_some(),
            "nothing revoked"
        );
    }
}
