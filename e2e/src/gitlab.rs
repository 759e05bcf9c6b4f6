//! A faithful GitLab REST (v4) double for merge requests, backed by real bare repositories.
//!
//! Serves GitLab's paths, status codes and JSON shapes for what Dray uses:
//! `GET /api/v4/user` (the `gitlab` crate calls it when a client is built),
//! `GET|POST /api/v4/projects/{id}/merge_requests`, `GET …/merge_requests/{iid}`,
//! `PUT …/merge_requests/{iid}` (`state_event=close`), `PUT …/merge_requests/{iid}/merge`.
//! `{id}` is the URL-encoded project path (`group%2Fproject`) or its numeric id. Bodies
//! are accepted as JSON or form-encoded (the `gitlab` crate sends forms). Authentication
//! is `PRIVATE-TOKEN` or `Authorization: Bearer`.
//!
//! Merge request objects have GitLab's documented attributes (no `merged` boolean:
//! `state: "merged"`). A merge makes real commits with the git CLI: with the project's
//! merge method `merge` (default) a merge commit (`merge_commit_sha`), with `squash` first
//! a squash commit (`squash_commit_sha`); with [`MergeMethod::FastForward`] the target is
//! fast-forwarded (`merge_commit_sha: null`, the squash commit or `sha` landed).
//!
//! Mergeability is checked "later", as GitLab does asynchronously: the answer to a create
//! says `merge_status`/`detailed_merge_status` `unchecked`, and the first
//! [`GitLabDouble::checking_reads`] reads of a merge request after it was created or after
//! its source or target moved say `checking` (a counter of reads, never a clock; 1 unless a
//! test says). A merge follows GitLab's "Merge a merge request": 405 `405 Method Not
//! Allowed` when it cannot merge now (not open, still checking, a blocking status, a
//! conflict, a fast-forward project behind its target), then 409 `SHA does not match HEAD
//! of source branch` only when the request's `sha` is not the source's head, 422 `Branch
//! cannot be merged` when the merge itself fails.
//!
//! Scriptable: close without merging by a named user, refuse the next merge (405 / 422
//! with GitLab's messages), push to the source just before the next merge (a push racing
//! it), rate-limit the next requests (429 with `Retry-After` and `RateLimit-*` headers,
//! body `Retry later`).

mod statuses;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde_json::{Value, json};

use crate::double_server::{BAD_GATEWAY_PAGE, DoubleState, Server, bind, request_line};
use crate::forge_git::{Landing, branch_sha, land, merges_cleanly, move_branch};
use crate::world::TestWorld;

/// A project's merge method (Settings → Merge requests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MergeMethod {
    /// Merge commit.
    #[default]
    Merge,
    /// Fast-forward merge.
    FastForward,
}

/// How the next merge of a merge request is refused. (A 409 is never scripted: GitLab
/// answers it only to a merge whose `sha` is not the source's head; push instead.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeRefusal {
    /// 405 `405 Method Not Allowed` (the merge request cannot merge).
    MethodNotAllowed,
    /// 422 `Branch cannot be merged` (the merge failed).
    Unprocessable,
}

#[derive(Clone, Debug)]
struct Mr {
    project: String,
    project_id: u64,
    iid: u64,
    title: String,
    description: String,
    source: String,
    target: String,
    state: &'static str,
    labels: Vec<String>,
    merge_commit_sha: Option<String>,
    squash_commit_sha: Option<String>,
    merged_sha: Option<String>,
    squash: bool,
    merged_by: Option<String>,
    closed_by: Option<String>,
    merged_at: Option<String>,
    closed_at: Option<String>,
    created_at: String,
    detailed_merge_status: Option<String>,
    refusal: Option<MergeRefusal>,
    /// The source and target commits mergeability was last (being) checked for.
    checked: Option<(Option<String>, Option<String>)>,
    /// How many more reads say `checking` before the checked answer shows.
    checking_left: u32,
    /// Whether a read has started the check since the branches last moved.
    check_started: bool,
    /// A commit pushed to the source branch just before the next merge is handled.
    race: Option<String>,
}

#[derive(Debug, Default)]
struct Project {
    id: u64,
    bare: PathBuf,
    method: MergeMethod,
}

