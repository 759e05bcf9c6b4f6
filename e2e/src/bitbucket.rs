//! A faithful Bitbucket Cloud REST (2.0) double for pull requests, backed by real bare
//! repositories.
//!
//! Serves what Dray uses, with Bitbucket Cloud's paths, status codes and JSON shapes (its
//! OpenAPI `pullrequest`, `paginated_pullrequests`, `commit`, `error`, and the documented
//! merge task status; see `fixtures/bitbucket-cloud.md` for the sources):
//! `GET|POST /2.0/repositories/{workspace}/{repo_slug}/pullrequests` (`state`, BBQL `q` on
//! the branch names), `GET …/pullrequests/{id}`, `POST …/pullrequests/{id}/merge`,
//! `GET …/pullrequests/{id}/merge/task-status/{task}`, `POST …/pullrequests/{id}/decline`,
//! `GET …/commit/{hash}`. Authentication is `Authorization: Bearer <access token>` or Basic
//! `user:app-password`.
//!
//! Commit hashes in pull request objects are abbreviated to 12 characters, as Bitbucket's
//! are; `GET …/commit/{hash}` names the full one. A merge makes real commits with the git
//! CLI (`forge_git.rs`): `merge_commit` a merge commit (`Merged in <source>
//! (pull request #N)`), `squash` one commit, `fast_forward` the destination moved to the
//! source, `rebase_fast_forward` the source replayed. A merge is answered `200` with the
//! merged pull request; a scripted slow merge `202` with a `Location` to its task status,
//! `PENDING` for as many polls as the test says, then `SUCCESS` with `merge_result`. A
//! merge Bitbucket will not do is a `400` with its `error.message` (merge checks, a
//! conflict, a pull request that is not open); Bitbucket's merge takes no head commit, so
//! a push just before it is merged as it is.
//!
//! Scriptable: decline by a named user, refuse the next merge (unresolved merge checks),
//! slow the next merge down, push to the source just before the next merge, the proxy's
//! 502, and a rate limit (`429`, no `Retry-After`: Bitbucket counts per rolling hour).
//! Every request is recorded.

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
use axum::routing::{get, post};
use base64::Engine as _;
use serde_json::{Value, json};

use crate::double_server::{DoubleState, Interrupt, Script, Server, bad_gateway, bind};
use crate::forge_git::{Landing, branch_sha, land, move_branch};
use crate::git_repo::git;
use crate::world::TestWorld;

#[derive(Clone, Debug, PartialEq, Eq)]
enum PrState {
    Open,
    Merged,
    Declined,
}

impl PrState {
    fn name(&self) -> &'static str {
        match self {
            PrState::Open => "OPEN",
            PrState::Merged => "MERGED",
            PrState::Declined => "DECLINED",
        }
    }
}

#[derive(Clone, Debug)]
struct Pull {
    repo: String,
    id: u64,
    title: String,
    description: String,
    source: String,
    destination: String,
    state: PrState,
    merge_commit: Option<String>,
    closed_by: Option<String>,
    /// The source head when the pull request was merged or declined.
    final_source: Option<String>,
    created_on: String,
    updated_on: String,
    refuse_next: bool,
    race: Option<String>,
}

/// A merge answered `202`: polls left before it runs, and how.
#[derive(Clone, Debug)]
struct Task {
    repo: String,
    id: u64,
    polls_left: u32,
    landing: Landing,
}

#[derive(Debug, Default)]
struct Inner {
    repos: BTreeMap<String, PathBuf>,
    pulls: Vec<Pull>,
    tasks: BTreeMap<String, Task>,
    slow_next: Option<u32>,
    script: Script,
}

type AppState = DoubleState<Inner>;

/// The account the token belongs to: who merges and declines through the API.
const API_USER: &str = "Dray Bot";

/// A running Bitbucket Cloud double on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct BitbucketDouble {
    addr: SocketAddr,
    state: Arc<AppState>,
    server: Server,
}

