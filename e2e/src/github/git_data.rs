//! The GitHub double's Git database and compare endpoints (what `github-push` uses), on
//! the same real bare repositories as the pull requests:
//!
//! - `GET /repos/{o}/{r}/git/ref/{ref}`: 200 a `git-ref`; 404; 409 `Git Repository is empty.`
//! - `GET /repos/{o}/{r}/compare/{base}...{head}`: 200 a `commit-comparison` (`status`
//!   `identical|ahead|behind|diverged`, `ahead_by`, `behind_by`, `merge_base_commit`,
//!   `commits` oldest first, at most 250); 404 when either side is unknown.
//! - `POST /repos/{o}/{r}/git/commits`: 201 a `git-commit`, made with `git commit-tree`.
//!   Without `author` and `committer`, GitHub attributes the commit to the authenticated
//!   identity ([`APP_NAME`]) and signs it: `verification.verified: true`
//!   ([`super::GitHubDouble::verified`]); with them, it is unsigned. 422 for a missing
//!   tree or parent.
//! - `POST /repos/{o}/{r}/git/refs`: 201; 422 `Reference already exists`.
//! - `PATCH /repos/{o}/{r}/git/refs/{ref}`: 200; 422 `Update is not a fast forward`
//!   (unless `force`), 422 `Reference does not exist`.
//! - `DELETE /repos/{o}/{r}/git/refs/{ref}`: 204; 422 `Reference does not exist`.
//!
//! Shapes and status codes follow GitHub's REST reference ("Git references", "Git
//! commits", "Compare two commits"). Test tooling only.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{AppState, error, repo_name};
use crate::git_repo::git;

/// The name GitHub gives commits it attributes to the authenticated GitHub App.
pub const APP_NAME: &str = "dray-promoter[bot]";
/// The e-mail of [`APP_NAME`].
pub const APP_EMAIL: &str = "41898282+dray-promoter[bot]@users.noreply.github.com";

const REFS_DOCS: &str = "https://docs.github.com/rest/git/refs";
const COMMITS_DOCS: &str = "https://docs.github.com/rest/git/commits#create-a-commit";
const COMPARE_DOCS: &str = "https://docs.github.com/rest/commits/commits#compare-two-commits";