#[derive(Debug, Default)]
struct Inner {
    projects: BTreeMap<String, Project>,
    mrs: Vec<Mr>,
    next_global: u64,
    /// How many reads after a create or a moved branch say `checking`.
    checking_reads: u32,
    rate_limit_skip: u32,
    rate_limited: u32,
    retry_after: u64,
    /// How many of the next requests the proxy in front answers `502`.
    bad_gateway: u32,
    requests: Vec<String>,
    /// (project, sha, status): the commit statuses created, oldest first.
    statuses: Vec<(String, String, Value)>,
}

type AppState = DoubleState<Inner>;

/// A running GitLab double on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct GitLabDouble {
    addr: SocketAddr,
    state: Arc<AppState>,
    server: Server,
}

impl GitLabDouble {
    /// Starts a double that requires `token` when given.
    pub fn start(world: &TestWorld, token: Option<&str>) -> Result<Self> {
        let (listener, addr) = bind("GitLab double")?;
        if let Some(token) = token {
            crate::secrets::remember("the GitLab double's token", token);
        }
        let state = Arc::new(DoubleState::new(
            world,
            addr,
            token,
            Inner {
                next_global: 100,
                checking_reads: 1,
                ..Inner::default()
            },
        ));
        let app = Router::new()
            .route("/api/v4/user", get(current_user))
            .route(
                "/api/v4/projects/{id}/merge_requests",
                get(list).post(create),
            )
            .route(
                "/api/v4/projects/{id}/merge_requests/{iid}",
                get(get_mr).put(update),
            )
            .route(
                "/api/v4/projects/{id}/merge_requests/{iid}/merge",
                put(merge),
            )
            .route(
                "/api/v4/projects/{id}/statuses/{sha}",
                axum::routing::post(statuses::create),
            )
            .fallback(|| async { message(StatusCode::NOT_FOUND, "404 Not Found") })
            .layer(middleware::from_fn_with_state(Arc::clone(&state), gate))
            .with_state(Arc::clone(&state));
        let server = Server::spawn("GitLab double", listener, addr, app)?;
        Ok(Self {
            addr,
            state,
            server,
        })
    }

    /// The instance URL, `http://127.0.0.1:PORT` (what `apiURL` is set to).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves project `path` (`group/project`) from the bare repository at `bare`.
    pub fn add_project(&self, path: &str, bare: impl Into<PathBuf>, method: MergeMethod) {
        let mut inner = self.state.lock();
        let id = inner.projects.len() as u64 + 1;
        inner.projects.insert(
            path.to_owned(),
            Project {
                id,
                bare: bare.into(),
                method,
            },
        );
    }

    /// Closes merge request `iid` without merging, as `user` would.
    pub fn close_without_merge(&self, project: &str, iid: u64, user: &str) -> Result<()> {
        let mut inner = self.state.lock();
        let mr = find_mut(&mut inner, project, iid)?;
        mr.state = "closed";
        mr.closed_by = Some(user.to_owned());
        mr.closed_at = Some(now());
        Ok(())
    }

    /// Refuses the next merge of merge request `iid`.
    pub fn refuse_next_merge(&self, project: &str, iid: u64, refusal: MergeRefusal) -> Result<()> {
        find_mut(&mut self.state.lock(), project, iid)?.refusal = Some(refusal);
        Ok(())
    }

    /// How many reads of a merge request (`GET …/merge_requests/{iid}`) after it was
    /// created, or after its source or target moved, say `checking` before the checked
    /// answer shows; 1 unless set. Applies from the next create or move on.
    pub fn checking_reads(&self, reads: u32) {
        self.state.lock().checking_reads = reads;
    }

    /// Pushes `sha` (a commit already in the repository) to the source branch of merge
    /// request `iid` just before the next merge request for it is handled: a push racing
    /// the merge.
    pub fn push_before_next_merge(&self, project: &str, iid: u64, sha: &str) -> Result<()> {
        find_mut(&mut self.state.lock(), project, iid)?.race = Some(sha.to_owned());
        Ok(())
    }

    /// Forces `detailed_merge_status` (`ci_still_running`, `not_approved`, …); `None`
    /// computes it from the branches again.
    pub fn set_merge_status(&self, project: &str, iid: u64, status: Option<&str>) -> Result<()> {
        find_mut(&mut self.state.lock(), project, iid)?.detailed_merge_status =
            status.map(str::to_owned);
        Ok(())
    }