impl BitbucketDouble {
    /// Starts a double that requires `token` (Bearer, or the password of Basic) when given.
    pub fn start(world: &TestWorld, token: Option<&str>) -> Result<Self> {
        let (listener, addr) = bind("Bitbucket double")?;
        if let Some(token) = token {
            crate::secrets::remember("the Bitbucket double's token", token);
        }
        let state = Arc::new(DoubleState::new(world, addr, token, Inner::default()));
        let repo = "/2.0/repositories/{workspace}/{slug}";
        let app = Router::new()
            .route(&format!("{repo}/pullrequests"), get(list).post(create))
            .route(&format!("{repo}/pullrequests/{{id}}"), get(get_pull))
            .route(&format!("{repo}/pullrequests/{{id}}/merge"), post(merge))
            .route(
                &format!("{repo}/pullrequests/{{id}}/merge/task-status/{{task}}"),
                get(task_status),
            )
            .route(
                &format!("{repo}/pullrequests/{{id}}/decline"),
                post(decline),
            )
            .route(&format!("{repo}/commit/{{hash}}"), get(commit))
            .fallback(|| async { error(StatusCode::NOT_FOUND, "Resource not found") })
            .layer(middleware::from_fn_with_state(Arc::clone(&state), gate))
            .with_state(Arc::clone(&state));
        let server = Server::spawn("Bitbucket double", listener, addr, app)?;
        Ok(Self {
            addr,
            state,
            server,
        })
    }

    /// The API base URL, `http://127.0.0.1:PORT/2.0` (what `apiURL` is set to).
    pub fn api_url(&self) -> String {
        format!("http://{}/2.0", self.addr)
    }

    /// Serves repository `full_name` (`workspace/repo_slug`) from the bare repository.
    pub fn add_repo(&self, full_name: &str, bare: impl Into<PathBuf>) {
        self.state
            .lock()
            .repos
            .insert(full_name.to_owned(), bare.into());
    }

    /// Declines pull request `id`, as `user` would on the web.
    pub fn decline_as(&self, repo: &str, id: u64, user: &str) -> Result<()> {
        let source = self.source_head(repo, id);
        let mut inner = self.state.lock();
        let pull = find_mut(&mut inner, repo, id)?;
        pull.state = PrState::Declined;
        pull.closed_by = Some(user.to_owned());
        pull.final_source = source;
        pull.updated_on = now();
        Ok(())
    }

    /// Refuses the next merge of pull request `id` (`400`, unresolved merge checks).
    pub fn refuse_next_merge(&self, repo: &str, id: u64) -> Result<()> {
        find_mut(&mut self.state.lock(), repo, id)?.refuse_next = true;
        Ok(())
    }

    /// The next merge takes long: `202`, then `PENDING` for `polls` task-status reads.
    pub fn slow_next_merge(&self, polls: u32) {
        self.state.lock().slow_next = Some(polls);
    }

    /// Pushes `sha` (a commit already in the repository) to the source of pull request
    /// `id` just before its next merge request is handled.
    pub fn push_before_next_merge(&self, repo: &str, id: u64, sha: &str) -> Result<()> {
        find_mut(&mut self.state.lock(), repo, id)?.race = Some(sha.to_owned());
        Ok(())
    }

    /// Rate-limits the next `count` requests.
    pub fn rate_limit_next(&self, count: u32) {
        self.state.lock().script.rate_limited = count;
    }

    /// The proxy in front answers the next `count` requests `502 Bad Gateway`.
    pub fn bad_gateway_next(&self, count: u32) {
        self.state.lock().script.bad_gateway = count;
    }

    /// The pull requests of `repo` as Bitbucket shows them, oldest first.
    pub fn pulls(&self, repo: &str) -> Vec<Value> {
        let pulls: Vec<Pull> = self
            .state
            .lock()
            .pulls
            .iter()
            .filter(|p| p.repo == repo)
            .cloned()
            .collect();
        pulls.iter().map(|p| render(&self.state, p)).collect()
    }

    /// Every request served, as `METHOD /path?query`, oldest first.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().script.requests.clone()
    }

    /// Stops the server (also done on drop).
    pub fn stop(&mut self) {
        self.server.stop();
    }

    fn source_head(&self, repo: &str, id: u64) -> Option<String> {
        let p = lookup(&self.state, repo, id)?;
        sha_of(&self.state, &p.repo, &p.source)
    }
}

