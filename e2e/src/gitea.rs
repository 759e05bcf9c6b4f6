//! A faithful Gitea / Forgejo REST (API v1) double for pull requests, backed by real bare
//! repositories.
//!
//! Serves what Dray uses, with Gitea's paths, status codes and JSON shapes (its
//! `modules/structs` `PullRequest`, `Label`, `TimelineComment`, as in `swagger.v1.json`):
//! `GET|POST /api/v1/repos/{owner}/{repo}/pulls`, `GET …/pulls/{index}`,
//! `POST …/pulls/{index}/merge` (and `GET` of it: 204 merged, 404 not), `GET …/labels`,
//! `GET …/issues/{index}/timeline`. Authentication is `Authorization: token …` (or
//! `Bearer …`).
//!
//! A merge makes real commits with the git CLI (`forge_git.rs`): `Do: merge` a
//! merge commit (`Merge pull request '<title>' (#N) from <head> into <base>`), `squash` one
//! commit (`<title> (#N)`), `rebase` the head replayed. It answers `200` with no body, as
//! Gitea does; `merge_commit_sha` of the pull request then names what landed. The order of
//! Gitea's `MergePullRequest` is kept: a closed pull request is `404`, a merged one `405`,
//! one Gitea cannot merge now (still checking, conflicting) `405 Please try again later`,
//! a scripted refusal `405 User not allowed to merge PR`, then `head_commit_id` that is not
//! the head `409 head out of date`, a merge git cannot do `409`.
//!
//! Mergeability is checked "later", as Gitea does in its queue: `mergeable` is `false` for
//! the first [`GiteaDouble::checking_reads`] reads of a pull request after it was created or
//! after its head or base moved (a counter of reads, never a clock; 1 unless a test says),
//! then whether `git merge-tree` merges it cleanly.
//!
//! Scriptable: close without merging by a named user, refuse the next merge, push to the
//! head just before the next merge, the proxy's 502, and a rate limit (Gitea has none of its
//! own; the proxy in front, as Codeberg's, answers `429` with `Retry-After`). Every request
//! is recorded.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::double_server::{DoubleState, Interrupt, Script, Server, bad_gateway, bind};
use crate::forge_git::{Landing, LaterCheck, branch_sha, land, merges_cleanly, move_branch};
use crate::world::TestWorld;

#[derive(Clone, Debug)]
struct Pull {
    repo: String,
    number: u64,
    title: String,
    body: String,
    head: String,
    base: String,
    open: bool,
    merged: bool,
    merge_commit_sha: Option<String>,
    merged_by: Option<String>,
    closed_by: Option<String>,
    closed_at: Option<String>,
    created_at: String,
    labels: Vec<u64>,
    refuse_next: bool,
    check: LaterCheck,
    race: Option<String>,
}

#[derive(Debug, Default)]
struct Inner {
    repos: BTreeMap<String, PathBuf>,
    labels: BTreeMap<String, Vec<(u64, String)>>,
    pulls: Vec<Pull>,
    checking_reads: u32,
    retry_after: u64,
    script: Script,
}

type AppState = DoubleState<Inner>;

/// A running Gitea double on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct GiteaDouble {
    addr: SocketAddr,
    state: Arc<AppState>,
    server: Server,
}

/// The user the token belongs to: who merges through the API.
const API_USER: &str = "dray-bot";

impl GiteaDouble {
    /// Starts a double that requires `token` when given.
    pub fn start(world: &TestWorld, token: Option<&str>) -> Result<Self> {
        let (listener, addr) = bind("Gitea double")?;
        if let Some(token) = token {
            crate::secrets::remember("the Gitea double's token", token);
        }
        let state = Arc::new(DoubleState::new(
            world,
            addr,
            token,
            Inner {
                checking_reads: 1,
                ..Inner::default()
            },
        ));
        let repo = "/api/v1/repos/{owner}/{repo}";
        let app = Router::new()
            .route(&format!("{repo}/pulls"), get(list).post(create))
            .route(&format!("{repo}/pulls/{{index}}"), get(get_pull))
            .route(
                &format!("{repo}/pulls/{{index}}/merge"),
                get(is_merged).post(merge),
            )
            .route(&format!("{repo}/labels"), get(labels))
            .route(&format!("{repo}/issues/{{index}}/timeline"), get(timeline))
            .fallback(|| async { not_found() })
            .layer(middleware::from_fn_with_state(Arc::clone(&state), gate))
            .with_state(Arc::clone(&state));
        let server = Server::spawn("Gitea double", listener, addr, app)?;
        Ok(Self {
            addr,
            state,
            server,
        })
    }

