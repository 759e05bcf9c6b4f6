//! What an authenticated delivery says: [`Reading`], read by the provider's own module
//! from its payload and headers. No authentication and no side effect here.

use axum::http::HeaderMap;
use serde_json::Value;

use crate::api::{
    GenericWebhookActionKind, GenericWebhookTargetKind, RepoUrl, WebhookProvider,
    WebhookReceiverConfig,
};

use super::{azure, bitbucket, gitea, github, gitlab, registries};

/// What a delivery asks of Dray.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Refresh the Warehouses subscribed to these repositories (git, image or chart).
    Named(Vec<RepoUrl>),
    /// Refresh every Warehouse of the project (a generic call naming nothing).
    Everything,
    /// Refresh these Warehouses of the project, by name (a generic receiver's actions).
    Warehouses(Vec<String>),
    /// A pull or merge request was merged or closed: wake the project's running
    /// promotions so that `git-wait-for-pr` looks now.
    ReviewDecided,
    /// The sender's test delivery: answered 200, nothing changes.
    Ping,
    /// An event that changes nothing here, and why.
    Ignored(&'static str),
}

/// `urls` as a reading: naming none is an event ignored (only `generic` refreshes
/// everything when it names nothing).
pub(super) fn named(urls: Vec<RepoUrl>) -> Reading {
    let urls: Vec<RepoUrl> = urls
        .into_iter()
        .filter(|u| !u.as_str().is_empty())
        .collect();
    if urls.is_empty() {
        Reading::Ignored("the delivery names no repository")
    } else {
        Reading::Named(urls)
    }
}

/// The strings at `pointers` in `value` (missing and empty ones skipped).
pub(super) fn strings<'a>(value: &'a Value, pointers: &[&str]) -> Vec<&'a str> {
    pointers
        .iter()
        .filter_map(|p| value.pointer(p).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
        .collect()
}

/// The git repositories at `pointers` in `value`.
pub(super) fn git_urls(value: &Value, pointers: &[&str]) -> Vec<RepoUrl> {
    strings(value, pointers)
        .into_iter()
        .map(RepoUrl::new)
        .collect()
}

/// What `receiver` (a `provider` block) reads from a delivery.
pub(super) fn read(
    provider: WebhookProvider,
    receiver: &WebhookReceiverConfig,
    headers: &HeaderMap,
    payload: &Value,
) -> Reading {
    match provider {
        WebhookProvider::GitHub => github::read(headers, payload),
        WebhookProvider::GitLab => gitlab::read(headers, payload),
        WebhookProvider::Gitea => gitea::read(headers, payload),
        WebhookProvider::Bitbucket => bitbucket::read(headers, payload),
        WebhookProvider::Azure => azure::read(payload),
        WebhookProvider::DockerHub => registries::dockerhub(payload),
        WebhookProvider::Quay => registries::quay(payload),
        WebhookProvider::Harbor => registries::harbor(payload),
        WebhookProvider::Artifactory => registries::artifactory(
            payload,
            receiver
                .artifactory
                .as_ref()
                .and_then(|a| a.virtual_repo_name.as_deref()),
        ),
        WebhookProvider::Registry => registries::distribution(payload),
        WebhookProvider::Generic => generic(receiver, payload),
    }
}

