//! [`RepoUrl`]: which repository a URL names, whichever way it is written. The one URL
//! normaliser of Dray: discovery (Warehouse subscriptions, Credentials), promotion (the
//! Credentials steps use), verification and the webhook receivers all compare repositories
//! through it, so `https://h/x`, `https://h/x.git/` and `git@h:x` are one repository
//! everywhere.
//!
//! It owns comparison only. The URL a fetch or push uses is the one the resource names,
//! unchanged; Freight ids hash their own, older normal form (`discovery::mint`), which
//! must not change. Redacting URLs for messages is `discovery::git::redact_url`.

use std::fmt;

/// A repository's identity: host (with port) and path, without scheme, user info
/// (credentials are never kept), query, fragment, trailing `/` or `.git`, in lower case.
///
/// Why each part goes:
/// - the scheme: `https://h/x` and `ssh://git@h/x` reach the same repository, and forges
///   name both in one webhook delivery;
/// - user info: `https://bot:secret@h/x` is `h/x`; a secret must never end up in a key,
///   a log or a status;
/// - case: forges (GitHub, GitLab, Bitbucket) treat paths case-insensitively and their
///   webhook payloads carry the canonical case, which a Warehouse need not repeat.
///
/// A name without a host (`acme/app`, as GitHub package events and some registries name
/// images) is kept as it is written; [`RepoUrl::is_named_by`] matches it by path suffix.
///
/// Hosts that go by several names are written one way:
/// - Docker Hub: `index.docker.io`, `registry-1.docker.io` and `registry.hub.docker.com`
///   are `docker.io`, and a one-segment repository there is under `library/`
///   (`docker.io/nginx` is `docker.io/library/nginx`); [`RepoUrl::image`] also reads a
///   reference without a host (`nginx`, `acme/app`) as Docker Hub's, as Docker does;
/// - Azure DevOps: `https://org.visualstudio.com/[DefaultCollection/]project/_git/repo`,
///   `git@ssh.dev.azure.com:v3/org/project/repo` and
///   `https://org@dev.azure.com/org/project/_git/repo` are
///   `dev.azure.com/org/project/_git/repo` (and `org/_git/repo`, whose project has the
///   repository's name, is `org/repo/_git/repo`);
/// - OCI chart repositories: `oci://host/path/chart` is `host/path/chart`, the same as the
///   image repository at that path (the scheme goes like any other).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoUrl(String);

impl RepoUrl {
    /// The identity of the repository `url` names (any form: `https://…`, `ssh://…`,
    /// scp-like `user@host:path`, `file://…`, or an image reference `host/path`).
    pub fn new(url: &str) -> Self {
        let url = url.trim();
        let url = url.split(['?', '#']).next().unwrap_or_default();
        let (authority, path) = split_authority(url);
        let host = authority.rsplit('@').next().unwrap_or_default();
        let path = path
            .trim_start_matches('/')
            .trim_end_matches('/')
            .trim_end_matches(".git")
            .trim_end_matches('/');
        let key = match (host.is_empty(), path.is_empty()) {
            (true, _) if authority.is_empty() && url.contains("://") => format!("/{path}"),
            (true, _) => path.to_owned(),
            (false, true) => host.to_owned(),
            (false, false) => format!("{host}/{path}"),
        };
        RepoUrl(canonical_host(key.to_ascii_lowercase()))
    }

    /// The identity of the image (or OCI chart) repository `reference` names, read as
    /// Docker reads an image reference: a tag (`:v1`) or digest (`@sha256:…`) is dropped,
    /// and a reference whose first segment is no host (no `.` or `:`, not `localhost`) is
    /// Docker Hub's (`nginx` and `docker.io/library/nginx:1.27` are one repository).
    /// Warehouses' image subscriptions and the registries' webhooks name images this way.
    pub fn image(reference: &str) -> Self {
        let reference = reference.trim();
        let bare = reference
            .split_once("://")
            .map_or(reference, |(_, rest)| rest);
        let bare = without_tag_or_digest(bare);
        let first = bare.split('/').next().unwrap_or_default();
        let has_host = bare.contains('/')
            && (first.contains(['.', ':']) || first.eq_ignore_ascii_case("localhost"));
        if has_host || bare.is_empty() {
            RepoUrl::new(bare)
        } else {
            RepoUrl::new(&format!("docker.io/{bare}"))
        }
    }

