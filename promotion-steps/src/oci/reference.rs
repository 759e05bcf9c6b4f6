//! OCI references as Kargo's steps read them (go-containerregistry's rules):
//! `[oci://]registry[:port]/repository[:tag][@sha256:…]`, Docker Hub when the first path
//! segment names no registry, and plain HTTP for a registry on this machine (loopback),
//! as Dray's image discovery decides: go-containerregistry also falls back to plain HTTP
//! for private-network addresses, which Dray does not (docs/kargo-compatibility.md).

use std::fmt;
use std::net::IpAddr;

use super::OciError;

/// Docker Hub's registry name in references, and the host its API answers on.
const DOCKER_HUB: &str = "index.docker.io";
const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// A parsed reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reference {
    /// `oci://` was written: a Helm chart, whose credentials are `helm` ones.
    pub(crate) helm: bool,
    /// `host[:port]`, as written (`index.docker.io` for Docker Hub).
    pub(crate) registry: String,
    /// `team/app` (`library/nginx` for Docker Hub's official images).
    pub(crate) repository: String,
    /// The tag, if written.
    pub(crate) tag: Option<String>,
    /// The digest, if written (`sha256:…`).
    pub(crate) digest: Option<String>,
    /// Plain HTTP (`Some(true)`) or HTTPS (`Some(false)`) whatever the host; `None`: as
    /// go-containerregistry decides (see [`Reference::api_origin`]).
    pub(crate) plain_http: Option<bool>,
}

impl Reference {
    /// Parses `text`; `field` names the config field in errors.
    pub(crate) fn parse(field: &'static str, text: &str) -> Result<Self, OciError> {
        let invalid = |reason: &str| OciError::InvalidReference {
            field,
            reference: text.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = text.trim();
        let (helm, rest) = match trimmed.strip_prefix("oci://") {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        if rest.contains("://") {
            return Err(invalid(
                "write `registry/repository:tag` without a scheme (`oci://` is the only prefix)",
            ));
        }
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (rest, None),
        };
        if let Some(digest) = digest {
            let hex = digest.strip_prefix("sha256:").ok_or_else(|| {
                invalid("the digest must be `sha256:` followed by 64 hexadecimal digits")
            })?;
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid(
                    "the digest must be `sha256:` followed by 64 hexadecimal digits",
                ));
            }
        }
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match name[last_slash..].rfind(':') {
            Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
            None => (name, None),
        };
        if let Some(tag) = tag
            && !valid_tag(tag)
        {
            return Err(invalid(
                "a tag is 1 to 128 letters, digits, `_`, `.` or `-`, not starting with `.` or `-`",
            ));
        }
        let (registry, repository) = match path.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_owned(), rest.to_owned())
            }
            _ if path.contains('/') => (DOCKER_HUB.to_owned(), path.to_owned()),
            _ => (DOCKER_HUB.to_owned(), format!("library/{path}")),
        };
        if registry.is_empty() || repository.is_empty() || !valid_repository(&repository) {
            return Err(invalid(
                "the repository is lower-case letters, digits and `._-` separated by `/`",
            ));
        }
        Ok(Reference {
            helm,
            registry,
            repository,
            tag: tag.map(str::to_owned),
            digest: digest.map(|d| d.to_ascii_lowercase()),
            plain_http: None,
        })
    }

    /// What a manifest request names: the digest when written, else the tag, else `latest`.
    pub(crate) fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// `registry/repository`, the key of its credentials (Kargo's `ref.Context()`).
    pub(crate) fn repository_url(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `scheme://host` of the registry's API: plain HTTP for a loopback registry, HTTPS
    /// otherwise.
    pub(crate) fn api_origin(&self) -> String {
        let host = if self.registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.registry
        };
        let scheme = if self.plain_http.unwrap_or_else(|| plain_http(host)) {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{host}")
    }
}

impl fmt::Display for Reference {
    /// `registry/repository[:tag][@digest]`, without `oci://`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

fn valid_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    tag.len() <= 128
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

fn valid_repository(repository: &str) -> bool {
    repository.split('/').all(|segment| {
        !segment.is_empty()
            && segment
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
    })
}

/// `localhost[:port]` or a loopback address.
fn plain_http(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    if name == "localhost" {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => ip.is_loopback(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";

    #[test]
    fn references_parse_as_kargo_reads_them() {
        let r = Reference::parse("srcRef", "127.0.0.1:5000/team/app:v1").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5000", "team/app", Some("v1"))
        );
        assert_eq!(r.api_origin(), "http://127.0.0.1:5000");
        assert!(!r.helm);
        let r = Reference::parse("srcRef", &format!("oci://ghcr.io/acme/charts/app@{D}")).unwrap();
        assert!(r.helm);
        assert_eq!(r.manifest_reference(), D);
        assert_eq!(r.api_origin(), "https://ghcr.io");
        assert_eq!(r.to_string(), format!("ghcr.io/acme/charts/app@{D}"));
        let r = Reference::parse("srcRef", "nginx").unwrap();
        assert_eq!(r.repository_url(), "index.docker.io/library/nginx");
        assert_eq!(r.manifest_reference(), "latest");
        assert_eq!(r.api_origin(), "https://registry-1.docker.io");
        let r = Reference::parse("srcRef", "localhost:5000/app:1.0").unwrap();
        assert_eq!(r.api_origin(), "http://localhost:5000");
        assert_eq!(
            Reference::parse("srcRef", "10.0.0.3/app:1")
                .unwrap()
                .api_origin(),
            "https://10.0.0.3"
        );
    }

    #[test]
    fn bad_references_are_refused_with_the_field_and_reason() {
        for (text, why) in [
            ("https://ghcr.io/app:1", "without a scheme"),
            ("ghcr.io/app@sha256:abc", "64 hexadecimal digits"),
            ("ghcr.io/App:1", "lower-case"),
            ("ghcr.io/app:-x", "a tag is"),
            ("ghcr.io//app:1", "lower-case"),
        ] {
            let err = Reference::parse("srcRef", text).unwrap_err().to_string();
            assert!(
                err.contains("`srcRef`") && err.contains(why),
                "{text}: {err}"
            );
        }
    }
}
