//! A faithful GitHub REST double for pull requests, backed by real bare repositories.
//!
//! Serves `api.github.com`'s paths, status codes, headers and JSON shapes for what Dray
//! uses: `GET|POST /repos/{owner}/{repo}/pulls`, `GET /repos/{o}/{r}/pulls/{n}`,
//! `PUT /repos/{o}/{r}/pulls/{n}/merge`, `GET /repos/{o}/{r}/issues/{n}` (for
//! `closed_by`) and `POST /repos/{o}/{r}/issues/{n}/labels`. A pull request's JSON is
//! GitHub's documented example (`fixtures/github-pull-request.json`, from github/docs
//! `pulls.json`, CC-BY-4.0) with this pull request's fields put in; lists drop the fields
//! GitHub's list omits (`mergeable`, `merged`, …).
//!
//! A merge makes a real commit on the base branch of the bare repository with the git CLI
//! in a temporary clone: a merge commit (`Merge pull request #N from owner/branch`), a
//! squash commit (`Title (#N)`), or the head rebased. `mergeable` is computed with
//! `git merge-tree`.
//!
//! Mergeability is computed "later", as GitHub does in the background: the answer to a
//! create, and the first [`GitHubDouble::unknown_mergeability_reads`] reads of a pull
//! request after it was created or after its head or base moved, say `mergeable: null`,
//! `mergeable_state: "unknown"` (a counter of reads, never a clock; 1 unless a test says).
//! A merge follows GitHub's "Merge a pull request": 409 `Head branch was modified` only
//! when the request's `sha` is not the head, 405 `Pull Request is not mergeable` when it
//! cannot merge (closed, conflicting, required checks), 422 for a bad `merge_method`.
//!
//! Scriptable: [`GitHubDouble::close_without_merge`] (by a named user),
//! [`GitHubDouble::refuse_next_merge`] (405 with GitHub's message),
//! [`GitHubDouble::push_before_next_merge`] (a push that races the merge),
//! [`GitHubDouble::rate_limit_next`] (403 with `x-ratelimit-remaining: 0` or 429 with
//! `Retry-After`), [`GitHubDouble::set_mergeable_state`] (e.g. `blocked` while checks run),
//! [`GitHubDouble::bad_gateway_next`] (a proxy's 502 page).
//! Every request is recorded ([`GitHubDouble::requests`]). The API is served at the root
//! (api.github.com) and under `/api/v3` (GitHub Enterprise Server).
//!
//! Commit statuses (`POST /repos/{o}/{r}/statuses/{sha}`, [`statuses`]) are kept per
//! commit ([`GitHubDouble::statuses`]).
//!
//! For `github-push`, the Git database and compare endpoints ([`git_data`]) work on the
//! same bare repositories: refs, `git commit-tree` commits (verified when GitHub made them
//! as the authenticated App, [`GitHubDouble::verified`]) and comparisons.

mod git_data;
mod statuses;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use serde_json::{Value, json};

use crate::double_server::{BAD_GATEWAY_PAGE, DoubleState, Server, bind, request_line};
pub use crate::forge_git::{Landed, Landing};
use crate::forge_git::{LaterCheck, branch_sha, land, merges_cleanly, move_branch};
use crate::world::TestWorld;
pub use git_data::{APP_EMAIL, APP_NAME};

const TEMPLATE: &str = include_str!("fixtures/github-pull-request.json");
const DOCS: &str = "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request";

/// How the next requests are rate-limited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateLimit {
    /// The primary limit: 403, `x-ratelimit-remaining: 0`, `x-ratelimit-reset` in
    /// `reset_in` seconds (no `Retry-After`).
    Primary403 {
        /// Seconds until the reset.
        reset_in: u64,
    },
    /// A secondary limit: 429 with `Retry-After`.
    Secondary429 {
        /// Seconds to wait.
        retry_after: u64,
    },
}

/// How the next merge of a pull request is refused. (A 409 is never scripted: GitHub
/// answers it only to a merge whose `sha` is not the head; push to the branch instead.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeRefusal {
    /// 405 `Pull Request is not mergeable`.
    NotMergeable,
}