fn find_mut<'a>(inner: &'a mut Inner, repo: &str, id: u64) -> Result<&'a mut Pull> {
    inner
        .pulls
        .iter_mut()
        .find(|p| p.repo == repo && p.id == id)
        .with_context(|| format!("no pull request #{id} in `{repo}`"))
}

fn lookup(state: &AppState, repo: &str, id: u64) -> Option<Pull> {
    state
        .lock()
        .pulls
        .iter()
        .find(|p| p.repo == repo && p.id == id)
        .cloned()
}

/// Bitbucket's `error` object.
fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"type": "error", "error": {"message": message}})),
    )
        .into_response()
}

fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Microsecond).unwrap_or(t).to_string()
}

fn sha_of(state: &AppState, repo: &str, branch: &str) -> Option<String> {
    let bare = state.lock().repos.get(repo).cloned()?;
    branch_sha(&state.world, &bare, branch)
}

/// The 12-character abbreviation Bitbucket puts in pull request objects.
fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// Records the request, applies the scripted failures, checks the credentials.
async fn gate(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let interrupt = state.lock().script.record(&request);
    match interrupt {
        Some(Interrupt::BadGateway) => return bad_gateway(),
        Some(Interrupt::RateLimited) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    ("x-ratelimit-limit", "1000"),
                    ("x-ratelimit-resource", "api"),
                    ("x-ratelimit-nearlimit", "false"),
                ],
                axum::Json(json!({"type": "error",
                    "error": {"message": "Rate limit for this resource has been exceeded"}})),
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
        let basic_password = given
            .strip_prefix("Basic ")
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|b| b.split_once(':').map(|(_, p)| p.to_owned()));
        let ok = given.strip_prefix("Bearer ") == Some(token.as_str())
            || basic_password.as_deref() == Some(token.as_str());
        if !ok {
            return error(
                StatusCode::UNAUTHORIZED,
                "Token is invalid or not supported for this endpoint.",
            );
        }
    }
    next.run(request).await
}

fn account(state: &AppState, name: &str) -> Value {
    let nickname = name.to_lowercase().replace(' ', "-");
    json!({"type": "user", "display_name": name, "nickname": nickname,
        "uuid": format!("{{{:08x}-0000-4000-8000-000000000000}}", name.len()),
        "account_id": format!("557058:{nickname}"),
        "links": {"avatar": {"href": format!("{}/avatar/{nickname}", state.base_url)}}})
}

/// The pull request as Bitbucket's API shows it (the OpenAPI `pullrequest`).
fn render(state: &AppState, p: &Pull) -> Value {
    let base = &state.base_url;
    let api = format!("{base}/2.0/repositories/{}/pullrequests/{}", p.repo, p.id);
    let html = format!("{base}/{}/pull-requests/{}", p.repo, p.id);
    let source_head = p
        .final_source
        .clone()
        .or_else(|| sha_of(state, &p.repo, &p.source));
    let destination_head = sha_of(state, &p.repo, &p.destination);
    let endpoint = |branch: &str, head: Option<String>| {
        json!({"branch": {"name": branch},
            "commit": head.map(|h| json!({"type": "commit", "hash": short(&h)})),
            "repository": {"type": "repository", "full_name": p.repo,
                "name": p.repo.split('/').nth(1), "uuid": "{00000000-0000-4000-8000-0000000000aa}"}})
    };
    json!({
        "type": "pullrequest",
        "id": p.id,
        "title": p.title,
        "description": p.description,
        "summary": {"type": "rendered", "raw": p.description, "markup": "markdown", "html": ""},
        "state": p.state.name(),
        "draft": false,
        "queued": false,
        "author": account(state, API_USER),
        "source": endpoint(&p.source, source_head),
        "destination": endpoint(&p.destination, destination_head),
        "merge_commit": p.merge_commit.as_deref().map(|h| json!({"type": "commit", "hash": short(h)})),
        "comment_count": 0,
        "task_count": 0,
        "close_source_branch": false,
        "closed_by": p.closed_by.as_deref().map(|u| account(state, u)),
        "reason": "",
        "created_on": p.created_on,
        "updated_on": p.updated_on,
        "reviewers": [],
        "participants": [],
        "links": {
            "self": {"href": api},
            "html": {"href": html},
            "merge": {"href": format!("{api}/merge")},
            "decline": {"href": format!("{api}/decline")},
        },
    })
}