/// A generic call: the receiver's actions name the Warehouses (Kargo's form); without
/// actions, `repoURL` and `repoURLs[]` name repositories, and naming none refreshes every
/// Warehouse of the project.
fn generic(receiver: &WebhookReceiverConfig, payload: &Value) -> Reading {
    let actions = receiver.generic.as_ref().map(|g| g.actions.as_slice());
    if let Some(actions) = actions.filter(|a| !a.is_empty()) {
        let mut names: Vec<String> = actions
            .iter()
            .filter(|a| a.action == GenericWebhookActionKind::Refresh)
            .flat_map(|a| &a.target_selection_criteria)
            .filter(|t| t.kind == GenericWebhookTargetKind::Warehouse)
            .map(|t| t.name.clone())
            .collect();
        names.sort();
        names.dedup();
        return Reading::Warehouses(names);
    }
    let mut repos: Vec<&str> = strings(payload, &["/repoURL"]);
    if let Some(list) = payload.get("repoURLs").and_then(Value::as_array) {
        repos.extend(list.iter().filter_map(Value::as_str));
    }
    if repos.is_empty() {
        Reading::Everything
    } else {
        Reading::Named(repos.into_iter().map(RepoUrl::new).collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A documented example delivery (`tests/fixtures/webhooks`, see its `SOURCES.md`).
    fn fixture(name: &str) -> Value {
        let path = format!(
            "{}/tests/fixtures/webhooks/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    fn event(name: &'static str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, value.parse().unwrap());
        headers
    }

    fn names(reading: Reading) -> Vec<String> {
        match reading {
            Reading::Named(urls) => urls.iter().map(ToString::to_string).collect(),
            other => panic!("expected repositories, got {other:?}"),
        }
    }

    fn reads(provider: WebhookProvider, headers: &HeaderMap, payload: &Value) -> Reading {
        read(
            provider,
            &WebhookReceiverConfig::default(),
            headers,
            payload,
        )
    }

    #[test]
    fn each_documented_payload_names_its_repository() {
        let cases: [(WebhookProvider, HeaderMap, &str, &str); 13] = [
            (
                WebhookProvider::GitHub,
                event("x-github-event", "push"),
                "github-push.json",
                "github.com/jessesuen/test-repo",
            ),
            (
                WebhookProvider::GitLab,
                event("x-gitlab-event", "Push Hook"),
                "gitlab-push.json",
                "example.com/mike/diaspora",
            ),
            (
                WebhookProvider::Registry,
                HeaderMap::new(),
                "registry-push.json",
                "registrycluster.local/library/test",
            ),
            (
                WebhookProvider::Gitea,
                event("x-gitea-event", "push"),
                "gitea-push.json",
                "localhost:3000/gitea/webhooks",
            ),
            (
                WebhookProvider::Gitea,
                event("x-gitea-event", "push"),
                "gitea-push.json",
                "localhost:2222/gitea/webhooks",
            ),
            (
                WebhookProvider::Bitbucket,
                event("x-event-key", "repo:push"),
                "bitbucket-cloud-push.json",
                "api.bitbucket.org/team_name/repo_name",
            ),
            (
                WebhookProvider::Bitbucket,
                event("x-event-key", "repo:refs_changed"),
                "bitbucket-server-refs-changed.json",
                "bitbucketserver/scm/myproject/test-repo",
            ),
            (
                WebhookProvider::Bitbucket,
                event("x-event-key", "repo:refs_changed"),
                "bitbucket-server-refs-changed.json",
                "bitbucketserver:7999/myproject/test-repo",
            ),
            (
                WebhookProvider::Azure,
                HeaderMap::new(),
                "azure-devops-git-push.json",
                "dev.azure.com/my-org/my-project/_git/my-repo",
            ),
            (
                WebhookProvider::Azure,
                HeaderMap::new(),
                "acr-push.json",
                "myregistry.azurecr.io/hello-world",
            ),
            (
                WebhookProvider::DockerHub,
                HeaderMap::new(),
                "dockerhub-push.json",
                "docker.io/svendowideit/testhook",
            ),
            (
                WebhookProvider::Quay,
                HeaderMap::new(),
                "quay-push.json",
                "quay.io/dgangaia/test",
            ),
            (
                WebhookProvider::Harbor,
                HeaderMap::new(),
                "harbor-push.json",
                "localhost/harbor/alpine",
            ),
        ];
        for (provider, headers, file, repo) in cases {
            let named = names(reads(provider, &headers, &fixture(file)));
            assert!(
                named.iter().any(|n| n == repo),
                "{file}: {named:?} lacks {repo}"
            );
        }
        let artifactory = fixture("artifactory-docker-push.json");
        assert_eq!(
            names(registries::artifactory(&artifactory, None)),
            ["example.jfrog.io/docker-remote-cache/library/ubuntu"]
        );
        // Pulled through a virtual repository: the push names it under that key.
        assert_eq!(
            names(registries::artifactory(
                &artifactory,
                Some("docker-virtual")
            )),
            ["example.jfrog.io/docker-virtual/library/ubuntu"]
        );
    }

    #[test]
    fn review_decisions_wake_and_test_deliveries_ping() {
        let closed = json!({"action": "closed", "pull_request": {"merged": true}});
        let gitea = event("x-gitea-event", "pull_request");
        assert_eq!(
            reads(WebhookProvider::Gitea, &gitea, &closed),
            Reading::ReviewDecided
        );
        let opened = json!({"action": "opened"});
        assert!(matches!(
            reads(WebhookProvider::Gitea, &gitea, &opened),
            Reading::Ignored(_)
        ));
        for key in [
            "pullrequest:fulfilled",
            "pullrequest:rejected",
            "pr:merged",
            "pr:declined",
            "pr:deleted",
        ] {
            let headers = event("x-event-key", key);
            assert_eq!(
                reads(WebhookProvider::Bitbucket, &headers, &json!({})),
                Reading::ReviewDecided,
                "{key}"
            );
        }
        let ping = event("x-event-key", "diagnostics:ping");
        assert_eq!(
            reads(WebhookProvider::Bitbucket, &ping, &json!({"test": true})),
            Reading::Ping
        );
        let merged =
            json!({"eventType": "git.pullrequest.merged", "resource": {"status": "completed"}});
        assert_eq!(
            reads(WebhookProvider::Azure, &HeaderMap::new(), &merged),
            Reading::ReviewDecided
        );
        let acr_ping = json!({"id": "1", "action": "ping"});
        assert_eq!(
            reads(WebhookProvider::Azure, &HeaderMap::new(), &acr_ping),
            Reading::Ping
        );
        let github_ping = event("x-github-event", "ping");
        assert_eq!(
            reads(
                WebhookProvider::GitHub,
                &github_ping,
                &json!({"zen": "Keep it logically awesome."})
            ),
            Reading::Ping
        );
    }

    #[test]
    fn other_events_and_payloads_naming_nothing_refresh_nothing() {
        let pull = json!({"type": "PULL_ARTIFACT", "event_data": {"resources": [{"resource_url": "h/p/r:1"}]}});
        assert!(matches!(
            reads(WebhookProvider::Harbor, &HeaderMap::new(), &pull),
            Reading::Ignored(_)
        ));
        let deleted = json!({"domain": "docker", "event_type": "deleted", "data": {}});
        assert!(matches!(
            reads(WebhookProvider::Artifactory, &HeaderMap::new(), &deleted),
            Reading::Ignored(_)
        ));
        let build = json!({"docker_url": "quay.io/a/b", "build_id": "x"});
        assert!(matches!(
            reads(WebhookProvider::Quay, &HeaderMap::new(), &build),
            Reading::Ignored(_)
        ));
        // A push naming no repository refreshes nothing (only `generic` refreshes all).
        let push = event("x-gitea-event", "push");
        assert!(matches!(
            reads(WebhookProvider::Gitea, &push, &json!({})),
            Reading::Ignored(_)
        ));
        assert_eq!(
            reads(WebhookProvider::Generic, &HeaderMap::new(), &json!({})),
            Reading::Everything
        );
    }
}