#[derive(Clone, Debug)]
struct Pull {
    repo: String,
    number: u64,
    title: String,
    body: String,
    head: String,
    base: String,
    state: &'static str,
    merged: bool,
    merge_commit_sha: Option<String>,
    closed_by: Option<String>,
    merged_by: Option<String>,
    closed_at: Option<String>,
    created_at: String,
    labels: Vec<String>,
    mergeable_state: Option<String>,
    refusal: Option<MergeRefusal>,
    /// Mergeability, computed for the head and base some reads after they moved.
    check: LaterCheck,
    /// A commit pushed to the head branch just before the next merge is handled.
    race: Option<String>,
}

#[derive(Debug, Default)]
struct Inner {
    repos: BTreeMap<String, PathBuf>,
    pulls: Vec<Pull>,
    next_number: u64,
    rate_limit: Option<(RateLimit, u32)>,
    /// How many reads after a create or a moved head say `mergeable: null`.
    unknown_reads: u32,
    /// How many of the next requests the proxy in front answers `502`.
    bad_gateway: u32,
    requests: Vec<String>,
    /// The commits GitHub made and signed (created through the API without an author).
    signed: BTreeSet<String>,
    /// (repo, branch, sha): a push that moves the branch just before the next ref update.
    ref_race: Option<(String, String, String)>,
    /// (repo, sha, status): the commit statuses created, oldest first.
    statuses: Vec<(String, String, Value)>,
}

type AppState = DoubleState<Inner>;

/// A running GitHub double on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct GitHubDouble {
    addr: SocketAddr,
    state: Arc<AppState>,
    server: Server,
}

impl GitHubDouble {
    /// Starts a double that requires `token` (`Authorization: Bearer|token …`) when given.
    pub fn start(world: &TestWorld, token: Option<&str>) -> Result<Self> {
        let (listener, addr) = bind("GitHub double")?;
        if let Some(token) = token {
            crate::secrets::remember("the GitHub double's token", token);
        }
        let state = Arc::new(DoubleState::new(
            world,
            addr,
            token,
            Inner {
                next_number: 1,
                unknown_reads: 1,
                ..Inner::default()
            },
        ));
        let routes = Router::new()
            .route("/repos/{owner}/{repo}/pulls", get(list).post(create))
            .route("/repos/{owner}/{repo}/pulls/{number}", get(get_pull))
            .route("/repos/{owner}/{repo}/pulls/{number}/merge", put(merge))
            .route("/repos/{owner}/{repo}/issues/{number}", get(get_issue))
            .route(
                "/repos/{owner}/{repo}/issues/{number}/labels",
                post(add_labels),
            )
            .route(
                "/repos/{owner}/{repo}/git/ref/{*ref}",
                get(git_data::get_ref),
            )
            .route("/repos/{owner}/{repo}/git/refs", post(git_data::create_ref))
            .route(
                "/repos/{owner}/{repo}/statuses/{sha}",
                post(statuses::create),
            )
            .route(
                "/repos/{owner}/{repo}/git/refs/{*ref}",
                patch(git_data::update_ref).delete(git_data::delete_ref),
            )
            .route(
                "/repos/{owner}/{repo}/git/commits",
                post(git_data::create_commit),
            )
            .route(
                "/repos/{owner}/{repo}/compare/{basehead}",
                get(git_data::compare),
            );
        // GitHub Enterprise Server serves the same API under `/api/v3`.
        let app = Router::new()
            .merge(routes.clone())
            .nest("/api/v3", routes)
            .fallback(|| async {
                error(
                    StatusCode::NOT_FOUND,
                    "Not Found",
                    "https://docs.github.com/rest",
                )
            })
            .layer(middleware::from_fn_with_state(Arc::clone(&state), gate))
            .with_state(Arc::clone(&state));
        let server = Server::spawn("GitHub double", listener, addr, app)?;
        Ok(Self {
            addr,
            state,
            server,
        })
    }

    /// The API base URL, `http://127.0.0.1:PORT` (what `apiURL` is set to).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves repository `full_name` (`owner/repo`) from the bare repository at `bare`.
    pub fn add_repo(&self, full_name: &str, bare: impl Into<PathBuf>) {
        self.state
            .lock()
            .repos
            .insert(full_name.to_owned(), bare.into());
    }

    /// Closes pull request `number` without merging, as `user` would on the web.
    pub fn close_without_merge(&self, repo: &str, number: u64, user: &str) -> Result<()> {
        let mut inner = self.state.lock();
        let pull = find_mut(&mut inner, repo, number)?;
        pull.state = "closed";
        pull.closed_by = Some(user.to_owned());
        pull.closed_at = Some(now());
        Ok(())
    }