fn repo_of(workspace: &str, slug: &str) -> String {
    format!("{workspace}/{slug}")
}

/// `source.branch.name="a" AND destination.branch.name="b"` → the two names (the BBQL
/// the double understands: equality on those two fields, joined by `AND`).
fn bbql_branches(q: &str) -> BTreeMap<String, String> {
    q.split(" AND ")
        .filter_map(|term| term.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().trim_matches('"').to_owned()))
        .collect()
}

async fn list(
    State(state): State<Arc<AppState>>,
    UrlPath((workspace, slug)): UrlPath<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let repo = repo_of(&workspace, &slug);
    if !state.lock().repos.contains_key(&repo) {
        return error(StatusCode::NOT_FOUND, "Repository not found");
    }
    let states: Vec<&str> = query
        .iter()
        .filter(|(k, _)| k == "state")
        .map(|(_, v)| v.as_str())
        .collect();
    let filter = query
        .iter()
        .find(|(k, _)| k == "q")
        .map(|(_, q)| bbql_branches(q))
        .unwrap_or_default();
    let pulls: Vec<Pull> = state
        .lock()
        .pulls
        .iter()
        .rev()
        .filter(|p| p.repo == repo)
        .filter(|p| match states.is_empty() {
            true => p.state == PrState::Open,
            false => states.contains(&p.state.name()),
        })
        .filter(|p| {
            filter
                .get("source.branch.name")
                .is_none_or(|b| &p.source == b)
        })
        .filter(|p| {
            filter
                .get("destination.branch.name")
                .is_none_or(|b| &p.destination == b)
        })
        .cloned()
        .collect();
    let values: Vec<Value> = pulls.iter().map(|p| render(&state, p)).collect();
    axum::Json(json!({"pagelen": 10, "size": values.len(), "page": 1, "values": values}))
        .into_response()
}

async fn create(
    State(state): State<Arc<AppState>>,
    UrlPath((workspace, slug)): UrlPath<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let repo = repo_of(&workspace, &slug);
    if !state.lock().repos.contains_key(&repo) {
        return error(StatusCode::NOT_FOUND, "Repository not found");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Malformed JSON");
    };
    let name = |end: &str| body[end]["branch"]["name"].as_str().map(str::to_owned);
    let Some(source) = name("source") else {
        return error(StatusCode::BAD_REQUEST, "source: This field is required.");
    };
    let destination = name("destination").unwrap_or_else(|| "main".to_owned());
    let Some(title) = body["title"].as_str().filter(|t| !t.is_empty()) else {
        return error(StatusCode::BAD_REQUEST, "title: This field is required.");
    };
    for branch in [&source, &destination] {
        if sha_of(&state, &repo, branch).is_none() {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("branch: {branch} not found"),
            );
        }
    }
    let pull = {
        let mut inner = state.lock();
        if inner.pulls.iter().any(|p| {
            p.repo == repo
                && p.state == PrState::Open
                && p.source == source
                && p.destination == destination
        }) {
            drop(inner);
            return error(
                StatusCode::BAD_REQUEST,
                "Only one pull request may be open for a given source and target branch",
            );
        }
        let id = inner.pulls.iter().filter(|p| p.repo == repo).count() as u64 + 1;
        let created = now();
        let pull = Pull {
            repo: repo.clone(),
            id,
            title: title.to_owned(),
            description: body["description"].as_str().unwrap_or_default().to_owned(),
            source,
            destination,
            state: PrState::Open,
            merge_commit: None,
            closed_by: None,
            final_source: None,
            created_on: created.clone(),
            updated_on: created,
            refuse_next: false,
            race: None,
        };
        inner.pulls.push(pull.clone());
        pull
    };
    let v = render(&state, &pull);
    let location = v["links"]["self"]["href"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (StatusCode::CREATED, [("location", location)], axum::Json(v)).into_response()
}