    /// Merges merge request `iid` as `user` would with the button; returns what landed.
    pub fn merge_as(&self, project: &str, iid: u64, squash: bool, user: &str) -> Result<String> {
        match do_merge(&self.state, project, iid, squash, user, None)? {
            Ok(mr) => Ok(mr["merge_commit_sha"]
                .as_str()
                .or(mr["squash_commit_sha"].as_str())
                .or(mr["sha"].as_str())
                .unwrap_or_default()
                .to_owned()),
            Err((status, msg)) => anyhow::bail!("merge refused ({status}): {msg}"),
        }
    }

    /// Rate-limits the next `count` requests (429, `Retry-After: retry_after`).
    pub fn rate_limit_next(&self, count: u32, retry_after: u64) {
        self.rate_limit_after(0, count, retry_after);
    }

    /// Lets `skip` requests through, then rate-limits the next `count` requests.
    pub fn rate_limit_after(&self, skip: u32, count: u32, retry_after: u64) {
        let mut inner = self.state.lock();
        inner.rate_limit_skip = skip;
        inner.rate_limited = count;
        inner.retry_after = retry_after;
    }

    /// The next `count` requests are answered `502 Bad Gateway` (an HTML page) by the proxy
    /// in front of GitLab, as while Puma restarts.
    pub fn bad_gateway_next(&self, count: u32) {
        self.state.lock().bad_gateway = count;
    }

    /// The merge requests of `project` as GitLab shows them, oldest first.
    pub fn merge_requests(&self, project: &str) -> Vec<Value> {
        let mrs: Vec<Mr> = self
            .state
            .lock()
            .mrs
            .iter()
            .filter(|m| m.project == project)
            .cloned()
            .collect();
        mrs.iter()
            .map(|m| {
                let checked = checked(&self.state, m, Read::Peek);
                render(&self.state, m, checked)
            })
            .collect()
    }

    /// The commit statuses created on `sha` of `project` (its path), oldest first.
    pub fn statuses(&self, project: &str, sha: &str) -> Vec<Value> {
        self.state
            .lock()
            .statuses
            .iter()
            .filter(|(p, s, _)| p == project && s == sha)
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

fn find_mut<'a>(inner: &'a mut Inner, project: &str, iid: u64) -> Result<&'a mut Mr> {
    inner
        .mrs
        .iter_mut()
        .find(|m| m.project == project && m.iid == iid)
        .with_context(|| format!("no merge request !{iid} in `{project}`"))
}

fn message(status: StatusCode, text: &str) -> Response {
    (status, axum::Json(json!({"message": text}))).into_response()
}

fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Millisecond).unwrap_or(t).to_string()
}

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
        if inner.rate_limit_skip > 0 {
            inner.rate_limit_skip -= 1;
            None
        } else if inner.rate_limited > 0 {
            inner.rate_limited -= 1;
            Some(inner.retry_after)
        } else {
            None
        }
    };
    if let Some(wait) = limited {
        let reset = jiff::Timestamp::now().as_second() + wait as i64;
        let mut headers = HeaderMap::new();
        let mut set = |k: &'static str, v: String| {
            headers.insert(k, v.parse().expect("a header value"));
        };
        set("ratelimit-name", "throttle_authenticated_api".into());
        set("ratelimit-limit", "2000".into());
        set("ratelimit-observed", "2001".into());
        set("ratelimit-remaining", "0".into());
        set("ratelimit-reset", reset.to_string());
        set("retry-after", wait.to_string());
        set("content-type", "text/plain".into());
        return (StatusCode::TOO_MANY_REQUESTS, headers, "Retry later\n").into_response();
    }
    if let Some(token) = &state.token {
        let headers = request.headers();
        let private = headers.get("private-token").and_then(|v| v.to_str().ok());
        let bearer = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if private.or(bearer) != Some(token.as_str()) {
            return message(StatusCode::UNAUTHORIZED, "401 Unauthorized");
        }
    }
    next.run(request).await
}

fn user_json(state: &AppState, username: &str) -> Value {
    json!({
        "id": 1 + username.len(),
        "username": username,
        "name": username,
        "state": "active",
        "locked": false,
        "avatar_url": format!("{}/uploads/-/system/user/avatar/1/avatar.png", state.base_url),
        "web_url": format!("{}/{username}", state.base_url),
    })
}

async fn current_user(State(state): State<Arc<AppState>>) -> Response {
    let mut user = user_json(&state, "dray-bot");
    user["created_at"] = json!("2024-01-01T00:00:00.000Z");
    user["bio"] = json!("");
    user["public_email"] = Value::Null;
    user["bot"] = json!(false);
    axum::Json(user).into_response()
}