    /// Merges pull request `number` as `user` would with the button; returns the commit
    /// that landed.
    pub fn merge_as(
        &self,
        repo: &str,
        number: u64,
        landing: Landing,
        user: &str,
    ) -> Result<String> {
        match do_merge(&self.state, repo, number, landing, user)? {
            Ok(sha) => Ok(sha),
            Err((status, message)) => bail!("merge refused ({status}): {message}"),
        }
    }

    /// Refuses the next merge of pull request `number` with `refusal`.
    pub fn refuse_next_merge(&self, repo: &str, number: u64, refusal: MergeRefusal) -> Result<()> {
        find_mut(&mut self.state.lock(), repo, number)?.refusal = Some(refusal);
        Ok(())
    }

    /// How many reads of a pull request (`GET …/pulls/{n}`) after it was created, or after
    /// its head or base moved, say `mergeable: null` (GitHub still computing) before the
    /// computed answer shows; 1 unless set. Applies from the next create or move on.
    pub fn unknown_mergeability_reads(&self, reads: u32) {
        self.state.lock().unknown_reads = reads;
    }

    /// Pushes `sha` (a commit already in the repository) to the head branch of pull request
    /// `number` just before the next merge request for it is handled: a push racing the
    /// merge.
    pub fn push_before_next_merge(&self, repo: &str, number: u64, sha: &str) -> Result<()> {
        find_mut(&mut self.state.lock(), repo, number)?.race = Some(sha.to_owned());
        Ok(())
    }

    /// Forces `mergeable_state` of pull request `number` (`blocked`, `unstable`, …);
    /// `None` computes it from the branches again.
    pub fn set_mergeable_state(&self, repo: &str, number: u64, state: Option<&str>) -> Result<()> {
        find_mut(&mut self.state.lock(), repo, number)?.mergeable_state = state.map(str::to_owned);
        Ok(())
    }

    /// Rate-limits the next `count` requests.
    pub fn rate_limit_next(&self, count: u32, limit: RateLimit) {
        self.state.lock().rate_limit = Some((limit, count));
    }

    /// The next `count` requests are answered `502 Bad Gateway` (an HTML page) by the proxy
    /// in front of GitHub, as happens while it is degraded.
    pub fn bad_gateway_next(&self, count: u32) {
        self.state.lock().bad_gateway = count;
    }

    /// The pull requests of `repo` as GitHub shows them (`GET …/pulls/{n}`), oldest first.
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
            .map(|p| {
                let known = mergeability_known(&self.state, p, false);
                render(&self.state, p, true, known)
            })
            .collect()
    }

    /// Moves `branch` of `repo` to `sha` (a commit already in it) just before the next
    /// `PATCH …/git/refs/heads/{branch}` is handled: a push racing `github-push`.
    pub fn push_before_next_ref_update(&self, repo: &str, branch: &str, sha: &str) {
        self.state.lock().ref_race = Some((repo.to_owned(), branch.to_owned(), sha.to_owned()));
    }

    /// Whether GitHub made and signed commit `sha` (shown as verified): one created through
    /// the API without `author` and `committer`.
    pub fn verified(&self, sha: &str) -> bool {
        self.state.lock().signed.contains(sha)
    }

    /// The commit statuses created on `sha` of `repo` (`owner/repo`), oldest first.
    pub fn statuses(&self, repo: &str, sha: &str) -> Vec<Value> {
        self.state
            .lock()
            .statuses
            .iter()
            .filter(|(r, s, _)| r == repo && s == sha)
            .map(|(_, _, status)| status.clone())
            .collect()
    }

    /// Every request served, as `METHOD /path?query`, oldest first.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().requests.clone()
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

/// Records the request, checks the token, applies a scripted rate limit.
async fn gate(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let line = request_line(&request);
    let limited = {
        let mut inner = state.lock();
        inner.requests.push(line);
        if inner.bad_gateway > 0 {
            inner.bad_gateway -= 1;
            return (
                StatusCode::BAD_GATEWAY,
                [("content-type", "text/html")],
                BAD_GATEWAY_PAGE,
            )
                .into_response();
        }
        match inner.rate_limit {
            Some((limit, n)) if n > 0 => {
                inner.rate_limit = if n > 1 { Some((limit, n - 1)) } else { None };
                Some(limit)
            }
            _ => None,
        }
    };
    if let Some(limit) = limited {
        return rate_limited(limit);
    }
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let ok = given
            .strip_prefix("Bearer ")
            .or_else(|| given.strip_prefix("token "))
            .is_some_and(|t| t == token);
        if !ok {
            return error(
                StatusCode::UNAUTHORIZED,
                "Bad credentials",
                "https://docs.github.com/rest",
            );
        }
    }
    next.run(request).await
}