async fn get_pull(
    State(state): State<Arc<AppState>>,
    UrlPath((workspace, slug, id)): UrlPath<(String, String, u64)>,
) -> Response {
    match lookup(&state, &repo_of(&workspace, &slug), id) {
        Some(p) => axum::Json(render(&state, &p)).into_response(),
        None => error(StatusCode::NOT_FOUND, "Pull request not found"),
    }
}

async fn decline(
    State(state): State<Arc<AppState>>,
    UrlPath((workspace, slug, id)): UrlPath<(String, String, u64)>,
) -> Response {
    let repo = repo_of(&workspace, &slug);
    let Some(p) = lookup(&state, &repo, id) else {
        return error(StatusCode::NOT_FOUND, "Pull request not found");
    };
    if p.state != PrState::Open {
        return error(
            StatusCode::BAD_REQUEST,
            "Only open pull requests can be declined",
        );
    }
    let source = sha_of(&state, &repo, &p.source);
    let updated = {
        let mut inner = state.lock();
        let Ok(pull) = find_mut(&mut inner, &repo, id) else {
            return error(StatusCode::NOT_FOUND, "Pull request not found");
        };
        pull.state = PrState::Declined;
        pull.closed_by = Some(API_USER.to_owned());
        pull.final_source = source;
        pull.updated_on = now();
        pull.clone()
    };
    axum::Json(render(&state, &updated)).into_response()
}

async fn commit(
    State(state): State<Arc<AppState>>,
    UrlPath((workspace, slug, hash)): UrlPath<(String, String, String)>,
) -> Response {
    let repo = repo_of(&workspace, &slug);
    let Some(bare) = state.lock().repos.get(&repo).cloned() else {
        return error(StatusCode::NOT_FOUND, "Repository not found");
    };
    let out = git(&state.world)
        .arg("--git-dir")
        .arg(&bare)
        .args(["log", "-1", "--format=%H%n%P%n%aI%n%an <%ae>%n%B"])
        .arg(format!("{hash}^{{commit}}"))
        .arg("--")
        .output();
    let Some(text) = out
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    else {
        return error(StatusCode::NOT_FOUND, &format!("Commit not found: {hash}"));
    };
    let mut lines = text.lines();
    let full = lines.next().unwrap_or_default();
    let parents: Vec<Value> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| json!({"type": "commit", "hash": p}))
        .collect();
    let date = lines.next().unwrap_or_default();
    let author = lines.next().unwrap_or_default();
    let message: Vec<&str> = lines.collect();
    axum::Json(json!({"type": "commit", "hash": full, "date": date,
        "author": {"type": "author", "raw": author}, "message": message.join("\n"),
        "parents": parents,
        "repository": {"type": "repository", "full_name": repo}}))
    .into_response()
}

/// Lands pull request `id` with `landing`; the merged pull request, or Bitbucket's `400`.
fn do_merge(
    state: &AppState,
    repo: &str,
    id: u64,
    landing: Landing,
) -> std::result::Result<Value, (StatusCode, String)> {
    let p = lookup(state, repo, id)
        .ok_or_else(|| (StatusCode::NOT_FOUND, "Pull request not found".to_owned()))?;
    let bare = state
        .lock()
        .repos
        .get(repo)
        .cloned()
        .ok_or_else(|| (StatusCode::NOT_FOUND, "Repository not found".to_owned()))?;
    let message = format!("Merged in {} (pull request #{id})\n\n{}", p.source, p.title);
    let source = sha_of(state, repo, &p.source);
    let landed = land(
        &state.world,
        &bare,
        &p.source,
        &p.destination,
        landing,
        &message,
        &message,
        ("Bitbucket", "noreply@bitbucket.org"),
    )
    .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    .map_err(|_| {
        (
            StatusCode::BAD_REQUEST,
            "Conflicts during merge.".to_owned(),
        )
    })?;
    let mut inner = state.lock();
    let pull =
        find_mut(&mut inner, repo, id).map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
    pull.state = PrState::Merged;
    pull.closed_by = Some(API_USER.to_owned());
    pull.merge_commit = Some(landed.head);
    pull.final_source = source;
    pull.updated_on = now();
    let merged = pull.clone();
    drop(inner);
    Ok(render(state, &merged))
}