    /// The instance's address, `http://127.0.0.1:PORT` (what `apiURL` is set to).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves repository `full_name` (`owner/repo`) from the bare repository at `bare`.
    pub fn add_repo(&self, full_name: &str, bare: impl Into<PathBuf>) {
        let mut inner = self.state.lock();
        inner.repos.insert(full_name.to_owned(), bare.into());
        inner.labels.entry(full_name.to_owned()).or_default();
    }

    /// Creates label `name` in `repo`; returns its id.
    pub fn add_label(&self, repo: &str, name: &str) -> u64 {
        let mut inner = self.state.lock();
        let labels = inner.labels.entry(repo.to_owned()).or_default();
        let id = 10 + labels.len() as u64;
        labels.push((id, name.to_owned()));
        id
    }

    /// Closes pull request `number` without merging, as `user` would on the web.
    pub fn close_without_merge(&self, repo: &str, number: u64, user: &str) -> Result<()> {
        let mut inner = self.state.lock();
        let pull = find_mut(&mut inner, repo, number)?;
        pull.open = false;
        pull.closed_by = Some(user.to_owned());
        pull.closed_at = Some(now());
        Ok(())
    }

    /// Refuses the next merge of pull request `number` (`405 User not allowed to merge PR`).
    pub fn refuse_next_merge(&self, repo: &str, number: u64) -> Result<()> {
        find_mut(&mut self.state.lock(), repo, number)?.refuse_next = true;
        Ok(())
    }

    /// How many reads of a pull request after it was created, or after its head or base
    /// moved, say `mergeable: false` (Gitea still checking); 1 unless set.
    pub fn checking_reads(&self, reads: u32) {
        self.state.lock().checking_reads = reads;
    }

    /// Pushes `sha` (a commit already in the repository) to the head of pull request
    /// `number` just before its next merge request is handled.
    pub fn push_before_next_merge(&self, repo: &str, number: u64, sha: &str) -> Result<()> {
        find_mut(&mut self.state.lock(), repo, number)?.race = Some(sha.to_owned());
        Ok(())
    }

    /// The proxy in front rate-limits the next `count` requests (`429`, `Retry-After`).
    pub fn rate_limit_next(&self, count: u32, retry_after: u64) {
        let mut inner = self.state.lock();
        inner.script.rate_limited = count;
        inner.retry_after = retry_after;
    }

    /// The proxy in front answers the next `count` requests `502 Bad Gateway`.
    pub fn bad_gateway_next(&self, count: u32) {
        self.state.lock().script.bad_gateway = count;
    }

    /// The pull requests of `repo` as Gitea shows them, oldest first (a look that does not
    /// move Gitea's check on).
    pub fn pulls(&self, repo: &str) -> Vec<Value> {
        let pulls: Vec<Pull> = self
            .state
            .lock()
            .pulls
            .iter()
            .filter(|p| p.repo == repo)
            .cloned()
            .collect();
        pulls
            .iter()
            .map(|p| render(&self.state, p, checked(&self.state, p, false)))
            .collect()
    }

    /// Every request served, as `METHOD /path?query`, oldest first.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().script.requests.clone()
    }

    /// Stops the server (also done on drop).
    pub fn stop(&mut self) {
        self.server.stop();
    }
}

fn find_mut<'a>(inner: &'a mut Inner, repo: &str, number: u64) -> Result<&'a mut Pull> {
    inner
        .pulls
        .iter_mut()
        .find(|p| p.repo == repo && p.number == number)
        .with_context(|| format!("no pull request #{number} in `{repo}`"))
}

/// Gitea's `APIError` body.
fn error(state_url: &str, status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"message": message, "url": format!("{state_url}/api/swagger")})),
    )
        .into_response()
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"errors": [], "message": "not found", "url": "/api/swagger"})),
    )
        .into_response()
}

fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// Records the request, applies the scripted failures, checks the token.
async fn gate(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let (interrupt, wait) = {
        let mut inner = state.lock();
        (inner.script.record(&request), inner.retry_after)
    };
    match interrupt {
        Some(Interrupt::BadGateway) => return bad_gateway(),
        Some(Interrupt::RateLimited) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", wait.to_string())],
                "Too Many Requests\n",
            )
                .into_response();
        }
        None => {}
    }
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let ok = given
            .strip_prefix("token ")
            .or_else(|| given.strip_prefix("Bearer "))
            .is_some_and(|t| t == token);
        if !ok {
            return error(
                &state.base_url,
                StatusCode::UNAUTHORIZED,
                "token is required",
            );
        }
    }
    next.run(request).await
}

fn user_json(state: &AppState, login: &str) -> Value {
    json!({"id": 1 + login.len(), "login": login, "login_name": "", "full_name": "",
        "email": format!("{login}@noreply.localhost"),
        "avatar_url": format!("{}/avatars/{login}", state.base_url), "language": "",
        "is_admin": false, "restricted": false, "active": true, "prohibit_login": false,
        "visibility": "public", "username": login})
}

/// Whether Gitea's check of `p` is done for its current head and base; a `read` (a view
/// of the pull request) moves it on.
fn checked(state: &AppState, p: &Pull, read: bool) -> bool {
    let Some(bare) = state.lock().repos.get(&p.repo).cloned() else {
        return true;
    };
    let shas = (
        branch_sha(&state.world, &bare, &p.head),
        branch_sha(&state.world, &bare, &p.base),
    );
    let mut inner = state.lock();
    let reads = inner.checking_reads;
    match find_mut(&mut inner, &p.repo, p.number) {
        Ok(pull) => pull.check.known(shas, reads, read),
        Err(_) => true,
    }
}

/// The pull request as Gitea's API shows it (`modules/structs.PullRequest`).
fn render(state: &AppState, p: &Pull, check_done: bool) -> Value {
    let inner = state.lock();
    let bare = inner.repos.get(&p.repo).cloned();
    let labels: Vec<Value> = inner
        .labels
        .get(&p.repo)
        .map(|all| {
            all.iter()
                .filter(|(id, _)| p.labels.contains(id))
                .map(|(id, name)| label_json(state, &p.repo, *id, name))
                .collect()
        })
        .unwrap_or_default();
    drop(inner);
    let sha = |branch: &str| {
        bare.as_ref()
            .and_then(|b| branch_sha(&state.world, b, branch))
            .unwrap_or_default()
    };
    let clean = bare
        .as_ref()
        .is_some_and(|b| merges_cleanly(&state.world, b, &p.base, &p.head));
    let base_url = &state.base_url;
    let html = format!("{base_url}/{}/pulls/{}", p.repo, p.number);
    let owner = p.repo.split('/').next().unwrap_or_default();
    let branch = |name: &str| {
        json!({"label": name, "ref": name, "sha": sha(name), "repo_id": 1,
            "repo": {"id": 1, "full_name": p.repo, "name": p.repo.split('/').nth(1),
                "owner": user_json(state, owner), "html_url": format!("{base_url}/{}", p.repo)}})
    };
    json!({
        "id": 1000 + p.number,
        "url": html,
        "number": p.number,
        "user": user_json(state, API_USER),
        "title": p.title,
        "body": p.body,
        "labels": labels,
        "milestone": null,
        "assignee": null,
        "assignees": null,
        "requested_reviewers": null,
        "state": if p.open { "open" } else { "closed" },
        "draft": false,
        "is_locked": false,
        "comments": 0,
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "mergeable": p.open && check_done && clean,
        "merged": p.merged,
        "merged_at": if p.merged { json!(p.closed_at) } else { Value::Null },
        "merge_commit_sha": p.merge_commit_sha,
        "merged_by": p.merged_by.as_deref().map(|u| user_json(state, u)),
        "allow_maintainer_edit": false,
        "base": branch(&p.base),
        "head": branch(&p.head),
        "merge_base": "",
        "due_date": null,
        "created_at": p.created_at,
        "updated_at": p.closed_at.clone().unwrap_or_else(|| p.created_at.clone()),
        "closed_at": p.closed_at,
        "pin_order": 0,
    })
}