fn rate_limited(limit: RateLimit) -> Response {
    let now = jiff::Timestamp::now().as_second();
    let (status, wait, message, retry_after) = match limit {
        RateLimit::Primary403 { reset_in } => (
            StatusCode::FORBIDDEN,
            reset_in,
            "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.",
            None,
        ),
        RateLimit::Secondary429 { retry_after } => (
            StatusCode::TOO_MANY_REQUESTS,
            retry_after,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.",
            Some(retry_after),
        ),
    };
    let mut headers = HeaderMap::new();
    let mut set = |k: &'static str, v: String| {
        headers.insert(k, v.parse().expect("a header value"));
    };
    set("x-ratelimit-limit", "5000".into());
    set("x-ratelimit-remaining", "0".into());
    set("x-ratelimit-used", "5000".into());
    set("x-ratelimit-reset", (now + wait as i64).to_string());
    set("x-ratelimit-resource", "core".into());
    if let Some(secs) = retry_after {
        set("retry-after", secs.to_string());
    }
    let body = json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
    });
    (status, headers, axum::Json(body)).into_response()
}

fn error(status: StatusCode, message: &str, docs: &str) -> Response {
    (
        status,
        axum::Json(json!({"message": message, "documentation_url": docs})),
    )
        .into_response()
}

fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "Not Found",
        "https://docs.github.com/rest/pulls/pulls#get-a-pull-request",
    )
}

fn validation_failed(errors: Value) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(json!({
            "message": "Validation Failed",
            "errors": errors,
            "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
        })),
    )
        .into_response()
}

fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string()
}

/// Merges pull request `number`: `Ok(Err((status, message)))` for GitHub's refusals.
fn do_merge(
    state: &AppState,
    repo: &str,
    number: u64,
    landing: Landing,
    user: &str,
) -> Result<std::result::Result<String, (StatusCode, String)>> {
    let (pull, bare) = {
        let mut inner = state.lock();
        let bare = inner.repos.get(repo).cloned();
        let pull = find_mut(&mut inner, repo, number)?;
        if let Some(refusal) = pull.refusal.take() {
            return Ok(Err(match refusal {
                MergeRefusal::NotMergeable => (
                    StatusCode::METHOD_NOT_ALLOWED,
                    "Pull Request is not mergeable".to_owned(),
                ),
            }));
        }
        (pull.clone(), bare.context("repository not served")?)
    };
    if pull.state != "open" {
        return Ok(Err((
            StatusCode::METHOD_NOT_ALLOWED,
            "Pull Request is not mergeable".to_owned(),
        )));
    }
    let owner = repo.split('/').next().unwrap_or(repo);
    let message = format!(
        "Merge pull request #{number} from {owner}/{}\n\n{}",
        pull.head, pull.title
    );
    let squash_message = format!("{} (#{number})\n\n{}", pull.title, pull.body);
    let landed = land(
        &state.world,
        &bare,
        &pull.head,
        &pull.base,
        landing,
        &message,
        &squash_message,
        ("GitHub", "noreply@github.com"),
    )?;
    let landed = match landed {
        Ok(landed) => landed,
        Err(_) => {
            return Ok(Err((
                StatusCode::METHOD_NOT_ALLOWED,
                "Pull Request is not mergeable".to_owned(),
            )));
        }
    };
    let mut inner = state.lock();
    let pull = find_mut(&mut inner, repo, number)?;
    pull.state = "closed";
    pull.merged = true;
    pull.merged_by = Some(user.to_owned());
    pull.closed_at = Some(now());
    pull.merge_commit_sha = Some(landed.head.clone());
    Ok(Ok(landed.head))
}

fn user_json(state: &AppState, login: &str) -> Value {
    let template: Value = serde_json::from_str(TEMPLATE).expect("the fixture is JSON");
    let user = serde_json::to_string(&template["user"]).expect("JSON");
    let user = user
        .replace(
            "https://api.github.com/users/octocat",
            &format!("{}/users/{login}", state.base_url),
        )
        .replace(
            "https://github.com/octocat",
            &format!("{}/{login}", state.base_url),
        )
        .replace("\"login\":\"octocat\"", &format!("\"login\":\"{login}\""));
    serde_json::from_str(&user).expect("JSON")
}