/// `git ARGS` in the bare repository: stdout when it succeeds.
fn run(state: &AppState, bare: &Path, args: &[&str]) -> Option<String> {
    let out = git(&state.world)
        .arg("--git-dir")
        .arg(bare)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn object_type(state: &AppState, bare: &Path, sha: &str) -> Option<String> {
    run(state, bare, &["cat-file", "-t", sha])
}

fn is_empty(state: &AppState, bare: &Path) -> bool {
    run(state, bare, &["for-each-ref", "--count=1", "refs/heads"]).is_none_or(|o| o.is_empty())
}

fn unprocessable(message: &str, docs: &str) -> Response {
    error(StatusCode::UNPROCESSABLE_ENTITY, message, docs)
}

fn repo_of(state: &AppState, owner: &str, repo: &str) -> Option<std::path::PathBuf> {
    state.lock().repos.get(&repo_name(owner, repo)).cloned()
}

fn ref_json(state: &AppState, owner: &str, repo: &str, name: &str, sha: &str) -> Value {
    let api = format!("{}/repos/{owner}/{repo}", state.base_url);
    json!({
        "ref": name,
        "node_id": format!("REF_{}", &sha[..sha.len().min(10)]),
        "url": format!("{api}/git/{name}"),
        "object": {"type": "commit", "sha": sha, "url": format!("{api}/git/commits/{sha}")}
    })
}

/// A commit as the compare answer lists it (`commit` schema).
fn commit_json(state: &AppState, owner: &str, repo: &str, bare: &Path, sha: &str) -> Value {
    let format = "%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B";
    let out = run(
        state,
        bare,
        &["log", "-1", &format!("--format={format}"), sha],
    )
    .unwrap_or_default();
    let f: Vec<&str> = out.splitn(9, '\0').collect();
    let field = |i: usize| f.get(i).copied().unwrap_or_default();
    let api = format!("{}/repos/{owner}/{repo}", state.base_url);
    let web = format!("{}/{owner}/{repo}", state.base_url);
    let parents: Vec<Value> = field(1)
        .split_whitespace()
        .map(|p| json!({"sha": p, "url": format!("{api}/commits/{p}"), "html_url": format!("{web}/commit/{p}")}))
        .collect();
    let verified = state.lock().signed.contains(sha);
    json!({
        "url": format!("{api}/commits/{sha}"),
        "sha": sha,
        "node_id": format!("C_{}", &sha[..sha.len().min(10)]),
        "html_url": format!("{web}/commit/{sha}"),
        "comments_url": format!("{api}/commits/{sha}/comments"),
        "commit": {
            "url": format!("{api}/git/commits/{sha}"),
            "author": {"name": field(2), "email": field(3), "date": field(4)},
            "committer": {"name": field(5), "email": field(6), "date": field(7)},
            "message": field(8).trim_end_matches('\n'),
            "tree": {"sha": field(0), "url": format!("{api}/git/trees/{}", field(0))},
            "comment_count": 0,
            "verification": verification(verified),
        },
        "author": null,
        "committer": null,
        "parents": parents,
    })
}

fn verification(verified: bool) -> Value {
    if verified {
        json!({"verified": true, "reason": "valid", "signature": "-----BEGIN PGP SIGNATURE-----\n(GitHub's web-flow key)\n-----END PGP SIGNATURE-----", "payload": "", "verified_at": super::now()})
    } else {
        json!({"verified": false, "reason": "unsigned", "signature": null, "payload": null, "verified_at": null})
    }
}

pub(super) async fn get_ref(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, name)): UrlPath<(String, String, String)>,
) -> Response {
    let Some(bare) = repo_of(&state, &owner, &repo) else {
        return error(StatusCode::NOT_FOUND, "Not Found", REFS_DOCS);
    };
    if is_empty(&state, &bare) {
        return error(StatusCode::CONFLICT, "Git Repository is empty.", REFS_DOCS);
    }
    let full = format!("refs/{name}");
    match run(&state, &bare, &["rev-parse", "--verify", "-q", &full]) {
        Some(sha) => axum::Json(ref_json(&state, &owner, &repo, &full, &sha)).into_response(),
        None => error(StatusCode::NOT_FOUND, "Not Found", REFS_DOCS),
    }
}

pub(super) async fn compare(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, basehead)): UrlPath<(String, String, String)>,
) -> Response {
    let Some(bare) = repo_of(&state, &owner, &repo) else {
        return error(StatusCode::NOT_FOUND, "Not Found", COMPARE_DOCS);
    };
    let Some((base, head)) = basehead.split_once("...") else {
        return error(StatusCode::NOT_FOUND, "Not Found", COMPARE_DOCS);
    };
    let resolve = |rev: &str| {
        run(
            &state,
            &bare,
            &["rev-parse", "--verify", "-q", &format!("{rev}^{{commit}}")],
        )
    };
    let (Some(base), Some(head)) = (resolve(base), resolve(head)) else {
        return error(StatusCode::NOT_FOUND, "Not Found", COMPARE_DOCS);
    };
    let Some(merge_base) = run(&state, &bare, &["merge-base", &base, &head]) else {
        return error(
            StatusCode::NOT_FOUND,
            "No common ancestor between these commits.",
            COMPARE_DOCS,
        );
    };
    let list = |range: &str| {
        run(
            &state,
            &bare,
            &["rev-list", "--reverse", "--topo-order", range],
        )
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>()
    };
    let ahead = list(&format!("{base}..{head}"));
    let behind = list(&format!("{head}..{base}"));
    let status = match (ahead.is_empty(), behind.is_empty()) {
        (true, true) => "identical",
        (false, true) => "ahead",
        (true, false) => "behind",
        (false, false) => "diverged",
    };
    let commits: Vec<Value> = ahead
        .iter()
        .take(250)
        .map(|sha| commit_json(&state, &owner, &repo, &bare, sha))
        .collect();
    let web = format!("{}/{owner}/{repo}", state.base_url);
    axum::Json(json!({
        "url": format!("{}/repos/{owner}/{repo}/compare/{basehead}", state.base_url),
        "html_url": format!("{web}/compare/{basehead}"),
        "permalink_url": format!("{web}/compare/{base}...{head}"),
        "diff_url": format!("{web}/compare/{basehead}.diff"),
        "patch_url": format!("{web}/compare/{basehead}.patch"),
        "base_commit": commit_json(&state, &owner, &repo, &bare, &base),
        "merge_base_commit": commit_json(&state, &owner, &repo, &bare, &merge_base),
        "status": status,
        "ahead_by": ahead.len(),
        "behind_by": behind.len(),
        "total_commits": ahead.len(),
        "commits": commits,
        "files": [],
    }))
    .into_response()
}