/// `group%2Fproject` (decoded by the router) or a numeric id → the project's path.
fn project_path(state: &AppState, id: &str) -> Option<String> {
    let inner = state.lock();
    if inner.projects.contains_key(id) {
        return Some(id.to_owned());
    }
    let n: u64 = id.parse().ok()?;
    inner
        .projects
        .iter()
        .find(|(_, p)| p.id == n)
        .map(|(path, _)| path.clone())
}

fn sha_of(state: &AppState, project: &str, branch: &str) -> Option<String> {
    let bare = state.lock().projects.get(project)?.bare.clone();
    branch_sha(&state.world, &bare, branch)
}

/// Whether a look at a merge request counts down its `checking` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// `GET …/merge_requests/{iid}`: GitLab checks mergeability when asked.
    Single,
    /// A list, a test's look: changes nothing.
    Peek,
}

/// How far GitLab's mergeability check of `m` is, for its current source and target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Not started (`unchecked`).
    Unchecked,
    /// Running (`checking`).
    Checking,
    /// Done: the computed status shows.
    Done,
}

/// Where the check of `m` is; a moved source or target starts it again, a
/// [`Read::Single`] moves it on.
fn checked(state: &AppState, m: &Mr, read: Read) -> Check {
    if m.state != "opened" {
        return Check::Done;
    }
    let shas = (
        sha_of(state, &m.project, &m.source),
        sha_of(state, &m.project, &m.target),
    );
    let mut inner = state.lock();
    let reads = inner.checking_reads;
    let Ok(mr) = find_mut(&mut inner, &m.project, m.iid) else {
        return Check::Done;
    };
    if mr.checked.as_ref() != Some(&shas) {
        mr.checked = Some(shas);
        mr.checking_left = reads;
        mr.check_started = false;
    }
    if mr.checking_left == 0 {
        return Check::Done;
    }
    if read == Read::Peek {
        return match mr.check_started {
            true => Check::Checking,
            false => Check::Unchecked,
        };
    }
    mr.check_started = true;
    mr.checking_left -= 1;
    Check::Checking
}