/// Whether GitHub has computed the mergeability of `p` for its current head and base.
/// A moved head or base starts the computation again; a `read` counts down.
fn mergeability_known(state: &AppState, p: &Pull, read: bool) -> bool {
    let Some(bare) = state.lock().repos.get(&p.repo).cloned() else {
        return true;
    };
    let shas = (
        branch_sha(&state.world, &bare, &p.head),
        branch_sha(&state.world, &bare, &p.base),
    );
    let mut inner = state.lock();
    let reads = inner.unknown_reads;
    let Ok(pull) = find_mut(&mut inner, &p.repo, p.number) else {
        return true;
    };
    pull.check.known(shas, reads, read)
}

/// The pull request as GitHub shows it; `full` for `GET …/pulls/{n}`, else a list item;
/// `known`: whether mergeability has been computed (else `mergeable: null`).
fn render(state: &AppState, p: &Pull, full: bool, known: bool) -> Value {
    let bare = state.lock().repos.get(&p.repo).cloned();
    let base_url = &state.base_url;
    let text = TEMPLATE
        .replace(
            "https://api.github.com/repos/octocat/Hello-World",
            &format!("{base_url}/repos/{}", p.repo),
        )
        .replace(
            "https://github.com/octocat/Hello-World",
            &format!("{base_url}/{}", p.repo),
        )
        .replace("/pulls/1347", &format!("/pulls/{}", p.number))
        .replace("/pull/1347", &format!("/pull/{}", p.number))
        .replace("/issues/1347", &format!("/issues/{}", p.number));
    let mut v: Value = serde_json::from_str(&text).expect("the fixture is JSON");
    let (head_sha, base_sha, clean) = match &bare {
        Some(bare) => (
            branch_sha(&state.world, bare, &p.head),
            branch_sha(&state.world, bare, &p.base),
            merges_cleanly(&state.world, bare, &p.base, &p.head),
        ),
        None => (None, None, false),
    };
    let owner = p.repo.split('/').next().unwrap_or_default().to_owned();
    v["id"] = json!(1000 + p.number);
    v["number"] = json!(p.number);
    v["state"] = json!(p.state);
    v["locked"] = json!(false);
    v["title"] = json!(p.title);
    v["body"] = json!(p.body);
    v["labels"] = Value::Array(
        p.labels
            .iter()
            .enumerate()
            .map(|(i, name)| {
                json!({"id": i + 1, "node_id": format!("LA_{i}"), "url": format!("{base_url}/repos/{}/labels/{name}", p.repo),
                    "name": name, "description": null, "color": "ededed", "default": false})
            })
            .collect(),
    );
    v["milestone"] = Value::Null;
    v["created_at"] = json!(p.created_at);
    v["updated_at"] = json!(p.closed_at.clone().unwrap_or_else(|| p.created_at.clone()));
    v["closed_at"] = json!(p.closed_at);
    v["merged_at"] = if p.merged {
        json!(p.closed_at)
    } else {
        Value::Null
    };
    v["merge_commit_sha"] = json!(p.merge_commit_sha);
    v["assignee"] = Value::Null;
    v["assignees"] = json!([]);
    v["requested_reviewers"] = json!([]);
    v["requested_teams"] = json!([]);
    v["draft"] = json!(false);
    v["auto_merge"] = Value::Null;
    for (key, branch, sha) in [("head", &p.head, &head_sha), ("base", &p.base, &base_sha)] {
        v[key]["ref"] = json!(branch);
        v[key]["label"] = json!(format!("{owner}:{branch}"));
        v[key]["sha"] = json!(sha.clone().unwrap_or_default());
    }
    v["statuses_url"] = json!(format!(
        "{base_url}/repos/{}/statuses/{}",
        p.repo,
        head_sha.unwrap_or_default()
    ));
    if full {
        v["merged"] = json!(p.merged);
        let open = p.state == "open";
        let computed = open && known;
        v["mergeable"] = if computed { json!(clean) } else { Value::Null };
        v["rebaseable"] = if computed { json!(clean) } else { Value::Null };
        v["mergeable_state"] = json!(match (&p.mergeable_state, computed, clean) {
            (Some(s), true, _) => s.clone(),
            (_, true, true) => "clean".to_owned(),
            (_, true, false) => "dirty".to_owned(),
            _ => "unknown".to_owned(),
        });
        v["merged_by"] = match &p.merged_by {
            Some(login) => user_json(state, login),
            None => Value::Null,
        };
    } else if let Some(o) = v.as_object_mut() {
        for key in [
            "merged",
            "mergeable",
            "rebaseable",
            "mergeable_state",
            "merged_by",
            "comments",
            "review_comments",
            "maintainer_can_modify",
            "commits",
            "additions",
            "deletions",
            "changed_files",
        ] {
            o.remove(key);
        }
    }
    v
}