fn label_json(state: &AppState, repo: &str, id: u64, name: &str) -> Value {
    json!({"id": id, "name": name, "exclusive": false, "is_archived": false,
        "color": "ededed", "description": "",
        "url": format!("{}/api/v1/repos/{repo}/labels/{id}", state.base_url)})
}

fn lookup(state: &AppState, owner: &str, repo: &str, index: &str) -> Option<Pull> {
    let full = format!("{owner}/{repo}");
    let number: u64 = index.parse().ok()?;
    state
        .lock()
        .pulls
        .iter()
        .find(|p| p.repo == full && p.number == number)
        .cloned()
}

async fn list(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let full = format!("{owner}/{repo}");
    if !state.lock().repos.contains_key(&full) {
        return not_found();
    }
    let wanted = query.get("state").map(String::as_str).unwrap_or("open");
    let base = query.get("base_branch").filter(|b| !b.is_empty());
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(30);
    let page: usize = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
    let pulls: Vec<Pull> = state
        .lock()
        .pulls
        .iter()
        .rev()
        .filter(|p| p.repo == full)
        .filter(|p| wanted == "all" || (wanted == "open") == p.open)
        .filter(|p| base.is_none_or(|b| &p.base == b))
        .skip(limit * page.saturating_sub(1))
        .take(limit)
        .cloned()
        .collect();
    let items: Vec<Value> = pulls
        .iter()
        .map(|p| render(&state, p, checked(&state, p, false)))
        .collect();
    axum::Json(Value::Array(items)).into_response()
}

async fn create(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let full = format!("{owner}/{repo}");
    let Some(bare) = state.lock().repos.get(&full).cloned() else {
        return not_found();
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(
            &state.base_url,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid JSON",
        );
    };
    let field = |k: &str| {
        body[k]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let (Some(head), Some(base), Some(title)) = (field("head"), field("base"), field("title"))
    else {
        return error(
            &state.base_url,
            StatusCode::UNPROCESSABLE_ENTITY,
            "[Head]: Required; [Base]: Required; [Title]: Required",
        );
    };
    if head == base {
        return error(
            &state.base_url,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid PullRequest: There are no changes between the head and the base",
        );
    }
    if branch_sha(&state.world, &bare, &head).is_none()
        || branch_sha(&state.world, &bare, &base).is_none()
    {
        return not_found();
    }
    let labels: Vec<u64> = body["labels"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let pull = {
        let mut inner = state.lock();
        if let Some(existing) = inner
            .pulls
            .iter()
            .find(|p| p.repo == full && p.open && p.head == head && p.base == base)
        {
            let message = format!(
                "pull request already exists for these targets [id: {}, issue_id: {}, \
                 head_repo_id: 1, base_repo_id: 1, head_branch: {head}, base_branch: {base}]",
                1000 + existing.number,
                existing.number
            );
            drop(inner);
            return error(&state.base_url, StatusCode::CONFLICT, &message);
        }
        let known = inner.labels.get(&full).cloned().unwrap_or_default();
        let number = inner.pulls.iter().filter(|p| p.repo == full).count() as u64 + 1;
        let pull = Pull {
            repo: full.clone(),
            number,
            title,
            body: field("body").unwrap_or_default(),
            head,
            base,
            open: true,
            merged: false,
            merge_commit_sha: None,
            merged_by: None,
            closed_by: None,
            closed_at: None,
            created_at: now(),
            labels: labels
                .into_iter()
                .filter(|id| known.iter().any(|(k, _)| k == id))
                .collect(),
            refuse_next: false,
            check: LaterCheck::default(),
            race: None,
        };
        inner.pulls.push(pull.clone());
        pull
    };
    // The check is queued at the create; the create's own answer says `mergeable: false`.
    checked(&state, &pull, false);
    (
        StatusCode::CREATED,
        axum::Json(render(&state, &pull, false)),
    )
        .into_response()
}

async fn get_pull(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, index)): UrlPath<(String, String, String)>,
) -> Response {
    match lookup(&state, &owner, &repo, &index) {
        Some(p) => {
            let done = checked(&state, &p, true);
            axum::Json(render(&state, &p, done)).into_response()
        }
        None => not_found(),
    }
}