pub(super) async fn create_commit(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Some(bare) = repo_of(&state, &owner, &repo) else {
        return error(StatusCode::NOT_FOUND, "Not Found", COMMITS_DOCS);
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "Problems parsing JSON",
            COMMITS_DOCS,
        );
    };
    let (Some(message), Some(tree)) = (body["message"].as_str(), body["tree"].as_str()) else {
        return unprocessable(
            "Invalid request.\n\n\"message\", \"tree\" weren't supplied.",
            COMMITS_DOCS,
        );
    };
    if object_type(&state, &bare, tree).as_deref() != Some("tree") {
        return unprocessable("Tree SHA does not exist", COMMITS_DOCS);
    }
    let parents: Vec<String> = body["parents"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if parents
        .iter()
        .any(|p| object_type(&state, &bare, p).as_deref() != Some("commit"))
    {
        return unprocessable(
            "Parent SHA does not exist or is not a commit object",
            COMMITS_DOCS,
        );
    }
    // Git reads `+00:00`, not `Z`.
    let now = super::now().replace('Z', "+00:00");
    let person = |key: &str| -> (String, String, String) {
        let p = &body[key];
        match (p["name"].as_str(), p["email"].as_str()) {
            (Some(name), Some(email)) => (
                name.to_owned(),
                email.to_owned(),
                p["date"].as_str().unwrap_or(&now).to_owned(),
            ),
            _ => (APP_NAME.to_owned(), APP_EMAIL.to_owned(), now.clone()),
        }
    };
    let signed = body["author"].is_null() && body["committer"].is_null();
    let author = person("author");
    let committer = if body["committer"].is_null() {
        author.clone()
    } else {
        person("committer")
    };
    let mut cmd = git(&state.world);
    cmd.arg("--git-dir").arg(&bare).args(["commit-tree", tree]);
    for p in &parents {
        cmd.args(["-p", p]);
    }
    cmd.env("GIT_AUTHOR_NAME", &author.0)
        .env("GIT_AUTHOR_EMAIL", &author.1)
        .env("GIT_AUTHOR_DATE", &author.2)
        .env("GIT_COMMITTER_NAME", &committer.0)
        .env("GIT_COMMITTER_EMAIL", &committer.1)
        .env("GIT_COMMITTER_DATE", &committer.2)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let made = cmd.spawn().and_then(|mut child| {
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(message.as_bytes())?;
        }
        child.wait_with_output()
    });
    let sha = match made {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Server Error",
                COMMITS_DOCS,
            );
        }
    };
    if signed {
        state.lock().signed.insert(sha.clone());
    }
    let listed = commit_json(&state, &owner, &repo, &bare, &sha);
    let c = &listed["commit"];
    let api = format!("{}/repos/{owner}/{repo}", state.base_url);
    let made = json!({
        "sha": sha,
        "node_id": listed["node_id"],
        "url": format!("{api}/git/commits/{sha}"),
        "html_url": listed["html_url"],
        "author": c["author"],
        "committer": c["committer"],
        "tree": c["tree"],
        "message": c["message"],
        "parents": listed["parents"],
        "verification": c["verification"],
    });
    let location = format!("{api}/git/commits/{sha}");
    (
        StatusCode::CREATED,
        [("location", location)],
        axum::Json(made),
    )
        .into_response()
}