fn render(state: &AppState, m: &Mr, check: Check) -> Value {
    let head = m
        .merged_sha
        .clone()
        .or_else(|| sha_of(state, &m.project, &m.source));
    let base = sha_of(state, &m.project, &m.target);
    let (bare, method) = {
        let inner = state.lock();
        let p = inner.projects.get(&m.project);
        (
            p.map(|p| p.bare.clone()),
            p.map(|p| p.method).unwrap_or_default(),
        )
    };
    let open = m.state == "opened";
    let clean = open
        && bare
            .as_ref()
            .is_some_and(|b| merges_cleanly(&state.world, b, &m.target, &m.source));
    let detailed = match (&m.detailed_merge_status, open) {
        (_, false) => "not_open".to_owned(),
        (_, true) if check == Check::Unchecked => "unchecked".to_owned(),
        (_, true) if check == Check::Checking => "checking".to_owned(),
        (Some(s), true) => s.clone(),
        (None, true) if !clean => "conflict".to_owned(),
        (None, true) => {
            // A fast-forward project needs the source to be on top of the target.
            let behind = method == MergeMethod::FastForward
                && bare.as_ref().is_some_and(|b| {
                    !crate::git_repo::git(&state.world)
                        .arg("--git-dir")
                        .arg(b)
                        .args(["merge-base", "--is-ancestor"])
                        .arg(format!("refs/heads/{}", m.target))
                        .arg(format!("refs/heads/{}", m.source))
                        .status()
                        .is_ok_and(|s| s.success())
                });
            if behind { "need_rebase" } else { "mergeable" }.to_owned()
        }
    };
    let merge_status = match detailed.as_str() {
        "mergeable" => "can_be_merged",
        "unchecked" => "unchecked",
        "checking" => "checking",
        _ if open && clean => "can_be_merged",
        _ => "cannot_be_merged",
    };
    let web = format!(
        "{}/{}/-/merge_requests/{}",
        state.base_url, m.project, m.iid
    );
    let user = |u: &Option<String>| match u {
        Some(name) => user_json(state, name),
        None => Value::Null,
    };
    let mut v = json!({
        "id": m.project_id * 1000 + m.iid,
        "iid": m.iid,
        "project_id": m.project_id,
        "title": m.title,
        "description": m.description,
        "state": m.state,
        "created_at": m.created_at,
        "updated_at": m.closed_at.clone().or(m.merged_at.clone()).unwrap_or(m.created_at.clone()),
        "merged_by": user(&m.merged_by),
        "merge_user": user(&m.merged_by),
        "merged_at": m.merged_at,
        "closed_by": user(&m.closed_by),
        "closed_at": m.closed_at,
        "target_branch": m.target,
        "source_branch": m.source,
        "user_notes_count": 0,
        "upvotes": 0,
        "downvotes": 0,
        "author": user_json(state, "dray-bot"),
        "assignees": [],
        "assignee": null,
        "reviewers": [],
        "source_project_id": m.project_id,
        "target_project_id": m.project_id,
        "labels": m.labels,
    });
    let more = json!({
        "draft": false,
        "work_in_progress": false,
        "milestone": null,
        "merge_when_pipeline_succeeds": false,
        "merge_status": merge_status,
        "detailed_merge_status": detailed,
        "merge_after": null,
        "sha": head,
        "merge_commit_sha": m.merge_commit_sha,
        "squash_commit_sha": m.squash_commit_sha,
        "discussion_locked": null,
        "should_remove_source_branch": null,
        "force_remove_source_branch": false,
        "prepared_at": m.created_at,
        "reference": format!("!{}", m.iid),
        "references": {
            "short": format!("!{}", m.iid),
            "relative": format!("!{}", m.iid),
            "full": format!("{}!{}", m.project, m.iid),
        },
        "web_url": web,
        "time_stats": {"time_estimate": 0, "total_time_spent": 0, "human_time_estimate": null, "human_total_time_spent": null},
        "squash": m.squash,
        "squash_on_merge": m.squash,
        "task_completion_status": {"count": 0, "completed_count": 0},
        "has_conflicts": open && check == Check::Done && !clean,
        "blocking_discussions_resolved": true,
        "approvals_before_merge": null,
        "subscribed": false,
        "changes_count": "1",
        "latest_build_started_at": null,
        "latest_build_finished_at": null,
        "first_deployed_to_production_at": null,
        "pipeline": null,
        "head_pipeline": null,
        "diff_refs": {"base_sha": base, "head_sha": head, "start_sha": base},
        "merge_error": null,
        "first_contribution": false,
        "user": {"can_merge": true},
    });
    if let (Some(v), Value::Object(more)) = (v.as_object_mut(), more) {
        v.extend(more);
    }
    v
}

/// A request body as key → value, from JSON or a form.
fn params(headers: &HeaderMap, body: &[u8]) -> BTreeMap<String, String> {
    let json_body = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json_body {
        let v: Value = serde_json::from_slice(body).unwrap_or(json!({}));
        return v
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| {
                        let text = match v {
                            Value::String(s) => s.clone(),
                            Value::Array(a) => a
                                .iter()
                                .filter_map(|x| x.as_str())
                                .collect::<Vec<_>>()
                                .join(","),
                            other => other.to_string(),
                        };
                        (k.clone(), text)
                    })
                    .collect()
            })
            .unwrap_or_default();
    }
    serde_urlencoded_pairs(body)
}

fn serde_urlencoded_pairs(body: &[u8]) -> BTreeMap<String, String> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && i + 2 < bytes.len()
                && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
            {
                out.push(b);
                i += 3;
                continue;
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(pair), String::new()),
        })
        .collect()
}

async fn list(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let Some(project) = project_path(&state, &id) else {
        return message(StatusCode::NOT_FOUND, "404 Project Not Found");
    };
    let wanted = query.get("state").map(String::as_str).unwrap_or("all");
    let mrs: Vec<Mr> = state
        .lock()
        .mrs
        .iter()
        .filter(|m| m.project == project)
        .filter(|m| wanted == "all" || m.state == wanted)
        .filter(|m| query.get("source_branch").is_none_or(|b| &m.source == b))
        .filter(|m| query.get("target_branch").is_none_or(|b| &m.target == b))
        .cloned()
        .collect();
    let items: Vec<Value> = mrs
        .iter()
        .rev()
        .map(|m| render(&state, m, checked(&state, m, Read::Peek)))
        .collect();
    let total = items.len().to_string();
    (
        [
            ("x-total", total.clone()),
            ("x-total-pages", "1".to_owned()),
            ("x-page", "1".to_owned()),
            ("x-per-page", "20".to_owned()),
        ],
        axum::Json(Value::Array(items)),
    )
        .into_response()
}