async fn is_merged(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, index)): UrlPath<(String, String, String)>,
) -> Response {
    match lookup(&state, &owner, &repo, &index) {
        Some(p) if p.merged => StatusCode::NO_CONTENT.into_response(),
        _ => not_found(),
    }
}

async fn labels(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
) -> Response {
    let full = format!("{owner}/{repo}");
    let Some(all) = state.lock().labels.get(&full).cloned() else {
        return not_found();
    };
    let items: Vec<Value> = all
        .iter()
        .map(|(id, name)| label_json(&state, &full, *id, name))
        .collect();
    axum::Json(Value::Array(items)).into_response()
}

async fn timeline(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, index)): UrlPath<(String, String, String)>,
) -> Response {
    let Some(p) = lookup(&state, &owner, &repo, &index) else {
        return not_found();
    };
    let mut events = Vec::new();
    let mut event = |kind: &str, user: &str| {
        events.push(
            json!({"id": 5000 + p.number * 10 + events.len() as u64, "type": kind,
            "body": "", "user": user_json(&state, user),
            "created_at": p.closed_at, "updated_at": p.closed_at,
            "html_url": format!("{}/{}/pulls/{}", state.base_url, p.repo, p.number)}),
        );
    };
    if let Some(user) = &p.merged_by {
        event("merge_pull", user);
    }
    if let Some(user) = &p.closed_by {
        event("close", user);
    }
    axum::Json(Value::Array(events)).into_response()
}

async fn merge(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, index)): UrlPath<(String, String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Some(p) = lookup(&state, &owner, &repo, &index) else {
        return not_found();
    };
    let refuse = |status, message: &str| error(&state.base_url, status, message);
    let body: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    let Some(bare) = state.lock().repos.get(&p.repo).cloned() else {
        return not_found();
    };
    let scripted = find_mut(&mut state.lock(), &p.repo, p.number)
        .ok()
        .map(|pull| (pull.race.take(), std::mem::take(&mut pull.refuse_next)));
    let (race, refused) = scripted.unwrap_or_default();
    if let Some(sha) = race
        && !move_branch(&state.world, &bare, &p.head, &sha)
    {
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the scripted push failed",
        );
    }
    // `CheckPullMergeable`, in Gitea's order.
    if p.merged {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "");
    }
    if !p.open {
        return not_found();
    }
    if refused {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "User not allowed to merge PR",
        );
    }
    let clean = merges_cleanly(&state.world, &bare, &p.base, &p.head);
    if !checked(&state, &p, false) || !clean {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "Please try again later");
    }
    let style = body["Do"].as_str().unwrap_or("merge");
    let landing = match style {
        "merge" => Landing::MergeCommit,
        "squash" => Landing::Squash,
        "rebase" => Landing::Rebase,
        other => {
            let message =
                format!("{other} is not allowed an allowed merge style for this repository");
            return refuse(StatusCode::METHOD_NOT_ALLOWED, &message);
        }
    };
    if let Some(expected) = body["head_commit_id"].as_str().filter(|s| !s.is_empty())
        && branch_sha(&state.world, &bare, &p.head).as_deref() != Some(expected)
    {
        return refuse(StatusCode::CONFLICT, "head out of date");
    }
    let message = format!(
        "Merge pull request '{}' (#{}) from {} into {}",
        p.title, p.number, p.head, p.base
    );
    let squash_message = format!("{} (#{})\n\n{}", p.title, p.number, p.body);
    let landed = land(
        &state.world,
        &bare,
        &p.head,
        &p.base,
        landing,
        &message,
        &squash_message,
        ("Gitea", "gitea@noreply.localhost"),
    );
    match landed {
        Ok(Ok(landed)) => {
            let mut inner = state.lock();
            if let Ok(pull) = find_mut(&mut inner, &p.repo, p.number) {
                pull.open = false;
                pull.merged = true;
                pull.merged_by = Some(API_USER.to_owned());
                pull.closed_at = Some(now());
                pull.merge_commit_sha = Some(landed.head);
            }
            StatusCode::OK.into_response()
        }
        Ok(Err(reason)) => refuse(StatusCode::CONFLICT, &reason),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}