pub(super) async fn create_ref(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Some(bare) = repo_of(&state, &owner, &repo) else {
        return error(StatusCode::NOT_FOUND, "Not Found", REFS_DOCS);
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", REFS_DOCS);
    };
    let (Some(name), Some(sha)) = (body["ref"].as_str(), body["sha"].as_str()) else {
        return unprocessable(
            "Invalid request.\n\n\"ref\", \"sha\" weren't supplied.",
            REFS_DOCS,
        );
    };
    if !name.starts_with("refs/") || name.matches('/').count() < 2 {
        return unprocessable(
            "Reference name must start with 'refs/' and have at least two slashes.",
            REFS_DOCS,
        );
    }
    if object_type(&state, &bare, sha).is_none() {
        return unprocessable("Object does not exist", REFS_DOCS);
    }
    // `update-ref REF NEW ""`: only when the ref does not exist yet.
    if run(&state, &bare, &["update-ref", name, sha, ""]).is_none() {
        return unprocessable("Reference already exists", REFS_DOCS);
    }
    let v = ref_json(&state, &owner, &repo, name, sha);
    let location = v["url"].as_str().unwrap_or_default().to_owned();
    (StatusCode::CREATED, [("location", location)], axum::Json(v)).into_response()
}

pub(super) async fn update_ref(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, name)): UrlPath<(String, String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let Some(bare) = repo_of(&state, &owner, &repo) else {
        return error(StatusCode::NOT_FOUND, "Not Found", REFS_DOCS);
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON", REFS_DOCS);
    };
    let Some(sha) = body["sha"].as_str() else {
        return unprocessable("Invalid request.\n\n\"sha\" wasn't supplied.", REFS_DOCS);
    };
    let force = body["force"].as_bool().unwrap_or(false);
    let full = format!("refs/{name}");
    let race = {
        let mut inner = state.lock();
        let hit = inner.ref_race.as_ref().is_some_and(|(r, branch, _)| {
            *r == repo_name(&owner, &repo) && format!("heads/{branch}") == name
        });
        if hit { inner.ref_race.take() } else { None }
    };
    if let Some((_, _, moved_to)) = race {
        run(&state, &bare, &["update-ref", &full, &moved_to]);
    }
    let Some(old) = run(&state, &bare, &["rev-parse", "--verify", "-q", &full]) else {
        return unprocessable("Reference does not exist", REFS_DOCS);
    };
    if object_type(&state, &bare, sha).is_none() {
        return unprocessable("Object does not exist", REFS_DOCS);
    }
    let fast_forward = run(&state, &bare, &["merge-base", "--is-ancestor", &old, sha]).is_some();
    if !force && !fast_forward {
        return unprocessable("Update is not a fast forward", REFS_DOCS);
    }
    // Compare-and-swap: a push in between is not overwritten.
    if run(&state, &bare, &["update-ref", &full, sha, &old]).is_none() {
        return unprocessable("Update is not a fast forward", REFS_DOCS);
    }
    axum::Json(ref_json(&state, &owner, &repo, &full, sha)).into_response()
}

pub(super) async fn delete_ref(
    State(state): State<Arc<AppState>>,
    UrlPath((owner, repo, name)): UrlPath<(String, String, String)>,
) -> Response {
    let Some(bare) = repo_of(&state, &owner, &repo) else {
        return error(StatusCode::NOT_FOUND, "Not Found", REFS_DOCS);
    };
    let full = format!("refs/{name}");
    if run(&state, &bare, &["rev-parse", "--verify", "-q", &full]).is_none() {
        return unprocessable("Reference does not exist", REFS_DOCS);
    }
    if run(&state, &bare, &["update-ref", "-d", &full]).is_none() {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "Server Error", REFS_DOCS);
    }
    StatusCode::NO_CONTENT.into_response()
}
