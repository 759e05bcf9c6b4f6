//! The image registries' payloads, each naming the image (or OCI chart) repository pushed
//! as `host/path`, read as Docker reads an image reference (`RepoUrl::image`: tag and
//! digest dropped, Docker Hub's names written one way):
//! - Docker Hub: `repository.repo_name` (`namespace/name`) on `docker.io`;
//! - Quay: `docker_url` of a repository push (one with `updated_tags`);
//! - Harbor (the "Default" payload format): `PUSH_ARTIFACT`'s
//!   `event_data.resources[].resource_url` (`host/project/repo:tag` or `…@digest`);
//! - Artifactory: a `docker` domain `pushed` event's `jpd_origin` host, the repository key
//!   (or the receiver's `virtualRepoName`) and `data.image_name`, the repository path
//!   Artifactory serves images under (`host/repo-key/image`);
//! - a CNCF distribution registry's notifications: each `push` event's
//!   `request.host/target.repository` (a name without a host when `request.host` is
//!   missing, matched by path suffix).

use serde_json::Value;

use super::reading::{Reading, named, strings};
use crate::api::RepoUrl;

pub(super) fn dockerhub(payload: &Value) -> Reading {
    match strings(payload, &["/repository/repo_name"]).first() {
        Some(name) => named(vec![RepoUrl::image(&format!("docker.io/{name}"))]),
        None => Reading::Ignored("the Docker Hub event names no repository"),
    }
}

pub(super) fn quay(payload: &Value) -> Reading {
    if payload.get("updated_tags").is_none() {
        return Reading::Ignored("Quay notification other than a repository push");
    }
    named(
        strings(payload, &["/docker_url"])
            .into_iter()
            .map(RepoUrl::image)
            .collect(),
    )
}

pub(super) fn harbor(payload: &Value) -> Reading {
    if payload.get("type").and_then(Value::as_str) != Some("PUSH_ARTIFACT") {
        return Reading::Ignored("Harbor event other than PUSH_ARTIFACT");
    }
    let resources = payload
        .pointer("/event_data/resources")
        .and_then(Value::as_array);
    named(
        resources
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("resource_url").and_then(Value::as_str))
            .map(RepoUrl::image)
            .collect(),
    )
}

pub(super) fn artifactory(payload: &Value, virtual_repo: Option<&str>) -> Reading {
    let event = strings(payload, &["/domain", "/event_type"]);
    if event.as_slice() != ["docker", "pushed"] {
        return Reading::Ignored("Artifactory event other than a docker push");
    }
    let origin = strings(payload, &["/jpd_origin"]);
    let host = origin.first().map(|o| {
        let bare = o.split_once("://").map_or(*o, |(_, rest)| rest);
        bare.split('/').next().unwrap_or_default()
    });
    let repo_key = virtual_repo.or_else(|| strings(payload, &["/data/repo_key"]).first().copied());
    // `data.path` is `image/path/tag/manifest.json`; `image_name` says the same.
    let image = strings(payload, &["/data/image_name"])
        .first()
        .map(|s| (*s).to_owned())
        .or_else(|| {
            let path = strings(payload, &["/data/path"]).first().copied()?;
            let parts: Vec<&str> = path.split('/').collect();
            (parts.len() > 2).then(|| parts[..parts.len() - 2].join("/"))
        });
    match (host, repo_key, image) {
        (Some(host), Some(key), Some(image)) if !host.is_empty() => {
            named(vec![RepoUrl::image(&format!("{host}/{key}/{image}"))])
        }
        _ => Reading::Ignored("the Artifactory event names no origin, repository and image"),
    }
}

pub(super) fn distribution(payload: &Value) -> Reading {
    let Some(events) = payload.get("events").and_then(Value::as_array) else {
        return Reading::Ignored("the notification has no events");
    };
    let repos: Vec<RepoUrl> = events
        .iter()
        .filter(|e| e.get("action").and_then(Value::as_str) == Some("push"))
        .filter_map(|e| {
            let repo = e.pointer("/target/repository").and_then(Value::as_str)?;
            Some(match e.pointer("/request/host").and_then(Value::as_str) {
                Some(host) => RepoUrl::image(&format!("{host}/{repo}")),
                None => RepoUrl::new(repo),
            })
        })
        .collect();
    named(repos)
}