    /// The normal form, e.g. `github.com/acme/config`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `named` (from a webhook, a Credential, a request) names this repository:
    /// the same identity, or a name without a host that is a path suffix of this one
    /// (`acme/app` names `ghcr.io/acme/app`, not `ghcr.io/acme/app2`).
    pub fn is_named_by(&self, named: &RepoUrl) -> bool {
        self == named
            || (!named.0.is_empty()
                && self
                    .0
                    .strip_suffix(named.0.as_str())
                    .is_some_and(|rest| rest.ends_with('/')))
    }
}

/// `(authority, path)` of `url`: after `scheme://`, or of the scp-like `user@host:path`
/// (an `@` before the first `:`, and no `/` before that `:`); otherwise the whole text up
/// to its first `/` is the authority (`127.0.0.1:5000/demo/app`, `ghcr.io/acme/app`).
fn split_authority(url: &str) -> (&str, &str) {
    if let Some((_, rest)) = url.split_once("://") {
        return rest.split_once('/').unwrap_or((rest, ""));
    }
    if let Some(colon) = url.find(':') {
        let before = &url[..colon];
        if before.contains('@') && !before.contains('/') {
            return (before, &url[colon + 1..]);
        }
    }
    url.split_once('/').unwrap_or((url, ""))
}

/// `reference` without its `@digest` and its `:tag` (a `:` after the last `/`).
fn without_tag_or_digest(reference: &str) -> &str {
    let reference = reference.split('@').next().unwrap_or_default();
    let last = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[last..].find(':') {
        Some(colon) => &reference[..last + colon],
        None => reference,
    }
}

/// `key` (lower case, `host/path`) with the host's aliases written one way: Docker Hub's
/// and Azure DevOps' (see [`RepoUrl`]).
fn canonical_host(key: String) -> String {
    let Some((host, path)) = key.split_once('/') else {
        return match key.as_str() {
            "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
                "docker.io".to_owned()
            }
            _ => key,
        };
    };
    match host {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            if path.contains('/') {
                format!("docker.io/{path}")
            } else {
                format!("docker.io/library/{path}")
            }
        }
        // `git@ssh.dev.azure.com:v3/org/project/repo`.
        "ssh.dev.azure.com" | "vs-ssh.visualstudio.com" => match path.strip_prefix("v3/") {
            Some(rest) => match rest.splitn(3, '/').collect::<Vec<_>>().as_slice() {
                [org, project, repo] => azure_devops(org, &format!("{project}/_git/{repo}")),
                _ => key,
            },
            None => key,
        },
        "dev.azure.com" => match path.split_once('/') {
            Some((org, rest)) => azure_devops(org, rest),
            None => key,
        },
        // `https://org.visualstudio.com/[DefaultCollection/]project/_git/repo`.
        _ => match host.strip_suffix(".visualstudio.com") {
            Some(org) if !org.contains('.') => {
                let rest = path.strip_prefix("defaultcollection/").unwrap_or(path);
                azure_devops(org, rest)
            }
            _ => key,
        },
    }
}

/// `dev.azure.com/{org}/{rest}`, where `rest` is `project/_git/repo`, or `_git/repo` (the
/// project named like the repository).
fn azure_devops(org: &str, rest: &str) -> String {
    match rest.strip_prefix("_git/") {
        Some(repo) => format!("dev.azure.com/{org}/{repo}/_git/{repo}"),
        None => format!("dev.azure.com/{org}/{rest}"),
    }
}

impl From<&str> for RepoUrl {
    fn from(url: &str) -> Self {
        RepoUrl::new(url)
    }
}

impl From<&String> for RepoUrl {
    fn from(url: &String) -> Self {
        RepoUrl::new(url)
    }
}