fn repo_name(owner: &str, repo: &str) -> String {
    format!("{owner}/{repo}")
}

async fn list(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let full = repo_name(&owner, &repo);
    if !state.lock().repos.contains_key(&full) {
        return not_found();
    }
    let wanted = query.get("state").map(String::as_str).unwrap_or("open");
    let head = query.get("head").map(|h| match h.split_once(':') {
        Some((_, branch)) => branch.to_owned(),
        None => h.clone(),
    });
    let base = query.get("base");
    let pulls: Vec<Pull> = state
        .lock()
        .pulls
        .iter()
        .filter(|p| p.repo == full)
        .filter(|p| wanted == "all" || p.state == wanted)
        .filter(|p| head.as_ref().is_none_or(|h| &p.head == h))
        .filter(|p| base.is_none_or(|b| &p.base == b))
        .cloned()
        .collect();
    // Newest first, as GitHub's default `sort=created&direction=desc`.
    let items: Vec<Value> = pulls
        .iter()
        .rev()
        .map(|p| render(&state, p, false, false))
        .collect();
    axum::Json(Value::Array(items)).into_response()
}

async fn create(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let full = repo_name(&owner, &repo);
    let Some(bare) = state.lock().repos.get(&full).cloned() else {
        return not_found();
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "Problems parsing JSON",
            "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
        );
    };
    let field = |k: &str| body[k].as_str().map(str::to_owned);
    let (Some(head), Some(base)) = (field("head"), field("base")) else {
        return validation_failed(
            json!([{"resource": "PullRequest", "field": "head", "code": "missing_field"}]),
        );
    };
    let head = match head.split_once(':') {
        Some((_, branch)) => branch.to_owned(),
        None => head,
    };
    let Some(title) = field("title") else {
        return validation_failed(
            json!([{"resource": "PullRequest", "field": "title", "code": "missing_field"}]),
        );
    };
    if branch_sha(&state.world, &bare, &head).is_none() {
        return validation_failed(
            json!([{"resource": "PullRequest", "field": "head", "code": "invalid"}]),
        );
    }
    if branch_sha(&state.world, &bare, &base).is_none() {
        return validation_failed(
            json!([{"resource": "PullRequest", "field": "base", "code": "invalid"}]),
        );
    }
    let pull = {
        let mut inner = state.lock();
        if inner
            .pulls
            .iter()
            .any(|p| p.repo == full && p.state == "open" && p.head == head && p.base == base)
        {
            drop(inner);
            return validation_failed(json!([{"resource": "PullRequest", "code": "custom",
                "message": format!("A pull request already exists for {owner}:{head}.")}]));
        }
        let number = inner.next_number;
        inner.next_number += 1;
        let pull = Pull {
            repo: full.clone(),
            number,
            title,
            body: field("body").unwrap_or_default(),
            head,
            base,
            state: "open",
            merged: false,
            merge_commit_sha: None,
            closed_by: None,
            merged_by: None,
            closed_at: None,
            created_at: now(),
            labels: Vec::new(),
            mergeable_state: None,
            refusal: None,
            check: LaterCheck::default(),
            race: None,
        };
        inner.pulls.push(pull.clone());
        pull
    };
    // Counts the computation from the create; the create's own answer says `null`.
    mergeability_known(&state, &pull, false);
    let v = render(&state, &pull, true, false);
    let location = v["url"].as_str().unwrap_or_default().to_owned();
    (StatusCode::CREATED, [("location", location)], axum::Json(v)).into_response()
}

fn lookup(state: &AppState, owner: &str, repo: &str, number: &str) -> Option<Pull> {
    let full = repo_name(owner, repo);
    let number: u64 = number.parse().ok()?;
    state
        .lock()
        .pulls
        .iter()
        .find(|p| p.repo == full && p.number == number)
        .cloned()
}

