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
        RepoUrl(key.to_ascii_lowercase())
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
    fn a_name_without_a_host_names_by_path_suffix() {
        let image = RepoUrl::new("ghcr.io/acme/app");
        assert!(image.is_named_by(&RepoUrl::new("acme/app")));
        assert!(image.is_named_by(&RepoUrl::new("https://ghcr.io/acme/app")));
        assert!(!RepoUrl::new("ghcr.io/acme/app2").is_named_by(&RepoUrl::new("acme/app")));
        assert!(!RepoUrl::new("ghcr.io/xacme/app").is_named_by(&RepoUrl::new("acme/app")));
        assert!(!image.is_named_by(&RepoUrl::new("")));
    }
}
