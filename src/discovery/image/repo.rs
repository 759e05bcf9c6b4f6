//! The `repoURL` of an image subscription, parsed into the registry to talk to and the
//! repository path on it.
//!
//! Owns the accepted spelling (`host[:port]/path`, no scheme, no tag, no digest) and the
//! Docker Hub conventions (`nginx` is `docker.io/library/nginx`, served by
//! `registry-1.docker.io`). Does not talk to the registry: see `registry`.

use super::error::ImageDiscoveryError;

/// Where Docker Hub's registry API lives.
const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// A parsed `repoURL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Repo {
    /// `host[:port]` of the registry API, e.g. `127.0.0.1:5000` or `registry-1.docker.io`.
    pub(crate) registry: String,
    /// The repository path on the registry, e.g. `team/app` or `library/nginx`.
    pub(crate) path: String,
    /// `http` or `https`.
    pub(crate) scheme: &'static str,
    /// The user's spelling, for messages and results.
    pub(crate) display: String,
}

impl Repo {
    /// Parse `repo_url`; `insecure` selects plain HTTP, which a registry on this machine
    /// (`localhost`, `127.0.0.0/8`, `[::1]`) gets without it, as Docker and Kargo's
    /// registry client give it.
    pub(crate) fn parse(repo_url: &str, insecure: bool) -> Result<Self, ImageDiscoveryError> {
        let display = repo_url.trim().to_owned();
        let bad = |reason: &str, hint: &str| {
            ImageDiscoveryError::invalid("repoURL", repo_url, reason, Some(hint))
        };
        if display.is_empty() {
            return Err(bad(
                "it is empty",
                "write `host[:port]/path`, e.g. `ghcr.io/team/app`",
            ));
        }
        if let Some((scheme, _)) = display.split_once("://") {
            return Err(bad(
                &format!("it has a scheme (`{scheme}://`)"),
                "write `host[:port]/path` without a scheme; set `insecure: true` for plain HTTP",
            ));
        }
        if display.contains('@') {
            return Err(bad(
                "it has a digest",
                "subscribe to the repository, without `@sha256:…`",
            ));
        }
        let (first, rest) = display.split_once('/').unwrap_or(("", display.as_str()));
        let is_host = first.contains('.') || first.contains(':') || first == "localhost";
        let (host, path) = if is_host {
            (first, rest)
        } else {
            ("docker.io", display.as_str())
        };
        if path
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(':'))
        {
            return Err(bad(
                "it has a tag",
                "subscribe to the repository; tags are discovered",
            ));
        }
        if let Some(segment) = path.split('/').find(|s| !is_path_segment(s)) {
            return Err(bad(
                &format!("path segment `{segment}` is not a valid repository name"),
                "repository paths are lowercase letters, digits and `.`, `_`, `-` separators",
            ));
        }
        let (registry, path) = match host {
            "docker.io" | "index.docker.io" | DOCKER_HUB_API if !path.contains('/') => {
                (DOCKER_HUB_API.to_owned(), format!("library/{path}"))
            }
            "docker.io" | "index.docker.io" => (DOCKER_HUB_API.to_owned(), path.to_owned()),
            _ => (host.to_owned(), path.to_owned()),
        };
        let scheme = if insecure || is_loopback(&registry) {
            "http"
        } else {
            "https"
        };
        Ok(Self {
            registry,
            path,
            scheme,
            display,
        })
    }

    /// `scheme://registry`, the base of every API URL.
    pub(crate) fn base_url(&self) -> String {
        format!("{}://{}", self.scheme, self.registry)
    }

    /// `registry/path`, the key of this repository in the caches.
    pub(crate) fn key(&self) -> String {
        format!("{}/{}", self.registry, self.path)
    }
}

/// Whether `registry` (`host[:port]`) is this machine: `localhost`, an address in
/// `127.0.0.0/8`, or `[::1]`.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => registry.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
/// One `/`-separated component of a repository name (distribution's grammar, simplified).
fn is_path_segment(segment: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let bytes = segment.as_bytes();
    !segment.is_empty()
        && segment
            .chars()
            .all(|c| alnum(c) || matches!(c, '.' | '_' | '-'))
        && alnum(char::from(bytes[0]))
        && alnum(char::from(bytes[bytes.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_and_path() {
        let repo = Repo::parse("127.0.0.1:5000/team/app", true).unwrap();
        assert_eq!(repo.registry, "127.0.0.1:5000");
        assert_eq!(repo.path, "team/app");
        assert_eq!(repo.base_url(), "http://127.0.0.1:5000");
        assert_eq!(repo.key(), "127.0.0.1:5000/team/app");
    }

    #[test]
    fn a_registry_on_this_machine_speaks_plain_http_without_being_told() {
        for (url, scheme) in [
            ("127.0.0.1:5000/app", "http"),
            ("127.8.0.2/app", "http"),
            ("localhost:5000/app", "http"),
            ("[::1]:5000/app", "http"),
            ("10.0.0.1:5000/app", "https"),
            ("localhost.example.com/app", "https"),
            ("ghcr.io/app", "https"),
        ] {
            assert_eq!(Repo::parse(url, false).unwrap().scheme, scheme, "{url}");
        }
    }

    #[test]
    fn docker_hub_shorthands() {
        let repo = Repo::parse("nginx", false).unwrap();
        assert_eq!(
            (repo.registry.as_str(), repo.path.as_str()),
            (DOCKER_HUB_API, "library/nginx")
        );
        let repo = Repo::parse("bitnami/redis", false).unwrap();
        assert_eq!(repo.path, "bitnami/redis");
        assert_eq!(repo.base_url(), "https://registry-1.docker.io");
        assert_eq!(
            Repo::parse("docker.io/nginx", false).unwrap().path,
            "library/nginx"
        );
    }

    #[test]
    fn rejects_scheme_tag_digest_and_bad_names() {
        let text = |s: &str| Repo::parse(s, false).unwrap_err().to_string();
        assert!(text("https://ghcr.io/a").contains("has a scheme (`https://`)"));
        assert!(text("ghcr.io/a:1.0").contains("has a tag"));
        assert!(text("ghcr.io/a@sha256:00").contains("has a digest"));
        assert!(text("ghcr.io/Team/app").contains("`Team`"));
        assert!(text("  ").contains("empty"));
        assert!(text("ghcr.io/a:1.0").starts_with("invalid `repoURL` `ghcr.io/a:1.0`"));
    }
}