async fn get_pull(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, number)): UrlPath<(String, String, String)>,
) -> Response {
    match lookup(&state, &owner, &repo, &number) {
        Some(p) => {
            let known = mergeability_known(&state, &p, true);
            axum::Json(render(&state, &p, true, known)).into_response()
        }
        None => not_found(),
    }
}

async fn get_issue(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, number)): UrlPath<(String, String, String)>,
) -> Response {
    let Some(p) = lookup(&state, &owner, &repo, &number) else {
        return not_found();
    };
    let pr = render(&state, &p, false, false);
    let issue = json!({
        "url": pr["issue_url"],
        "repository_url": format!("{}/repos/{}", state.base_url, p.repo),
        "html_url": pr["html_url"],
        "id": 2000 + p.number,
        "node_id": format!("I_{}", p.number),
        "number": p.number,
        "title": p.title,
        "user": pr["user"],
        "labels": pr["labels"],
        "state": p.state,
        "state_reason": if p.state == "closed" && !p.merged { json!("not_planned") } else { Value::Null },
        "locked": false,
        "assignee": null,
        "assignees": [],
        "milestone": null,
        "comments": 0,
        "created_at": p.created_at,
        "updated_at": pr["updated_at"],
        "closed_at": p.closed_at,
        "closed_by": match (&p.closed_by, &p.merged_by) {
            (Some(login), _) | (None, Some(login)) => user_json(&state, login),
            _ => Value::Null,
        },
        "author_association": "OWNER",
        "body": p.body,
        "pull_request": {
            "url": pr["url"],
            "html_url": pr["html_url"],
            "diff_url": pr["diff_url"],
            "patch_url": pr["patch_url"],
            "merged_at": pr["merged_at"],
        },
    });
    axum::Json(issue).into_response()
}

async fn add_labels(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, number)): UrlPath<(String, String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let Some(p) = lookup(&state, &owner, &repo, &number) else {
        return not_found();
    };
    let names: Vec<String> = body["labels"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let labels = {
        let mut inner = state.lock();
        let Ok(pull) = find_mut(&mut inner, &p.repo, p.number) else {
            return not_found();
        };
        for name in names {
            if !pull.labels.contains(&name) {
                pull.labels.push(name);
            }
        }
        pull.clone()
    };
    axum::Json(render(&state, &labels, false, false)["labels"].clone()).into_response()
}

async fn merge(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, number)): UrlPath<(String, String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Some(p) = lookup(&state, &owner, &repo, &number) else {
        return not_found();
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    let landing = match body["merge_method"].as_str().unwrap_or("merge") {
        "merge" => Landing::MergeCommit,
        "squash" => Landing::Squash,
        "rebase" => Landing::Rebase,
        _ => {
            return validation_failed(
                json!([{"resource": "PullRequest", "field": "merge_method", "code": "invalid"}]),
            );
        }
    };
    let bare = state.lock().repos.get(&p.repo).cloned();
    let race = find_mut(&mut state.lock(), &p.repo, p.number)
        .ok()
        .and_then(|pull| pull.race.take());
    if let (Some(sha), Some(bare)) = (race, &bare) {
        if !move_branch(&state.world, bare, &p.head, &sha) {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the scripted push before the merge failed",
                DOCS,
            );
        }
    }
    if p.state != "open" {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Pull Request is not mergeable",
            DOCS,
        );
    }
    // Only a request that names the head it expects can be told the head moved.
    if let Some(sha) = body["sha"].as_str() {
        let head = bare.and_then(|b| branch_sha(&state.world, &b, &p.head));
        if head.as_deref() != Some(sha) {
            return error(
                StatusCode::CONFLICT,
                "Head branch was modified. Review and try the merge again.",
                DOCS,
            );
        }
    }
    if p.mergeable_state.as_deref() == Some("blocked") {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Required status check \"ci\" is expected.",
            DOCS,
        );
    }
    let user = "octocat";
    match do_merge(&state, &p.repo, p.number, landing, user) {
        Ok(Ok(sha)) => axum::Json(json!({
            "sha": sha,
            "merged": true,
            "message": "Pull Request successfully merged"
        }))
        .into_response(),
        Ok(Err((status, message))) => error(status, &message, DOCS),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), DOCS),
    }
}