async fn create(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(project) = project_path(&state, &id) else {
        return message(StatusCode::NOT_FOUND, "404 Project Not Found");
    };
    let p = params(&headers, &body);
    let missing: Vec<&str> = ["source_branch", "target_branch", "title"]
        .into_iter()
        .filter(|k| p.get(*k).is_none_or(|v| v.is_empty()))
        .collect();
    if !missing.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": format!("{} is missing", missing.join(", "))})),
        )
            .into_response();
    }
    let (source, target) = (p["source_branch"].clone(), p["target_branch"].clone());
    if sha_of(&state, &project, &source).is_none() || sha_of(&state, &project, &target).is_none() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({"message": ["Source branch does not exist"]})),
        )
            .into_response();
    }
    let mr = {
        let mut inner = state.lock();
        if let Some(existing) = inner.mrs.iter().find(|m| {
            m.project == project && m.state == "opened" && m.source == source && m.target == target
        }) {
            let text = format!(
                "Another open merge request already exists for this source branch: !{}",
                existing.iid
            );
            drop(inner);
            return (StatusCode::CONFLICT, axum::Json(json!({"message": [text]}))).into_response();
        }
        let project_id = inner.projects[&project].id;
        let iid = inner.mrs.iter().filter(|m| m.project == project).count() as u64 + 1;
        inner.next_global += 1;
        let mr = Mr {
            project: project.clone(),
            project_id,
            iid,
            title: p["title"].clone(),
            description: p.get("description").cloned().unwrap_or_default(),
            source,
            target,
            state: "opened",
            labels: p
                .get("labels")
                .map(|l| {
                    l.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            merge_commit_sha: None,
            squash_commit_sha: None,
            merged_sha: None,
            squash: p.get("squash").is_some_and(|s| s == "true"),
            merged_by: None,
            closed_by: None,
            merged_at: None,
            closed_at: None,
            created_at: now(),
            detailed_merge_status: None,
            refusal: None,
            checked: None,
            checking_left: 0,
            check_started: false,
            race: None,
        };
        inner.mrs.push(mr.clone());
        mr
    };
    let check = checked(&state, &mr, Read::Peek);
    (StatusCode::CREATED, axum::Json(render(&state, &mr, check))).into_response()
}

fn lookup(state: &AppState, id: &str, iid: &str) -> Option<Mr> {
    let project = project_path(state, id)?;
    let iid: u64 = iid.parse().ok()?;
    state
        .lock()
        .mrs
        .iter()
        .find(|m| m.project == project && m.iid == iid)
        .cloned()
}

async fn get_mr(
    State(state): State<Arc<AppState>>,
    UrlPath((id, iid)): UrlPath<(String, String)>,
) -> Response {
    match lookup(&state, &id, &iid) {
        Some(m) => {
            let check = checked(&state, &m, Read::Single);
            axum::Json(render(&state, &m, check)).into_response()
        }
        None => message(StatusCode::NOT_FOUND, "404 Not found"),
    }
}

async fn update(
    State(state): State<Arc<AppState>>,
    UrlPath((id, iid)): UrlPath<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(m) = lookup(&state, &id, &iid) else {
        return message(StatusCode::NOT_FOUND, "404 Not found");
    };
    let p = params(&headers, &body);
    let updated = {
        let mut inner = state.lock();
        let Ok(mr) = find_mut(&mut inner, &m.project, m.iid) else {
            return message(StatusCode::NOT_FOUND, "404 Not found");
        };
        match p.get("state_event").map(String::as_str) {
            Some("close") if mr.state == "opened" => {
                mr.state = "closed";
                mr.closed_by = Some("dray-bot".to_owned());
                mr.closed_at = Some(now());
            }
            Some("reopen") if mr.state == "closed" => {
                mr.state = "opened";
                mr.closed_by = None;
                mr.closed_at = None;
            }
            _ => {}
        }
        if let Some(title) = p.get("title") {
            mr.title = title.clone();
        }
        if let Some(description) = p.get("description") {
            mr.description = description.clone();
        }
        mr.clone()
    };
    let check = checked(&state, &updated, Read::Peek);
    axum::Json(render(&state, &updated, check)).into_response()
}

type Refused = (StatusCode, String);

/// Merges merge request `iid` as GitLab's merge endpoint does, in its order: 405 when it
/// cannot merge now, then 409 when `sha` is given and is not the source's head, then 422
/// when the merge itself fails.
fn do_merge(
    state: &AppState,
    project: &str,
    iid: u64,
    squash: bool,
    user: &str,
    sha: Option<&str>,
) -> Result<std::result::Result<Value, Refused>> {
    let (mr, bare, method) = {
        let mut inner = state.lock();
        let proj = inner.projects.get(project).context("project not served")?;
        let (bare, method) = (proj.bare.clone(), proj.method);
        let mr = find_mut(&mut inner, project, iid)?;
        if let Some(refusal) = mr.refusal.take() {
            return Ok(Err(match refusal {
                MergeRefusal::MethodNotAllowed => (
                    StatusCode::METHOD_NOT_ALLOWED,
                    "405 Method Not Allowed".to_owned(),
                ),
                MergeRefusal::Unprocessable => (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Branch cannot be merged".to_owned(),
                ),
            }));
        }
        (mr.clone(), bare, method)
    };
    if mr.state != "opened" {
        return Ok(Err((
            StatusCode::METHOD_NOT_ALLOWED,
            "405 Method Not Allowed".to_owned(),
        )));
    }
    // Still checking, blocked (a forced status), conflicting, or behind in a
    // fast-forward project: GitLab's `not_allowed!`.
    let current = render(state, &mr, checked(state, &mr, Read::Peek));
    if current["detailed_merge_status"] != "mergeable" {
        return Ok(Err((
            StatusCode::METHOD_NOT_ALLOWED,
            "405 Method Not Allowed".to_owned(),
        )));
    }
    if let Some(sha) = sha
        && current["sha"].as_str() != Some(sha)
    {
        return Ok(Err((
            StatusCode::CONFLICT,
            "SHA does not match HEAD of source branch".to_owned(),
        )));
    }
    let squash = squash || mr.squash;
    let landing = match (method, squash) {
        (MergeMethod::Merge, false) => Landing::MergeCommit,
        (MergeMethod::Merge, true) => Landing::SquashThenMerge,
        (MergeMethod::FastForward, false) => Landing::FastForward,
        (MergeMethod::FastForward, true) => Landing::Squash,
    };
    let message = format!(
        "Merge branch '{}' into '{}'\n\n{}\n\nSee merge request {}!{}",
        mr.source, mr.target, mr.title, mr.project, mr.iid
    );
    let landed = land(
        &state.world,
        &bare,
        &mr.source,
        &mr.target,
        landing,
        &message,
        &mr.title,
        ("GitLab", "gitlab@localhost"),
    )?;
    let Ok(landed) = landed else {
        return Ok(Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            "Branch cannot be merged".to_owned(),
        )));
    };
    let source_head = sha_of(state, project, &mr.source);
    let updated = {
        let mut inner = state.lock();
        let m = find_mut(&mut inner, project, iid)?;
        m.state = "merged";
        m.merged_by = Some(user.to_owned());
        m.merged_at = Some(now());
        m.squash = squash;
        m.squash_commit_sha = landed.squash.clone();
        m.merge_commit_sha = match landing {
            Landing::MergeCommit | Landing::SquashThenMerge => Some(landed.head.clone()),
            _ => None,
        };
        m.merged_sha = match landing {
            Landing::FastForward => Some(landed.head.clone()),
            _ => source_head,
        };
        m.clone()
    };
    Ok(Ok(render(state, &updated, Check::Done)))
}

async fn merge(
    State(state): State<Arc<AppState>>,
    UrlPath((id, iid)): UrlPath<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(m) = lookup(&state, &id, &iid) else {
        return message(StatusCode::NOT_FOUND, "404 Not found");
    };
    let p = params(&headers, &body);
    let race = find_mut(&mut state.lock(), &m.project, m.iid)
        .ok()
        .and_then(|mr| mr.race.take());
    let bare = state
        .lock()
        .projects
        .get(&m.project)
        .map(|p| p.bare.clone());
    if let (Some(sha), Some(bare)) = (race, bare) {
        if !move_branch(&state.world, &bare, &m.source, &sha) {
            return message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the scripted push before the merge failed",
            );
        }
    }
    let squash = p.get("squash").is_some_and(|s| s == "true");
    let sha = p.get("sha").map(String::as_str);
    match do_merge(&state, &m.project, m.iid, squash, "dray-bot", sha) {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err((status, text))) => message(status, &text),
        Err(e) => message(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}