impl fmt::Display for RepoUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) {
        assert_eq!(RepoUrl::new(a), RepoUrl::new(b), "`{a}` and `{b}`");
    }

    #[test]
    fn scheme_and_host_case_do_not_matter() {
        same(
            "HTTPS://GitHub.COM/acme/config",
            "https://github.com/acme/config",
        );
        assert_eq!(
            RepoUrl::new("https://GitHub.com/acme/config.git").as_str(),
            "github.com/acme/config"
        );
    }

    #[test]
    fn a_trailing_git_or_slash_does_not_matter() {
        for url in [
            "https://h/x.git",
            "https://h/x/",
            "https://h/x.git/",
            "https://h/x/.git",
        ] {
            same(url, "https://h/x");
        }
        assert_ne!(
            RepoUrl::new("https://h/x.gitops"),
            RepoUrl::new("https://h/x")
        );
        assert_ne!(RepoUrl::new("https://h/xy"), RepoUrl::new("https://h/x"));
    }

    #[test]
    fn ssh_urls_and_scp_like_urls_are_one_repository() {
        same("ssh://git@h/x", "git@h:x");
        same("ssh://git@h/team/x.git", "git@h:team/x.git");
        same("git@h:/srv/x.git", "ssh://git@h/srv/x");
        same(
            "git@github.com:acme/config.git",
            "https://github.com/acme/config",
        );
        assert_eq!(
            RepoUrl::new("git@github.com:acme/config.git").as_str(),
            "github.com/acme/config"
        );
        assert_ne!(RepoUrl::new("ssh://git@h:2222/x"), RepoUrl::new("git@h:x"));
    }

    #[test]
    fn credentials_in_the_url_are_never_kept() {
        for url in [
            "https://bot:s3cret@h/x.git",
            "https://s3cret@h/x",
            "ssh://s3cret@h/x",
            "https://h/x?token=s3cret",
        ] {
            let repo = RepoUrl::new(url);
            assert_eq!(repo.as_str(), "h/x", "{url}");
            assert!(!repo.to_string().contains("s3cret"), "{url}");
            assert!(!format!("{repo:?}").contains("s3cret"), "{url}");
        }
        // An `@` in the path is not user info.
        assert_eq!(RepoUrl::new("https://h.io/a@b.git").as_str(), "h.io/a@b");
    }

    #[test]
    fn image_references_and_local_paths_keep_their_shape() {
        assert_eq!(
            RepoUrl::new("127.0.0.1:5000/demo/app").as_str(),
            "127.0.0.1:5000/demo/app"
        );
        assert_eq!(
            RepoUrl::new("http://user@127.0.0.1:8080/config.git/").as_str(),
            "127.0.0.1:8080/config"
        );
        assert_eq!(RepoUrl::new("file:///tmp/x.git").as_str(), "/tmp/x");
        same("  https://h/x  ", "https://h/x");
    }

    #[test]
    fn docker_hub_is_one_host_and_its_official_images_are_under_library() {
        for name in [
            "docker.io/library/nginx",
            "docker.io/nginx",
            "index.docker.io/library/nginx",
            "registry-1.docker.io/library/nginx",
            "registry.hub.docker.com/library/nginx",
            "oci://registry-1.docker.io/library/nginx",
        ] {
            assert_eq!(
                RepoUrl::new(name).as_str(),
                "docker.io/library/nginx",
                "{name}"
            );
        }
        for reference in [
            "nginx",
            "nginx:1.27",
            "library/nginx",
            "docker.io/nginx@sha256:ab",
        ] {
            assert_eq!(
                RepoUrl::image(reference).as_str(),
                "docker.io/library/nginx",
                "{reference}"
            );
        }
        // Docker Hub's payloads name `namespace/repository`.
        assert_eq!(
            RepoUrl::image("svendowideit/testhook").as_str(),
            "docker.io/svendowideit/testhook"
        );
        // A user's repository is not an official image.
        assert_ne!(
            RepoUrl::new("docker.io/acme/nginx"),
            RepoUrl::new("docker.io/nginx")
        );
    }

    #[test]
    fn image_references_lose_their_tag_and_digest_but_keep_their_port() {
        for (reference, repo) in [
            (
                "harbor.example.com/project/repo:v1",
                "harbor.example.com/project/repo",
            ),
            ("127.0.0.1:5000/demo/app:1.0.0", "127.0.0.1:5000/demo/app"),
            ("127.0.0.1:5000/demo/app", "127.0.0.1:5000/demo/app"),
            (
                "localhost/harbor/alpine@sha256:954b37",
                "localhost/harbor/alpine",
            ),
            ("quay.io/devtable/ubuntu", "quay.io/devtable/ubuntu"),
            (
                "myregistry.azurecr.io/hello-world:v1",
                "myregistry.azurecr.io/hello-world",
            ),
            ("oci://ghcr.io/acme/charts/app", "ghcr.io/acme/charts/app"),
        ] {
            assert_eq!(RepoUrl::image(reference).as_str(), repo, "{reference}");
        }
        // An OCI chart subscription and the image webhook naming its path are one.
        same(
            "oci://myregistry.azurecr.io/charts/app",
            "myregistry.azurecr.io/charts/app",
        );
    }

    #[test]
    fn azure_devops_urls_are_one_repository_however_they_are_written() {
        for url in [
            "https://dev.azure.com/fabrikam/Fabrikam-Fiber/_git/app",
            "https://fabrikam@dev.azure.com/fabrikam/Fabrikam-Fiber/_git/app",
            "git@ssh.dev.azure.com:v3/fabrikam/Fabrikam-Fiber/app",
            "https://fabrikam.visualstudio.com/Fabrikam-Fiber/_git/app",
            "https://fabrikam.visualstudio.com/DefaultCollection/Fabrikam-Fiber/_git/app",
            "fabrikam@vs-ssh.visualstudio.com:v3/fabrikam/Fabrikam-Fiber/app",
        ] {
            assert_eq!(
                RepoUrl::new(url).as_str(),
                "dev.azure.com/fabrikam/fabrikam-fiber/_git/app",
                "{url}"
            );
        }
        // The repository named like its project (Azure DevOps' documented example).
        same(
            "https://fabrikam-fiber-inc.visualstudio.com/DefaultCollection/_git/Fabrikam-Fiber-Git",
            "https://dev.azure.com/fabrikam-fiber-inc/Fabrikam-Fiber-Git/_git/Fabrikam-Fiber-Git",
        );
        assert_ne!(
            RepoUrl::new("https://dev.azure.com/fabrikam/other/_git/app"),
            RepoUrl::new("https://dev.azure.com/fabrikam/Fabrikam-Fiber/_git/app")
        );
    }

    #[test]
    fn bitbucket_clone_links_name_their_repository() {
        // Cloud: the clone links carry the user, the html link does not.
        same(
            "https://jdoe@bitbucket.org/team/repo.git",
            "https://bitbucket.org/team/repo",
        );
        same(
            "git@bitbucket.org:team/repo.git",
            "https://bitbucket.org/team/repo",
        );
        // Server: the http clone link is under `/scm/`, with the project key in capitals.
        same(
            "https://bitbucket.example.com/scm/PROJ/repo.git",
            "https://bitbucket.example.com/scm/proj/repo",
        );
    }

    #[test]
    fn a_name_without_a_host_names_by_path_suffix() {
        let image = RepoUrl::new("ghcr.io/acme/app");
        assert!(image.is_named_by(&RepoUrl::new("acme/app")));
        assert!(image.is_named_by(&RepoUrl::new("https://ghcr.io/acme/app")));
        assert!(!RepoUrl::new("ghcr.io/acme/app2").is_named_by(&RepoUrl::new("acme/app")));
        assert!(!RepoUrl::new("ghcr.io/xacme/app").is_named_by(&RepoUrl::new("acme/app")));
        assert!(!image.is_named_by(&RepoUrl::new("")));
    }
}