async fn merge(
    State(state): State<Arc<AppState>>,
    UrlPath((workspace, slug, id)): UrlPath<(String, String, u64)>,
    body: axum::body::Bytes,
) -> Response {
    let repo = repo_of(&workspace, &slug);
    let Some(p) = lookup(&state, &repo, id) else {
        return error(StatusCode::NOT_FOUND, "Pull request not found");
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    let scripted = find_mut(&mut state.lock(), &repo, id)
        .ok()
        .map(|pull| (pull.race.take(), std::mem::take(&mut pull.refuse_next)));
    let (race, refused) = scripted.unwrap_or_default();
    if let Some(sha) = race {
        let bare = state.lock().repos.get(&repo).cloned();
        if !bare.is_some_and(|b| move_branch(&state.world, &b, &p.source, &sha)) {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the scripted push failed",
            );
        }
    }
    if p.state != PrState::Open {
        let state_name = p.state.name().to_lowercase();
        return error(
            StatusCode::BAD_REQUEST,
            &format!("You can't merge this pull request because it is {state_name}."),
        );
    }
    if refused {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"type": "error", "error": {
                "message": "You can't merge until you resolve all merge checks.",
                "fields": {"merge_checks": ["Not enough approvals"]}}})),
        )
            .into_response();
    }
    let landing = match body["merge_strategy"].as_str().unwrap_or("merge_commit") {
        "merge_commit" => Landing::MergeCommit,
        "squash" => Landing::Squash,
        "fast_forward" => Landing::FastForward,
        "rebase_fast_forward" => Landing::Rebase,
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "merge_strategy: {other} is not an allowed merge strategy for this pull request"
                ),
            );
        }
    };
    let slow = state.lock().slow_next.take();
    if let Some(polls) = slow {
        let task = format!(
            "{{{:08x}-0000-4000-8000-{:012x}}}",
            id,
            state.lock().tasks.len()
        );
        state.lock().tasks.insert(
            task.clone(),
            Task {
                repo: repo.clone(),
                id,
                polls_left: polls,
                landing,
            },
        );
        let location = format!(
            "{}/2.0/repositories/{repo}/pullrequests/{id}/merge/task-status/{task}",
            state.base_url
        );
        return (StatusCode::ACCEPTED, [("location", location)]).into_response();
    }
    match do_merge(&state, &repo, id, landing) {
        Ok(merged) => axum::Json(merged).into_response(),
        Err((status, message)) => error(status, &message),
    }
}

async fn task_status(
    State(state): State<Arc<AppState>>,
    UrlPath((workspace, slug, id, task)): UrlPath<(String, String, u64, String)>,
) -> Response {
    let repo = repo_of(&workspace, &slug);
    let self_link = format!(
        "{}/2.0/repositories/{repo}/pullrequests/{id}/merge/task-status/{task}",
        state.base_url
    );
    let due = {
        let mut inner = state.lock();
        let Some(t) = inner
            .tasks
            .get_mut(&task)
            .filter(|t| t.repo == repo && t.id == id)
        else {
            return error(StatusCode::NOT_FOUND, "Task not found");
        };
        if t.polls_left > 0 {
            t.polls_left -= 1;
            None
        } else {
            Some(t.landing)
        }
    };
    let Some(landing) = due else {
        return axum::Json(json!({"task_status": "PENDING",
            "links": {"self": {"href": self_link}}}))
        .into_response();
    };
    // Ran once; later polls answer the same result.
    let merged = match lookup(&state, &repo, id) {
        Some(p) if p.state == PrState::Merged => render(&state, &p),
        _ => match do_merge(&state, &repo, id, landing) {
            Ok(merged) => merged,
            Err((status, message)) => return error(status, &message),
        },
    };
    axum::Json(
        json!({"task_status": "SUCCESS", "links": {"self": {"href": self_link}},
        "merge_result": merged}),
    )
    .into_response()
}
